"""Importing llama-bench's own outputs (``gguf-bench import``): its CSV, JSON, JSONL and markdown tables read into
this project's rows, stored as one run (History, Compare, ``export``), or written as ``[[result]]`` tables of the
public reference table (``profiles/reference/llama_bench_public.toml``).

``formats`` parses each printer's text into llama-bench's own fields (``llama-bench.cpp``: ``test::get_fields``,
``markdown_printer``); ``rows`` maps them onto the field table's columns, deriving only what the figures give
(a pp test's prefill rate and TTFT, a tg test's decode rate); ``public_toml`` pairs each file's pp and tg rows into
reference results; ``load`` reads the files (bounded, one line per bad file) and stores a run.
"""

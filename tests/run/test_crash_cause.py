"""The cause of a worker crash, read back from its log (llama.cpp's log and the process's stderr)."""

from __future__ import annotations

from engines.llama_log import crash_cause

ABORT_LOG = """llama_model_loader: loaded meta data with 30 key-value pairs
/tmp/pip-build/vendor/llama.cpp/src/llama-model.cpp:1328: GGML_ASSERT(hparams.n_layer_all > 0) failed
ptrace: Operation not permitted.
#2  0x00007f29d8d4e7de in ggml_abort () from /venv/llama_cpp/lib/libggml-base.so.0
465	Python/clinic/bltinmodule.c.h: No such file or directory.
[Inferior 1 (process 6734) detached]
"""


def test_the_assertion_line_is_the_cause_with_the_path_cut_to_the_file_name() -> None:
    assert crash_cause(ABORT_LOG) == "llama-model.cpp:1328: GGML_ASSERT(hparams.n_layer_all > 0) failed"


def test_the_last_error_wins_and_a_clean_log_has_no_cause() -> None:
    log = "llama_model_load: error loading model: tensor 'x' is corrupted\nterminate called after throwing\n"
    assert crash_cause(log) == "terminate called after throwing"
    assert crash_cause("llama_context: n_ctx = 512\nload_tensors: CPU model buffer size = 90 MiB\n") is None


def test_a_very_long_cause_is_cut() -> None:
    cause = crash_cause("error: " + "x" * 1000, max_chars=50)
    assert cause is not None and len(cause) == 50 and cause.endswith("…")

"""The public fit: expected GPU figures from published llama-bench results (``data``), fitted per GPU architecture
(``arch_fit``, ``fit``), with bands by situation (``bands``), checked on rows held out by source (``held_out``) and
kept on disk between runs (``fit_cache``)."""

"""``gguf-bench``, the command line."""

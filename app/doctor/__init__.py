"""Doctor: which backends llama.cpp was built with, which devices it and the machine see, whether weight
repacking is safe here, and the command that fixes a mismatch (``gguf-bench doctor``, the window's hardware facts).
"""

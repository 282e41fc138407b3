"""Compare past runs (measured) and model files (predicted): which entries, their names, figures and ratios.

The window's Compare view draws these; ``gguf-bench compare`` prints the same table from the same functions.
"""

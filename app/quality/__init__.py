"""Quality: perplexity and KL divergence of quantized files against a reference, as llama.cpp's perplexity tool
computes them (``gguf-bench quality``).

``plan`` checks the files and the text before anything runs; ``session`` drives the worker's quality job and
stores its rows; ``scores`` holds the formulas the worker applies to each chunk's logits.
"""

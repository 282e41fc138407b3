"""Quantize: write quantized variants of a model with llama.cpp's quantizer (``gguf-bench quantize``).

``plan`` checks types, source and outputs before anything is written; ``session`` drives the worker's quantize
job. The lineage the outputs record in their headers is app.model.lineage.
"""

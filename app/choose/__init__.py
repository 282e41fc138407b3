"""Choose: which quantization of a model, with which KV type and offload, for a GPU or this machine
(``gguf-bench choose``, the window's chooser).

``verdicts`` holds the pure logic (a verdict per file, the recommendation); ``chooser`` reads the files (local
paths, folders, URLs), the store's measured rows and quality scores, and asks the one expected-figure policy.
"""

"""Remote servers: benchmark an OpenAI-compatible server (llama-server, vLLM…) over HTTP
(``gguf-bench run --url``, the window's remote dialog).

``session`` runs the requests as a sweep session; ``rows`` summarises them (latency percentiles, goodput). The HTTP
engine itself is engines.openai_http. Reading GGUF headers over HTTP is another feature: app.model.gguf_http.
"""

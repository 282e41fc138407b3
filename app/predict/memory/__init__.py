"""Memory: what a model needs where. The KV cache, recurrent state and compute buffer (``buffers``), whether a
placement fits the device and system RAM (``fit``), weight repacking's host copies (``repack``) and the host side of
a machine that is not this one (``host``)."""

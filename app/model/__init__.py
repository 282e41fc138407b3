"""GGUF files: reading the header (bounded, validating), model facts, KV-cache sizes, the model library."""

"""GGUF Workbench: measure prefill and decode of local LLMs beside their predicted ceilings."""

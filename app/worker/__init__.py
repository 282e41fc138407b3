"""The worker process: the only place a model is loaded; runs tests and emits events."""

"""Predictions from a GGUF's facts and the hardware, by what a figure is: ``ceilings`` (the fastest a placement can
run), ``memory`` (what it needs where), ``machine_fit`` (what this machine achieves), ``public`` (what published
results say a GPU achieves) and :func:`app.predict.answer.answer`, the one place an expected figure is decided.
Outside this package only ``answer``, ``machine``, ``settings`` and ``profiles`` are imported."""

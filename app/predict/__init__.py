"""Predictions from a GGUF's facts and the hardware: ceilings, memory and fit, hardware profiles, the fitted model
a calibration saves, and the one policy for where an expected figure comes from (``expected_sources``)."""

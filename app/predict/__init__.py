"""Predictions from a GGUF's facts and the hardware: ceilings, memory and fit, hardware profiles, calibration."""

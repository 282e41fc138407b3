"""Inference back ends behind one protocol (engines/base.py)."""

"""This machine, looked at: host facts and readings, NVIDIA GPUs, the CPU probe and peaks, the 10 Hz sampler, the
llama.cpp build and devices, and the repack crash guard. Readings that cannot be taken are "not available".
"""

"""Per-device accounting of a loaded model and its context, from what llama.cpp logged (engines.llama_log).

The model's buffers are logged when it loads, the KV cache and compute buffers when a context is built; the
layers' devices come from the load. This module puts them together per device; nothing here calls llama.cpp.
"""

from __future__ import annotations

from collections.abc import Mapping

from engines.base import HOST_DEVICE, DeviceMemory, MemoryReport

Buffers = Mapping[str, Mapping[str, float]]  # device -> {"weights"|"kv"|"compute": bytes}


def device_memory(load: Buffers, context: Buffers, layers: Mapping[str, int]) -> tuple[DeviceMemory, ...]:
    """One entry per device seen in any of the three: the host ("CPU") first, then the devices by name."""
    names = set(load) | set(context) | set(layers)
    ordered = ([HOST_DEVICE] if HOST_DEVICE in names else []) + sorted(names - {HOST_DEVICE})
    return tuple(
        DeviceMemory(device=name, n_layers=int(layers.get(name, 0)),
                     weights_bytes=float(load.get(name, {}).get("weights", 0.0)),
                     kv_bytes=float(context.get(name, {}).get("kv", 0.0)),
                     compute_bytes=float(context.get(name, {}).get("compute", 0.0)))
        for name in ordered)


def memory_report(load: Buffers, context: Buffers, layers: Mapping[str, int]) -> MemoryReport:
    """The totals over every device, and the per-device entries beside them."""
    devices = device_memory(load, context, layers)
    return MemoryReport(weights_bytes=sum(d.weights_bytes for d in devices),
                        kv_bytes=sum(d.kv_bytes for d in devices),
                        compute_bytes=sum(d.compute_bytes for d in devices), devices=devices)

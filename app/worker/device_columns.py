"""A row's per-device columns from the engine's memory report, and the imposed device memory limit.

``device_buffers`` is compact JSON, one entry per device (the host "CPU" first): the layers llama.cpp placed there
and its weights, KV cache and compute buffer bytes. ``gpu_*_bytes`` add up every device that is not the host: 0 on a
CPU-only build, where llama.cpp allocates nothing elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

from engines.base import ContextAllocError, MemoryReport

MIB = 2**20


def device_columns(report: MemoryReport | None) -> dict[str, Any]:
    """device_buffers and gpu_weights_bytes / gpu_kv_bytes / gpu_compute_bytes; {} without a report."""
    if report is None or not report.devices:
        return {}
    per_device = {d.device: {"layers": d.n_layers, "weights_bytes": round(d.weights_bytes),
                             "kv_bytes": round(d.kv_bytes), "compute_bytes": round(d.compute_bytes)}
                  for d in report.devices}
    gpus = [d for d in report.devices if not d.is_host]
    return {
        "device_buffers": json.dumps(per_device, separators=(",", ":")),
        "gpu_weights_bytes": round(sum(d.weights_bytes for d in gpus)),
        "gpu_kv_bytes": round(sum(d.kv_bytes for d in gpus)),
        "gpu_compute_bytes": round(sum(d.compute_bytes for d in gpus)),
    }


def check_device_limit(report: MemoryReport | None, limit_mib: int) -> None:
    """Raise ContextAllocError when llama.cpp put more than ``limit_mib`` MiB on one GPU device (0: no limit).

    The limit stands for a smaller device than the one the test runs on; the figures are llama.cpp's own.
    """
    if not limit_mib or report is None:
        return
    for d in report.devices:
        if not d.is_host and d.total_bytes > limit_mib * MIB:
            raise ContextAllocError(
                f"over the device memory limit: llama.cpp allocated {d.total_bytes / MIB:.1f} MiB on {d.device} "
                f"(weights {d.weights_bytes / MIB:.1f} + KV cache {d.kv_bytes / MIB:.1f} + compute "
                f"{d.compute_bytes / MIB:.1f} MiB), more than the {limit_mib} MiB of --device-mem-limit")

"""Fit check: device need, partial offload, unified memory, the largest context."""

from __future__ import annotations

from app.predict.memory.buffers import compute_buffer_bytes_for
from app.predict.memory.fit import DEFAULT_GPU_OVERHEAD_BYTES, fit_check
from app.predict.profiles import GIB
from tests.predict.samples import make_facts


def test_fit_check_fits() -> None:
    facts = make_facts()
    fit = fit_check(facts, 8 * GIB, 4096)
    assert fit.status == "fits" and fit.fits
    assert fit.max_ngl == 33 and fit.n_gpu_layers == 33
    assert fit.kv_bytes == 4096 * 131072 and fit.cpu_kv_bytes == 0
    assert fit.overhead_bytes == DEFAULT_GPU_OVERHEAD_BYTES
    assert fit.needed_bytes == fit.weight_bytes + fit.kv_bytes + fit.compute_buffer_bytes + fit.overhead_bytes
    assert fit.compute_buffer_bytes == round(compute_buffer_bytes_for(facts, 4096))
    # max_ctx is the exact boundary (in 256-token steps)
    assert 4096 < fit.max_ctx < facts.n_ctx_train
    assert fit_check(facts, 8 * GIB, fit.max_ctx).fits
    assert not fit_check(facts, 8 * GIB, fit.max_ctx + 256).fits


def test_fit_check_partial_and_does_not_fit() -> None:
    facts = make_facts()
    fit = fit_check(facts, 4 * GIB, 4096)
    assert fit.status == "partial" and not fit.fits
    assert 1 <= fit.max_ngl < 33
    assert fit_check(facts, 4 * GIB, 4096, n_gpu_layers=fit.max_ngl).fits
    assert not fit_check(facts, 4 * GIB, 4096, n_gpu_layers=fit.max_ngl + 1).fits
    asked = fit_check(facts, 8 * GIB, 4096, n_gpu_layers=10)
    assert asked.status == "partial" and asked.fits and asked.cpu_kv_bytes == 23 * 4096 * 4096
    tiny = fit_check(facts, GIB // 2, 4096)  # compute buffer + overhead alone exceed it
    assert tiny.status == "does_not_fit" and tiny.max_ngl == 0 and tiny.max_ctx == 0
    cpu_only = fit_check(facts, 8 * GIB, 4096, n_gpu_layers=0)
    assert cpu_only.needed_bytes == 0 and cpu_only.status == "partial"
    assert fit_check(facts, 4 * GIB, 4096, host_ram_bytes=1).status == "does_not_fit"


def test_fit_check_unified_memory() -> None:
    facts = make_facts()
    fit = fit_check(facts, 16 * GIB, 4096, unified=True)
    assert fit.status == "fits" and fit.budget_bytes == 12 * GIB and fit.overhead_bytes == 0
    assert fit.weight_bytes == facts.weight_bytes
    small = fit_check(facts, 4 * GIB, 4096, unified=True)  # 3 GiB usable < 4 GB of weights
    assert small.status == "does_not_fit" and small.max_ngl == 0


def test_fit_check_quantized_cache_and_sliding_window_fit_longer() -> None:
    facts = make_facts()
    f16 = fit_check(facts, 8 * GIB, 4096)
    q8 = fit_check(facts, 8 * GIB, 4096, "q8_0", flash_attn=True)
    assert q8.max_ctx > f16.max_ctx
    swa = make_facts(swa_layers=tuple(range(0, 32, 2)), swa_window=4096)
    assert fit_check(swa, 8 * GIB, 4096).max_ctx > f16.max_ctx

"""``choose --measure``: the measured search toward a speed floor (pure, over a labelled fake measurer), its cache,
the command's refusals, and one real search on SmolLM2 whose second run is answered from the cache."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.choose.chooser import ChooseRequest, run_choose
from app.choose.measure_cache import CachedMeasurement, MeasureCache, file_identity
from app.choose.measure_search import (
    MEASURE_N_GEN,
    MEASURE_N_PROMPT,
    Candidate,
    MeasureCancelled,
    MeasureFailed,
    Measurer,
    StepKind,
    answer,
    context_depth,
    depth_scale,
    gpu_placement_note,
    measure_depth,
    measure_toward_floor,
    measurement_key,
    quality_order,
    search,
    spec_for,
    step_line,
)
from app.choose.verdicts import Figure, FileChoice, Quality
from app.cli.main import main
from app.results.quality_store import model_key, save_quality_rows
from app.results.row_types import QualityRow, ResultRow
from app.results.store import ResultStore
from app.telemetry.cpu_probe import CpuProbe, save_probe
from app.telemetry.machine import ProbeMode, scan_machine

MIB = 2**20
MACHINE = {"cpu_model": "Test CPU 9000", "gpu_info": ""}


def _choice(name: str, bpw: float, decode: Figure, *, status: str = "fits", ngl: int = 0, ncmoe: int = 0,
            kld: float | None = None, source: str | None = None, ttft: Figure | None = None,
            empty: Figure | None = None, decode_depth: int = 8000) -> FileChoice:
    return FileChoice(
        source=source or f"/models/{name}", filename=name, file_type="Q4_1", size_bytes=100 * MIB,
        bits_per_weight=bpw, n_layer=30, status=status, n_gpu_layers=ngl, type_k="f16",
        kv_types_fitting=("f16",), memory_bytes=200 * MIB, budget_bytes=8000 * MIB, weights_bytes=100 * MIB,
        kv_bytes=50 * MIB, compute_bytes=10 * MIB, overhead_bytes=40 * MIB, decode_tps=decode,
        ttft_ms=ttft or Figure(500.0, "ceiling"), quality=Quality(kld) if kld is not None else None, n_cpu_moe=ncmoe,
        decode_empty_tps=empty, decode_depth=decode_depth)


def _expected(value: float, low: float, high: float) -> Figure:
    return Figure(value, "expected", low, high, "test fit")


class FakeMeasurer:
    """Test double for the worker-backed Measurer: a fixed decode rate per (file, -ngl, -ncmoe), every call kept."""

    def __init__(self, speeds: Callable[[Candidate], float]) -> None:
        self.speeds = speeds
        self.calls: list[Candidate] = []

    def __call__(self, c: Candidate) -> float:
        self.calls.append(c)
        return self.speeds(c)


def test_best_quality_first_rules_out_by_prediction_and_stops_early() -> None:
    files = [
        _choice("f16.gguf", 16.0, _expected(8.0, 6.0, 9.5)),  # its whole band is below 20: never run
        _choice("q8.gguf", 8.5, _expected(22.0, 15.0, 30.0)),  # the band straddles 20: measured, 17 < 20
        _choice("q4.gguf", 4.5, _expected(40.0, 30.0, 50.0)),  # the pick
        _choice("q5.gguf", 5.5, _expected(30.0, 25.0, 35.0)),  # better than q4 by bits: measured before it
        _choice("q2.gguf", 2.6, _expected(60.0, 50.0, 70.0)),  # worse: not needed
    ]
    speeds = {"q8.gguf": 17.0, "q5.gguf": 19.9, "q4.gguf": 41.2, "q2.gguf": 80.0}
    fake = FakeMeasurer(lambda c: speeds[c.choice.filename])
    result = search(files, 20.0, fake)
    assert [c.choice.filename for c in fake.calls] == ["q8.gguf", "q5.gguf", "q4.gguf"]
    assert [(s.candidate.choice.filename, s.kind) for s in result.steps] == [
        ("f16.gguf", StepKind.RULED_OUT), ("q8.gguf", StepKind.MEASURED), ("q5.gguf", StepKind.MEASURED),
        ("q4.gguf", StepKind.MEASURED)]
    assert result.pick is not None and result.pick.choice.filename == "q4.gguf" and result.pick_decode_tps == 41.2
    assert [c.filename for c in result.not_needed] == ["q2.gguf"]
    assert result.count(StepKind.RULED_OUT) == 1
    assert step_line(result.steps[0]) == "ruled out: f16.gguf (predicted 6.0–9.5 tok/s, below the 20 floor)"
    a = answer(result, [], 8192, "counts")
    assert a.sentence.startswith("Measured here: run q4.gguf (Q4_1) at -ngl 0 -ctk f16: 41.2 tok/s at 8,192 tokens")
    assert "q8.gguf: below the 20 tok/s floor (17.0 measured)" in a.sentence and "f16.gguf: predicted" in a.sentence
    assert a.command.startswith("llama-server -m /models/q4.gguf -ngl 0 -c 8192")


def test_a_ceiling_rules_out_but_an_expected_figure_without_band_does_not() -> None:
    files = [_choice("a.gguf", 16.0, Figure(15.0, "ceiling")), _choice("b.gguf", 8.0, Figure(15.0, "expected")),
             _choice("c.gguf", 4.0, Figure(15.0, "measured"))]
    fake = FakeMeasurer(lambda c: 10.0)
    result = search(files, 20.0, fake)
    assert [s.kind for s in result.steps] == [StepKind.RULED_OUT, StepKind.MEASURED, StepKind.MEASURED]
    assert result.pick is None and "at most 15.0 tok/s (ceiling)" in result.steps[0].why
    assert answer(result, [], 4096, "").sentence == (
        "No file meets the 20 tok/s floor as measured here: the fastest measured is b.gguf at -ngl 0 -ctk f16 at "
        "10.0 tok/s.")


def test_order_is_by_kld_when_every_file_has_one_and_the_kld_limit_drops_files() -> None:
    files = [_choice("big.gguf", 16.0, Figure(50.0, "ceiling"), kld=0.2),
             _choice("mid.gguf", 8.0, Figure(50.0, "ceiling"), kld=0.01),
             _choice("small.gguf", 4.0, Figure(50.0, "ceiling"), kld=0.05),
             _choice("nofit.gguf", 6.0, Figure(50.0, "ceiling"), kld=0.0, status="does_not_fit")]
    assert [c.filename for c in quality_order(files)] == ["mid.gguf", "small.gguf", "big.gguf"]
    assert [c.filename for c in quality_order(files, max_kld=0.1)] == ["mid.gguf", "small.gguf"]
    files[1] = replace(files[1], quality=None)  # no quality figure at all: taken as the worst
    assert [c.filename for c in quality_order(files)] == ["small.gguf", "big.gguf", "mid.gguf"]


def test_gpu_partial_offload_binary_searches_the_fewest_layers_that_meet_the_floor() -> None:
    c = _choice("big.gguf", 8.0, _expected(30.0, 20.0, 40.0), status="partial", ngl=24)
    fake = FakeMeasurer(lambda cand: 5.0 + cand.n_gpu_layers)  # 5 tok/s on the CPU, one more per layer offloaded
    result = search([c], 20.0, fake, gpu_offload=True)
    assert result.pick is not None and result.pick.n_gpu_layers == 15 and result.pick_decode_tps == 20.0
    assert fake.calls[0].n_gpu_layers == 24  # the fit's bound first: the file meets the floor there
    assert len(fake.calls) <= 1 + 5  # then a binary search over 0..24
    assert all(s.meets_floor == (s.candidate.n_gpu_layers >= 15) for s in result.steps)
    assert "-ngl 15 -c 8192" in answer(result, [], 8192, "").command

    def cancelled_on_the_third(cand: Candidate) -> float:
        if len(fake.calls) == 2:
            raise MeasureCancelled()
        fake.calls.append(cand)
        return 5.0 + cand.n_gpu_layers

    fake.calls.clear()
    stopped = search([c], 20.0, cancelled_on_the_third, gpu_offload=True)
    assert stopped.cancelled and len(stopped.steps) == 2  # the file at 24 layers, then 12 (below): both kept
    assert stopped.pick is not None and stopped.pick.n_gpu_layers == 24  # the best placement known to meet it


def test_gpu_experts_binary_search_the_most_layers_kept_in_system_ram() -> None:
    c = _choice("moe.gguf", 8.0, _expected(30.0, 20.0, 40.0), ngl=31, ncmoe=4)
    fake = FakeMeasurer(lambda cand: 40.0 - cand.n_cpu_moe)  # each layer's experts in RAM cost 1 tok/s
    result = search([c], 20.0, fake, gpu_offload=True)
    assert result.pick is not None and result.pick.n_cpu_moe == 20 and result.pick.n_gpu_layers == 31
    assert fake.calls[0].n_cpu_moe == 4 and len(fake.calls) <= 1 + 5
    assert " -ncmoe 20 " in answer(result, [], 8192, "").command


def test_on_a_cpu_there_is_no_placement_to_search() -> None:
    c = _choice("big.gguf", 8.0, _expected(30.0, 20.0, 40.0), status="partial", ngl=24)
    fake = FakeMeasurer(lambda cand: 25.0)
    result = search([c], 20.0, fake, gpu_offload=False, placement_note=gpu_placement_note("cpu", []))
    assert len(fake.calls) == 1 and result.pick is not None and result.pick.n_gpu_layers == 24
    assert result.placement_note == "no GPU device here: -ngl is 0, there is no placement to search"
    assert "no GPU backend" in gpu_placement_note("gpu", [])
    assert gpu_placement_note("gpu", ["CUDA"]) == ""


def test_failed_and_unmeasurable_files_are_passed_over_and_cancel_ends_the_search() -> None:
    files = [_choice("url.gguf", 16.0, Figure(50.0, "ceiling"), source="https://h/r/url.gguf"),
             _choice("broken.gguf", 8.0, Figure(50.0, "ceiling")), _choice("ok.gguf", 4.0, Figure(50.0, "ceiling"))]

    def speeds(c: Candidate) -> float:
        if c.choice.filename == "broken.gguf":
            raise MeasureFailed("the worker died loading it")
        return 30.0

    result = search(files, 20.0, FakeMeasurer(speeds), measurable=lambda c: "://" not in c.source)
    assert [s.kind for s in result.steps] == [StepKind.SKIPPED, StepKind.FAILED, StepKind.MEASURED]
    assert result.pick is not None and result.pick.choice.filename == "ok.gguf"
    assert "Not measured (not on this machine): url.gguf." in answer(result, [], 2048, "").sentence

    def cancel(c: Candidate) -> float:
        raise MeasureCancelled()

    stopped = search(files[1:], 20.0, FakeMeasurer(cancel))
    assert stopped.cancelled and stopped.pick is None and stopped.steps == ()
    assert answer(stopped, [], 2048, "").sentence.startswith("Cancelled")


def test_the_depth_is_the_contexts_only_when_filling_it_is_cheap() -> None:
    cheap = _choice("a.gguf", 4.0, Figure(50.0, "ceiling"), ttft=Figure(2000.0, "expected"), decode_depth=8128)
    target = 8128 - MEASURE_N_PROMPT - MEASURE_N_GEN // 2
    assert context_depth(cheap, 8192) == target
    assert measure_depth(cheap, 8192, 8064) == (target, "")  # about 2 s to fill
    slow = replace(cheap, ttft_ms=Figure(60_000.0, "measured"))
    depth, why = measure_depth(slow, 8192, 8064)
    assert depth == 0 and "would take about 60 s" in why
    depth, why = measure_depth(replace(cheap, ttft_ms=Figure(100.0, "ceiling")), 8192, 8064)
    assert depth == 0 and "only a ceiling" in why
    assert measure_depth(replace(cheap, decode_depth=40), 8192, 8064) == (0, "")
    scaled = replace(cheap, decode_tps=Figure(30.0, "ceiling"), decode_empty_tps=Figure(60.0, "ceiling"))
    assert depth_scale(scaled) == 0.5 and depth_scale(cheap) == 1.0


def test_cache_round_trip_and_the_key_follows_the_file_settings_and_hardware(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    c = Candidate.of(_choice("m.gguf", 4.0, Figure(50.0, "ceiling"), source=str(model)))
    key = measurement_key(spec_for(c, 0), MACHINE, "llama-cpp-python 0.3.36 (CPU)")
    cache = MeasureCache(tmp_path / "cache" / "measure-cache.json")
    assert cache.get(key) is None and cache.problem is None
    cache.put(key, CachedMeasurement(decode_tps=41.2, n_depth=0, run_id="r1", measured_at="2026-01-01T00:00:00"))
    again = MeasureCache(cache.path)
    assert again.get(key) == CachedMeasurement(decode_tps=41.2, n_depth=0, run_id="r1",
                                               measured_at="2026-01-01T00:00:00")
    left = [p for p in cache.path.parent.iterdir() if p.name != "locks"]  # the lock per key: measure_cache
    assert left == [cache.path]  # written through a rename: no temporary file left
    other_settings = measurement_key(spec_for(c, 512), MACHINE, "llama-cpp-python 0.3.36 (CPU)")
    other_build = measurement_key(spec_for(c, 0), MACHINE, "llama-cpp-python 0.3.37 (CUDA)")
    other_cpu = measurement_key(spec_for(c, 0), {**MACHINE, "cpu_model": "Other"}, "llama-cpp-python 0.3.36 (CPU)")
    assert all(again.get(k) is None for k in (other_settings, other_build, other_cpu))
    model.write_bytes(b"GGUF" + b"\1" * 70)  # the file rewritten: another size and time, another file
    assert file_identity(model) != key["model"]
    assert again.get(measurement_key(spec_for(c, 0), MACHINE, "llama-cpp-python 0.3.36 (CPU)")) is None


def test_a_damaged_cache_counts_as_empty_and_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "measure-cache.json"
    path.write_text("{not json", encoding="utf-8")
    cache = MeasureCache(path)
    assert len(cache) == 0 and cache.problem is not None and "not JSON" in cache.problem
    key = {"model": {"path": "/m"}, "settings": {}, "hardware": {}, "build": "b"}
    cache.put(key, CachedMeasurement(decode_tps=10.0, n_depth=0))
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["version"] == 1 and len(doc["entries"]) == 1 and MeasureCache(path).get(key) is not None
    entry = next(iter(doc["entries"].values()))
    entry["measurement"]["decode_tps"] = -1  # a value no measurement has
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert MeasureCache(path).get(key) is None


def test_measurer_answers_from_the_cache_without_a_worker(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    files = [_choice("m.gguf", 4.0, Figure(50.0, "ceiling"), source=str(model), decode_depth=100,
                     ttft=Figure(100.0, "expected"))]  # cheap to fill: measured at the context's depth
    rows: list[dict[str, Any]] = []

    def worker_double(test: Any) -> ResultRow:
        """Test double for the worker run (the real one is the heavy test below): the row a finished test gives."""
        rows.append(test)
        return ResultRow(status="ok", decode_tps=33.0, prefill_tps=500.0, ttft_ms=128.0, run_id="r1", unstable=0,
                         model_filename="m.gguf")

    cache_path = tmp_path / "measure-cache.json"
    lines: list[str] = []
    first = Measurer(2048, MACHINE, ttft_prompt_tokens=1920, cache=MeasureCache(cache_path), run_test=worker_double,
                     progress=lines.append)
    a = measure_toward_floor(files, 20.0, first)
    assert len(rows) == 1 and rows[0].n_prompt == MEASURE_N_PROMPT and rows[0].n_gen == MEASURE_N_GEN
    assert a.counts == "measured 1 test, 0 from cache, 0 ruled out by prediction"
    assert lines[-1] == "  → 33.0 tok/s at depth 20" and lines[-2].startswith("measuring m.gguf at -ngl 0 -ctk f16 (")

    def no_worker(test: Any) -> ResultRow:
        raise AssertionError("a cached question started a worker")

    lines.clear()
    start = time.perf_counter()
    second = Measurer(2048, MACHINE, ttft_prompt_tokens=1920, cache=MeasureCache(cache_path), run_test=no_worker,
                      progress=lines.append)
    b = measure_toward_floor(files, 20.0, second)
    assert time.perf_counter() - start < 1.0
    assert b.counts == "measured 0 tests, 1 from cache, 0 ruled out by prediction"
    assert any(line.startswith("from cache: m.gguf at -ngl 0 -ctk f16: 33.0 tok/s") for line in lines)
    doc = b.to_json_dict()
    assert doc["measurements"][0]["from_cache"] is True and doc["measurements"][0]["decode_tps"] == 33.0
    assert doc["pick"]["filename"] == "m.gguf" and doc["command"] == b.command != ""


def test_a_failed_test_is_not_cached(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    files = [_choice("m.gguf", 4.0, Figure(50.0, "ceiling"), source=str(model))]
    cache = MeasureCache(tmp_path / "c.json")
    m = Measurer(2048, MACHINE, ttft_prompt_tokens=1920, cache=cache,
                 run_test=lambda t: ResultRow(status="failed", error="out of memory"))
    a = measure_toward_floor(files, 20.0, m)
    assert a.result.steps[0].kind == StepKind.FAILED and a.result.steps[0].why == "out of memory"
    assert len(cache) == 0 and not cache.path.exists()


def _busy_row(decode_tps: float, other_cpu_pct: float = 180.0) -> ResultRow:
    """Test double for the worker run: the row a test gives while other processes hold the cores (its sampler's
    ``host_other_cpu_pct``; the real case is the heavy test below)."""
    return ResultRow(status="ok", decode_tps=decode_tps, prefill_tps=50.0, ttft_ms=1200.0, run_id="busy", unstable=0,
                     model_filename="m.gguf", host_other_cpu_pct=other_cpu_pct)


def test_a_figure_taken_while_other_processes_held_the_cores_is_marked_never_cached_and_cannot_rule_a_file_out(
        tmp_path: Path) -> None:
    """Issue #54 item 8: a test measured while another process held the cores (3.6 tok/s, 836+ when quiet) was
    cached unmarked and decided the answer: the best file lost to a slower one on a figure of the contention."""
    best, next_best = tmp_path / "best.gguf", tmp_path / "next.gguf"
    for f in (best, next_best):
        f.write_bytes(b"GGUF" + b"\0" * 60)
    files = [_choice("best.gguf", 8.5, Figure(900.0, "ceiling"), source=str(best)),
             _choice("next.gguf", 4.5, Figure(900.0, "ceiling"), source=str(next_best))]
    cache = MeasureCache(tmp_path / "c.json")
    lines: list[str] = []
    m = Measurer(2048, MACHINE, ttft_prompt_tokens=1920, cache=cache, run_test=lambda t: _busy_row(3.6),
                 progress=lines.append)
    got = measure_toward_floor(files, 20.0, m)
    assert [s.kind for s in got.result.steps] == [StepKind.BUSY]  # undecided: next.gguf may not win over it
    assert got.result.pick is None and got.result.not_needed == ()
    assert got.result.steps[0].why.startswith("3.6 tok/s measured while other processes used 180 % of a CPU")
    assert got.sentence.startswith("No answer yet: best.gguf at -ngl 0 -ctk f16 was measured while other processes")
    assert "1 taken while other processes held the cores" in got.counts
    assert all(t.unstable and t.busy_other_cpu_pct == 180.0 for t in got.tests)
    assert any("other processes used 180 % of a CPU during it (not cached)" in line for line in lines), lines
    assert len(cache) == 0 and not cache.path.exists()
    doc = got.to_json_dict()
    assert doc["measurements"][0]["busy_other_cpu_pct"] == 180.0 and doc["measurements"][0]["unstable"] is True

    # a busy figure that meets the floor anyway shows the floor is met (contention only slows), still not cached
    fast = measure_toward_floor(files, 20.0, Measurer(2048, MACHINE, ttft_prompt_tokens=1920, cache=cache,
                                                      run_test=lambda t: _busy_row(300.0)))
    assert fast.result.pick is not None and fast.result.pick.choice.filename == "best.gguf"
    assert "even while other processes used 180 % of a CPU" in fast.result.steps[0].why
    assert len(cache) == 0


def test_a_busy_figure_already_in_a_cache_is_no_answer(tmp_path: Path) -> None:
    cache = MeasureCache(tmp_path / "c.json")
    key = {"model": {"path": "/m"}, "settings": {}, "hardware": {}, "build": "b"}
    with pytest.raises(ValueError, match="not cached"):
        cache.put(key, CachedMeasurement(decode_tps=3.6, n_depth=0, busy_other_cpu_pct=180.0))
    entry = {"key": key, "measurement": CachedMeasurement(decode_tps=3.6, n_depth=0, busy_other_cpu_pct=180.0)
             .to_json_dict()}
    from app.choose.measure_cache import key_digest

    cache.path.write_text(json.dumps({"version": 1, "entries": {key_digest(key): entry}}), encoding="utf-8")
    assert MeasureCache(cache.path).get(key) is None


@pytest.mark.parametrize(("flags", "cause"), [
    ([], "--measure needs --min-decode-tps"),
    (["--min-decode-tps", "20", "--hw", "RTX 4060 Laptop"], "--measure runs on this machine only"),
])
def test_measure_refusals_are_one_line(flags: list[str], cause: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", "--measure", *flags, str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gguf-bench: error: ") and cause in err and "\n" not in err


@pytest.mark.heavy
def test_real_search_on_smollm2_then_the_same_question_from_the_cache(smollm2_path: Path,
                                                                      make_gguf: Callable[..., Path]) -> None:
    """SmolLM2 (KLD 0) is measured first and meets a 5 tok/s floor; the synthetic F16 (KLD 0.5) is never run. The
    row is stored like a run's; the same question again is answered from the cache, without a worker."""
    save_probe(CpuProbe(bandwidth_gbps=20.0, gflops_f32=200.0, n_threads=2, measured_at="test fixture"))
    other = make_gguf("synthetic-f16.gguf", n_layer=2)
    files = [str(smollm2_path), str(other)]
    with ResultStore() as store:
        save_quality_rows(store, [
            QualityRow(run_id="q1", model_index=i, model_path=f, model_filename=Path(f).name,
                       model_key=model_key(f), status="ok", mean_kld=kld)
            for i, (f, kld) in enumerate(zip(files, (0.0, 0.5), strict=True))])
    report = run_choose(ChooseRequest(sources=tuple(files), n_ctx=512))
    machine = scan_machine(ProbeMode.CACHED).run_facts()
    lines: list[str] = []
    first = measure_toward_floor(report.choices, 5.0, Measurer(512, machine, ttft_prompt_tokens=384,
                                                               progress=lines.append))
    if first.result.steps and first.result.steps[0].kind == StepKind.BUSY:  # the next test checks that answer
        pytest.skip(f"other processes held the cores: {first.result.steps[0].why}")
    assert first.result.pick is not None and first.result.pick.source == str(smollm2_path)
    assert [c.filename for c in first.result.not_needed] == ["synthetic-f16.gguf"]
    assert first.counts == "measured 1 test, 0 from cache, 0 ruled out by prediction, 1 lower-quality not needed"
    (test,) = first.tests
    assert not test.from_cache and test.decode_tps > 5.0 and test.run_id
    with ResultStore() as store:
        rows = store.rows(test.run_id)
    assert len(rows) == 1 and rows[0].status == "ok" and rows[0].n_prompt == MEASURE_N_PROMPT
    assert rows[0].decode_tps == pytest.approx(test.decode_tps)

    def no_worker(spec: Any) -> ResultRow:
        raise AssertionError("a cached question started a worker")

    again = run_choose(ChooseRequest(sources=tuple(files), n_ctx=512))  # now with the stored row
    start = time.perf_counter()
    second = measure_toward_floor(again.choices, 5.0, Measurer(512, machine, ttft_prompt_tokens=384,
                                                               run_test=no_worker))
    assert time.perf_counter() - start < 1.0
    assert second.counts.startswith("measured 0 tests, 1 from cache")
    assert second.tests[0].decode_tps == test.decode_tps and second.command == first.command


@pytest.mark.heavy  # a real test in a worker while other processes hold every core
def test_a_real_measurement_while_other_processes_hold_the_cores_is_marked_and_not_cached(
        smollm2_path: Path, tmp_path: Path) -> None:
    """Issue #54 item 8, for real: busy loops on every core while SmolLM2 is measured. The figure is marked (the
    sampler's share of other processes' CPU), not cached, and decides nothing below the floor."""
    import os
    import subprocess
    import sys

    save_probe(CpuProbe(bandwidth_gbps=20.0, gflops_f32=200.0, n_threads=2, measured_at="test fixture"))
    report = run_choose(ChooseRequest(sources=(str(smollm2_path),), n_ctx=512))
    floor = 0.9 * report.choices[0].decode_tps.value  # under its ceiling: measured, not ruled out
    machine = scan_machine(ProbeMode.CACHED).run_facts()
    cache = MeasureCache(tmp_path / "c.json")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        got = measure_toward_floor(report.choices, floor, Measurer(512, machine, ttft_prompt_tokens=384, cache=cache))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    (test,) = got.tests
    assert test.busy_other_cpu_pct is not None and test.busy_other_cpu_pct > 25 and test.unstable, test
    (step,) = got.result.steps
    assert step.kind == StepKind.BUSY or "even while other processes used" in step.why, step
    assert len(MeasureCache(cache.path)) == 0

"""Issue #27: calibration learns only from trustworthy rows (stable, not taken on a busy machine: the one rule of
app.predict.machine_fit.store_efficiency.untrustworthy), says how many it left out, and refuses to fit with too few
left.

Hand-built rows, no model run: the ladder's tiny synthetic models are written (headers and small tensors) so their
facts can be read, and each row's rates come from a known linear cost model the fit can recover exactly.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from app.calibrate.ladder import (
    CalibrateOptions,
    Calibration,
    TrustedRows,
    fit_ladder,
    ladder_models,
    ladder_tests,
    pooled,
    store_rows,
    store_samples,
    trusted_rows,
)
from app.calibrate.synth_models import write_synth_model
from app.model.facts_cache import cached_facts
from app.predict.machine_fit.calibration_fit import MachineContext, MachineFit, row_label, workload_of
from app.predict.machine_fit.fitted_model import FitError
from app.predict.settings import PredictSettings
from app.results.fields import BUSY_OTHER_CPU_PCT
from app.results.row_types import ResultRow
from app.results.store import ResultStore

TINY = dataclasses.replace(CalibrateOptions.quick(), types=("F16",), use_store=False)
BUSY = {"host_other_cpu_pct": BUSY_OTHER_CPU_PCT + 30.0}
UNSTABLE = {"unstable": 1, "unstable_metrics": "decode_tps"}
FIT_ARGS: dict[str, Any] = dict(ctx=MachineContext(), cpu_info="cpu X", gpu_info="", build="b", repack=1)


def _ladder_rows(folder: Path) -> list[ResultRow]:
    """One ok row per test of the tiny ladder, rates from a linear cost model (seconds per token = Σ c·feature),
    so a fit of the quiet rows alone recovers them to rounding."""
    models = {write_synth_model(folder / f"{m.shape.name}.gguf", m.shape): m for m in ladder_models(TINY)}
    rows = [ResultRow(status="ok", model_path=t.model_path, model_filename=Path(t.model_path).name,
                      n_prompt=t.n_prompt, n_gen=t.n_gen, n_depth=t.n_depth, flash_attn=t.flash_attn,
                      n_gpu_layers_effective=0, host_other_cpu_pct=3.0, unstable=0)
            for t in ladder_tests(models, TINY)]
    work = [workload_of(cached_facts(r.model_path or ""), PredictSettings.from_row(r)) for r in rows]
    rates: list[dict[str, float]] = [{} for _ in rows]
    for phase in ("decode", "prefill"):
        feats = [w.features(phase) for w in work]
        top = {n: max(f.get(n, 0.0) for f in feats) for f in feats for n in f}
        for rate, f in zip(rates, feats, strict=True):
            rate[f"{phase}_tps"] = 1.0 / sum(1e-3 / len(top) * v / top[n] for n, v in f.items())
    return [row.replace(**rate) for row, rate in zip(rows, rates, strict=True)]


def _labels(fit: MachineFit) -> set[str]:
    return {p.label for phases in fit.fits.values() for pf in phases.values() for p in pf.points}


def _worst_error(fit: MachineFit) -> float:
    """The largest relative error of any point, set aside or not."""
    return max(abs(p.rel_error) for phases in fit.fits.values() for pf in phases.values() for p in pf.points)


def test_trusted_rows_uses_the_one_rule_and_counts_what_it_left_out() -> None:
    quiet = ResultRow(status="ok", decode_tps=10.0)
    rows = [quiet, quiet.replace(host_other_cpu_pct=BUSY_OTHER_CPU_PCT),  # at the limit: still quiet
            quiet.replace(**BUSY), quiet.replace(**UNSTABLE), quiet.replace(host_other_cpu_pct=None),  # unknown: quiet
            ResultRow(status="failed")]
    t = trusted_rows(rows)
    assert len(t.rows) == 3 and t.n_left_out == 2 and t.n_ok == 5
    assert t.left_out("stored runs") == "2 of 5 stored runs left out: unstable, or taken while the machine was busy"
    assert TrustedRows(t.rows, 0).left_out("stored runs") == ""


def test_busy_and_unstable_ladder_rows_do_not_bend_the_fit_and_are_named(tmp_path: Path) -> None:
    rows = _ladder_rows(tmp_path)
    bent = list(rows)
    for i, bad in ((1, BUSY), (4, UNSTABLE)):  # half as fast: a fit that learned from them would be off
        bent[i] = rows[i].replace(**bad, decode_tps=(rows[i].decode_tps or 0) / 2,
                                  prefill_tps=(rows[i].prefill_tps or 0) / 2)
    said: list[str] = []
    got = fit_ladder(bent, TrustedRows([], 0), **FIT_ARGS, progress=said.append)
    assert (got.n_ladder_points, got.n_ladder_left_out) == (len(rows) - 2, 2)
    note = f"2 of {len(rows)} ladder tests left out: unstable, or taken while the machine was busy"
    assert note in got.fit.notes
    assert said == [f"fitting {len(rows) - 2} ladder points and 0 stored runs; {note}"]
    slowed = {row_label(bent[1]), row_label(bent[4])}
    assert not slowed & _labels(got.fit) and _worst_error(got.fit) < 1e-6
    # the same rows without the rule: the slowed points are fitted, twice as fast as measured
    taken_anyway = fit_ladder([r.replace(unstable=0, host_other_cpu_pct=0.0) for r in bent], TrustedRows([], 0),
                              **FIT_ARGS).fit
    assert slowed <= _labels(taken_anyway) and _worst_error(taken_anyway) > 0.5


def test_too_few_quiet_ladder_tests_refuse_the_fit_in_one_line(tmp_path: Path) -> None:
    rows = _ladder_rows(tmp_path)
    n_busy = len(rows) // 2 + 1
    busy = [r.replace(**BUSY) if i < n_busy else r for i, r in enumerate(rows)]
    with pytest.raises(FitError) as e:
        fit_ladder(busy, TrustedRows([], 0), **FIT_ARGS)
    line = str(e.value)
    assert "\n" not in line
    assert line.startswith(f"only {len(rows) - n_busy} of {len(rows)} ladder tests were stable and quiet")
    assert f"over {BUSY_OTHER_CPU_PCT:.0f} % of a CPU" in line and "calibrate again when the machine is quieter" in line
    # with half of them quiet (rounded up) the rule lets the fit go on, and its notes say what was left out
    half = [r.replace(**BUSY) if i < len(rows) // 2 else r for i, r in enumerate(rows)]
    fit = fit_ladder(half, TrustedRows([], 0), **FIT_ARGS).fit
    assert fit.notes[-1].startswith(f"{len(rows) // 2} of {len(rows)} ladder tests left out")


def test_stored_runs_that_were_unstable_or_busy_are_left_out(tmp_path: Path) -> None:
    model = write_synth_model(tmp_path / "m.gguf", ladder_models(TINY)[0].shape)
    base = {"status": "ok", "model_path": str(model), "model_filename": model.name, "cpu_info": "cpu X",
            "gpu_info": "", "llama_cpp_python_version": "0.3.36", "n_prompt": 64, "n_gen": 16, "n_depth": 0,
            "decode_tps": 100.0, "prefill_tps": 900.0, "n_gpu_layers_effective": 0}
    rows = [base, dict(base, **BUSY), dict(base, **UNSTABLE), dict(base, host_other_cpu_pct=5.0)]
    with ResultStore(tmp_path / "s.sqlite3") as store:
        store.begin_run("r1")
        for i, r in enumerate(rows):
            store.add_result("r1", ResultRow.from_mapping(dict(r, test_index=i)))
        split = store_rows(store, "cpu X", "", "0.3.36")
        samples = store_samples(store, "cpu X", "", "0.3.36")
    assert (len(split.rows), split.n_left_out) == (2, 2) and len(samples) == 2
    assert split.left_out("stored runs").startswith("2 of 4 stored runs left out")


def test_a_pooled_test_is_as_trustworthy_as_its_worse_pass() -> None:
    one = ResultRow(status="ok", decode_samples_tps=[100.0, 101.0], prefill_samples_tps=[500.0, 505.0], unstable=0,
                    unstable_metrics="", host_other_cpu_pct=4.0)
    assert not pooled(one, one).unstable and pooled(one, one).host_other_cpu_pct == 4.0
    both = pooled(one, one.replace(host_other_cpu_pct=BUSY_OTHER_CPU_PCT + 1, unstable=1, unstable_metrics="ttft_ms"))
    assert both.unstable == 1 and both.unstable_metrics == "ttft_ms"
    assert both.host_other_cpu_pct == BUSY_OTHER_CPU_PCT + 1
    assert trusted_rows([both]).n_left_out == 1
    assert pooled(one.replace(host_other_cpu_pct=None), one.replace(host_other_cpu_pct=float("nan"))
                  ).host_other_cpu_pct is None  # neither pass says: unknown, as a row without the column


class ScriptedCalibration(Calibration):
    """TEST DOUBLE for the worker: ``_measure`` hands back scripted rows (the ladder's tests would load models)."""

    def __init__(self, passes: list[list[ResultRow]]) -> None:
        super().__init__(TINY)
        self.passes = passes
        self.asked: list[int] = []

    def _measure(self, tests: list[Any], machine: dict[str, Any]) -> list[ResultRow]:
        self.asked.append(len(tests))
        return self.passes.pop(0)[:len(tests)]


def test_busy_ladder_tests_are_measured_again_and_a_quiet_measurement_replaces_them(tmp_path: Path) -> None:
    (tmp_path / "rows").mkdir()
    rows = _ladder_rows(tmp_path / "rows")
    first = [r.replace(**BUSY, decode_tps=(r.decode_tps or 0) / 2) if i in (2, 5) else r for i, r in enumerate(rows)]
    again = [rows[2], rows[5].replace(**UNSTABLE)]  # one comes back quiet, the other unstable again
    cal = ScriptedCalibration([first, again])
    said: list[str] = []
    cal.progress = said.append
    fits: list[MachineFit] = []

    def fit_rows(r: list[ResultRow]) -> MachineFit:
        fits.append(fit_ladder(r, TrustedRows([], 0), **FIT_ARGS, progress=said.append).fit)
        return fits[-1]

    (tmp_path / "ladder").mkdir()
    final_rows, fit = cal._measure_ladder(tmp_path / "ladder", {}, fit_rows)
    assert cal.asked == [len(rows), 2]
    assert "measuring 2 disturbed tests again (2 of them unstable or busy)" in said
    assert final_rows[2] == rows[2] and (final_rows[5].host_other_cpu_pct or 0) > BUSY_OTHER_CPU_PCT  # kept, left out
    assert fit is fits[-1] and f"1 of {len(rows)} ladder tests left out" in fit.notes[-1]
    assert _worst_error(fit) < 1e-6 and row_label(rows[5]) not in _labels(fit)

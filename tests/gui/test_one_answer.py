"""Issue #42: one answer. For SmolLM2 on three hardware profiles (this CPU; "RTX 4060 Laptop" as this machine's own
GPU; "M2 Max", a GPU that is not here) and a machine fit of the CPU and of the CUDA backend made in the test, every
surface gives the same expected decode at the context, the same decode from an empty cache, and the same memory:
``gguf-bench predict --json``, the chooser, the window's inspector, its scenario panel, its decode plot's expected
curve, a results row and the results table. The figures are printed as a table (``pytest -s``).

"This machine has an RTX 4060 Laptop" is a TEST DOUBLE for NVML (no GPU here): the machine is built with that
profile as its GPU and handed to every surface; the surfaces and answer() are the real ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.choose.chooser import ChooseRequest, run_choose
from app.gui.expectations import Expectations
from app.gui.panels.library import human_bytes
from app.gui.results_model import ResultsModel
from app.model.gguf_facts import read_model_facts
from app.predict.answer import Figure, Machine, capped_at_ceiling
from app.predict.hardware_context import HardwareContext
from app.predict.machine_fit.calibration_fit import MachineFit, Sample, fit_machine, workload_of
from app.predict.profiles import find_profile, load_profiles
from app.predict.row_predictions import RowPredictor
from app.predict.settings import PredictSettings, at_context
from app.results.fields import WINDOW_FIELDS
from app.results.row_types import ResultRow
from tests.cli_helpers import main_json
from tests.gui.conftest import wait_for

pytestmark = pytest.mark.heavy  # the window

N_CTX = 8192
#: seconds per unit of each regressor family: the "machine" the fit is made of (any positive figures will do)
COEFFICIENTS = {"bytes": 1 / 12e9, "kv": 1 / 6e9, "attn": 1 / 40e9, "attn_view": 1 / 80e9, "attn_split": 1 / 60e9,
                "split": 20e-6, "layer": 50e-6, "fixed": 200e-6, "flops": 1 / 50e9, "layer_ubatch": 1e-3,
                "width": 4e-9, "spill": 1 / 30e9}


def _seconds(features: dict[str, float]) -> float:
    return sum(COEFFICIENTS[name.split(":")[0]] * v for name, v in features.items())


def _samples(folder: Path, backend: str) -> list[Sample]:
    """Synthetic Q4_1, Q8_0 and F16 models on ``backend`` whose speeds follow COEFFICIENTS exactly."""
    out = []
    for t in ("Q4_1", "Q8_0", "F16"):
        for e, n, g in ((256, 2, 1), (256, 6, 4), (512, 3, 4)):
            facts = read_model_facts(write_synth_model(folder / f"{t}-{e}x{n}-{backend[:3]}.gguf",
                                                       SynthShape(e, n, t, gqa=g)))
            for p, d in ((16, 0), (64, 256), (128, 512), (512, 0)):
                w = workload_of(facts, PredictSettings(n_ctx=2048, n_prompt=p, n_gen=16, depth=d, flash_attn=True,
                                                       repack=1), backend=backend)
                out.append(Sample(backend, w, f"{t} {e}x{n} p{p} d{d}", 1 / _seconds(w.features("decode")),
                                  1 / _seconds(w.features("prefill"))))
    return out


@pytest.fixture(scope="module")
def fit(tmp_path_factory: pytest.TempPathFactory) -> MachineFit:
    """A fit of this machine's CPU and CUDA backend, made here (fit_machine on points of a known machine)."""
    folder = tmp_path_factory.mktemp("fit")
    samples = _samples(folder, "CPU") + _samples(folder, "CUDA,CPU")
    return fit_machine(samples, cpu_info="test CPU", gpu_info="", build="test", created="2026-12-04", repack=1,
                       repacked_types=())


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.fixture
def machines(window, fit: MachineFit) -> Iterator[dict[str, tuple[Machine, str | None]]]:  # noqa: ANN001
    """(this machine, the chooser's and predict's --hw) per profile name; the window's machine is set to it."""
    cpu = window.predictor.machine_cpu
    assert cpu is not None
    base = Machine.elsewhere()
    with_gpu = replace(base, cpu=cpu, gpu=find_profile("RTX 4060 Laptop", load_profiles()), cpu_model="test CPU",
                       fit=fit)
    yield {cpu.name: (replace(with_gpu, gpu=None), "cpu"), "RTX 4060 Laptop": (with_gpu, None),
           "M2 Max": (with_gpu, "M2 Max")}


def _decode_row(html: str, label: str) -> tuple[float, float | None, float | None]:
    m = re.search(label + r"</td><td><b>([\d,.]+) tok/s</b>(?: \(([\d,.]+)–([\d,.]+)\))?", html)
    assert m is not None, (label, html)
    return _number(m.group(1)), _number(m.group(2)) if m.group(2) else None, _number(m.group(3)) if m.group(3) else None


def test_every_surface_gives_one_answer(window, machines, smollm2_path: Path,  # noqa: ANN001
                                        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    w = window
    path = str(smollm2_path)
    wait_for(lambda: path in w.predictor.facts)
    facts = w.predictor.facts[path]
    question = at_context(N_CTX)
    table: list[str] = []
    for name, (machine, hw) in machines.items():
        profile = (machine.cpu if hw == "cpu" else machine.gpu if hw is None
                   else find_profile(hw, load_profiles()))
        assert profile is not None
        kind = {"cpu": "fit", None: "fit"}.get(hw, "public")  # the machine's own hardware: its fit; elsewhere: public
        shown: dict[str, tuple[Figure | float, ...]] = {}

        # predict --json, in process: this machine is the one built above
        monkeypatch.setattr(Machine, "load", classmethod(lambda cls, *a, m=machine, **k: m))
        hw_args = ["--hw", hw] if hw else []
        doc = main_json("predict", ["-m", path, "--ctx", str(N_CTX), *hw_args], capsys)["at_context"]
        assert doc["decode"]["kind"] == kind, (name, doc["decode"])
        shown["predict"] = (doc["decode"]["value"], doc["decode"]["low"], doc["decode"]["high"],
                            doc["decode_empty"]["value"], doc["needed_bytes"])

        # the chooser
        choice = run_choose(ChooseRequest(sources=(path,), hw=hw, n_ctx=N_CTX), machine=machine).choices[0]
        assert choice.type_k == "f16" and choice.status == "fits"
        shown["choose"] = (choice.decode_tps.value, choice.decode_tps.low, choice.decode_tps.high,
                           choice.decode_empty_tps.value, choice.memory_bytes)  # type: ignore[union-attr]

        # the window: inspector, scenario panel, the decode plot's expected curve
        w.predictor.set_expectations(Expectations(machine=machine))
        assert w.choose_profile(profile.name.split(": ")[0] if profile.kind == "cpu" else profile.name)
        w.library.select_paths([path])
        w.inspector.kv_type.setCurrentText("f16")
        w.inspector.ngl.setValue(999)
        w.inspector.ctx.setValue(N_CTX)
        w.details.refresh()
        html = w.inspector.text.text()
        decode = _decode_row(html, "Decode expected")
        empty = _decode_row(html, "Decode, empty cache expected")
        needed = re.search(r"Memory needed</td><td>([^<]+) of", html)
        assert needed is not None and needed.group(1) == human_bytes(shown["predict"][4]), html
        shown["inspector"] = (*decode, empty[0], shown["predict"][4])
        w.scenario.prompt.setValue(question.n_prompt)
        w.scenario.output.setValue(question.n_gen)
        w.details.update_scenario()
        sc = w.scenario.pred
        assert sc is not None
        shown["scenario"] = (sc.output_tokens / sc.decode_s,)
        depth = int(question.decode_depth)
        curve = w.predictor.expected_curve(path, [depth, 64], "decode", profile=profile, flash_attn=1, n_ctx=N_CTX,
                                           n_gpu_layers=999)
        assert curve is not None
        shown["plot"] = (curve[0][0], curve[1][0], curve[2][0], curve[0][1])

        # a results row of that request run on that hardware, and its cell in the table
        gpu_here = machine.gpu if hw is None else None
        rows = RowPredictor(HardwareContext(cpu=machine.cpu, gpu=gpu_here if gpu_here else profile), machine)  # type: ignore[arg-type]
        row = ResultRow.from_mapping({
               "model_path": path, "model_filename": Path(path).name, "test_index": 0, "status": "ok",
               "n_prompt": question.n_prompt, "n_gen": question.n_gen, "n_depth": 0, "n_ctx": N_CTX,
               "n_gpu_layers": 999, "n_gpu_layers_effective": 0 if profile.kind == "cpu" else facts.n_layer + 1,
               "backends": "CPU" if profile.kind == "cpu" else "CUDA,CPU", "type_k": "f16", "type_v": "f16",
               "flash_attn": -1, "flash_attn_effective": 1, "repack": -1})
        row = row.replace(**rows(row))
        model = ResultsModel(w.predictor)
        model.update_rows([row])
        col = {f.header: i for i, f in enumerate(WINDOW_FIELDS)}
        cell = _number(model.index(0, col["decode expected"]).data(Qt.ItemDataRole.DisplayRole))
        shown["row"] = (row.expected_decode_tps, cell, row.pred_needed_bytes)

        ref = shown["predict"]
        table.append(f"{name:<40} decode @{depth:,} {ref[0]:8.1f} ({ref[1]:.1f}-{ref[2]:.1f}) {kind:<7} "
                     f"empty {ref[3]:8.1f}  memory {ref[4] / 2**20:8.1f} MiB")
        for surface, figures in shown.items():
            table.append(f"    {surface:<10} " + "  ".join(f"{x:,.3f}" for x in figures if x is not None))
        rel = 1e-9
        assert shown["choose"] == pytest.approx(ref, rel=rel), name
        assert shown["inspector"][:4] == pytest.approx(ref[:4], abs=0.051), name  # printed to 0.1
        assert shown["scenario"][0] == pytest.approx(ref[0], rel=rel), name
        assert shown["plot"] == pytest.approx(ref[:4], rel=rel), name
        assert shown["row"][0] == pytest.approx(ref[0], rel=rel) and shown["row"][1] == pytest.approx(ref[0], abs=0.051)
        assert shown["row"][2] == ref[4], name
    with capsys.disabled():
        print("\n" + "\n".join(table))


def test_an_expected_figure_above_its_ceiling_is_the_ceiling_marked() -> None:
    from app.predict.answer import FigureKind, Source

    fig = Figure(120.0, FigureKind.FIT, 100.0, 140.0, Source(FigureKind.FIT, "fit", "a fit"))
    notes: list[str] = []
    capped = capped_at_ceiling(fig, 110.0, "decode", notes)
    # the band: the fit's top, and its relative width below the figure shown (100/120 of 110)
    assert capped is not None and capped.value == 110.0 and capped.high == 140.0
    assert capped.low == pytest.approx(110.0 * 100.0 / 120.0)
    assert "capped at the ceiling" in capped.source.detail and "above its ceiling" in notes[0]
    assert capped_at_ceiling(replace(fig, value=90.0, low=80.0, high=95.0), 110.0, "decode", []) == replace(
        fig, value=90.0, low=80.0, high=95.0)

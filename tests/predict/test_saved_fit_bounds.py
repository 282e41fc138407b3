"""Issue #54: a saved fit whose band is absurd (1e308) gave "band ±inf%" and ``predict --json`` wrote the
non-standard token ``Infinity``. Such a fit is refused where it is loaded, in one line; and no ``--json`` ever
writes NaN or Infinity (app/json_text.py: null, and where)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.cli.main import main
from app.json_text import NOT_FINITE_KEY, standard_json
from app.predict.machine_fit.calibration_fit import MachineFit
from app.predict.machine_fit.calibration_store import fit_path, llama_build, read_fit, save_fit
from app.predict.machine_fit.fitted_model import PhaseFit
from app.telemetry.machine import ProbeMode, scan_machine
from tests.gguf_synth import write_synthetic_gguf


def _strict(text: str) -> object:
    """JSON as a strict reader takes it: NaN, Infinity and -Infinity are errors."""
    def refuse(token: str) -> object:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("band", [1e308, -0.5, 101.0])
def test_a_saved_fit_with_an_absurd_band_is_refused_in_one_line(band: float) -> None:
    fit = MachineFit("cpu X", "", llama_build(), "2026-12-07",
                     {"CPU": {"decode": PhaseFit("decode", {"fixed": 0.01}, 0.05)}}, 3, ())
    path = save_fit(fit)
    doc = json.loads(path.read_text())
    doc["fits"]["CPU"]["decode"]["band_frac"] = band
    path.write_text(json.dumps(doc))
    loaded, problem = read_fit("cpu X", "")
    assert loaded is None and problem is not None and "\n" not in problem and len(problem) < 400
    assert str(fit_path("cpu X", "", llama_build())) in problem and "band" in problem
    assert "gguf-bench calibrate again" in problem


@pytest.mark.heavy  # predict probes the repack guard in a child process
def test_predict_json_with_an_absurd_saved_fit_is_standard_json(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    scan = scan_machine(ProbeMode.NONE).run_facts()
    cpu_model, gpu_info = str(scan.get("cpu_model") or ""), str(scan.get("gpu_info") or "")
    fit = MachineFit(cpu_model, gpu_info, llama_build(), "2026-12-07",
                     {"CPU": {"decode": PhaseFit("decode", {"fixed": 0.01}, 0.05)}}, 3, ())
    path = save_fit(fit)
    doc = json.loads(path.read_text())
    doc["fits"]["CPU"]["decode"]["band_frac"] = 1e308
    path.write_text(json.dumps(doc))
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    assert main(["predict", "-m", str(model), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "Infinity" not in out and "NaN" not in out and "inf%" not in out + err
    _strict(out)
    assert main(["predict", "-m", str(model)]) == 0
    out, err = capsys.readouterr()
    assert "inf%" not in out + err and "band" in err and str(path) in err, err


def test_no_json_writer_writes_nan_or_infinity() -> None:
    doc = {"a": math.inf, "b": [1.0, math.nan, {"c": -math.inf}], "d": "Infinity", "e": 2}
    text = standard_json(doc)
    back = _strict(text)
    assert back["a"] is None and back["b"][1] is None and back["b"][2]["c"] is None and back["d"] == "Infinity"
    assert back[NOT_FINITE_KEY]["paths"] == ["$.a", "$.b[1]", "$.b[2].c"] and back[NOT_FINITE_KEY]["count"] == 3
    assert "JSON has no NaN or Infinity" in back[NOT_FINITE_KEY]["why"]
    assert _strict(standard_json([math.nan, 1])) == [None, 1]
    assert standard_json({"x": 1.5}, indent=2) == json.dumps({"x": 1.5}, indent=2)  # a finite document as before

"""Issue #53's acceptance for a laptop GPU named by --hw, on header-only GGUFs of real shapes (tests/arch_ggufs.py):
``predict --hw "RTX 4060 Laptop"`` gives an -ncmoe split an expected prefill (kind split, not a ceiling);
``--power-limit 60`` and ``--on-battery`` change the prefill and say why; ``choose`` shows an -ncmoe file's TTFT as
an expected figure with its band; ``-nopo 1`` follows llama-bench's flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.telemetry import machine
from tests.arch_ggufs import write_all
from tests.cli_helpers import main_json

pytestmark = pytest.mark.heavy  # the public fit and full-size header-only model shapes: seconds each


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("laptop-power"), ["gpt-oss-20b", "llama-3.1-8b"])


@pytest.fixture
def no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """TEST DOUBLE: the CPU probe fails the test if a --hw answer calls it (nothing of this machine is looked at)."""
    def tripped(**kwargs: object) -> None:
        raise AssertionError("the CPU probe ran for a GPU named by --hw")

    monkeypatch.setattr(machine, "probe_cpu", tripped)


def _predict(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return main_json("predict", argv, capsys)


def test_an_ncmoe_split_gets_an_expected_prefill_and_ttft_and_nopo_follows_llama_bench(
        models: dict[str, Path], isolated_data_dir: Path, no_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["-m", str(models["gpt-oss-20b"]), "--hw", "RTX 4060 Laptop", "--ctx", "8192", "-ncmoe", "12"]
    doc = _predict(base, capsys)
    prefill, ttft = doc["prefill"], doc["ttft_ms_figure"]
    assert doc["split"] and prefill["kind"] == "split" and ttft["kind"] == "split"
    assert prefill["low"] < prefill["value"] < prefill["high"] <= doc["prefill_ceiling_tps"]
    assert "op offload" in prefill["source"] and "PCIe 4.0 x8" in prefill["source"]
    assert doc["prefill_offload_bytes"] > 1e9 and doc["no_op_offload"] == 0
    full = _predict(["-m", str(models["gpt-oss-20b"]), "--hw", "RTX 4090", "--ctx", "8192"], capsys)
    assert full["prefill"]["kind"] == "public"
    nopo = _predict([*base, "-nopo", "1"], capsys)  # the CPU's share has no figure for a laptop not owned
    assert nopo["no_op_offload"] == 1 and nopo["prefill"]["kind"] == "ceiling"
    assert any("no expected prefill" in n for n in nopo["notes"])
    with pytest.raises(SystemExit) as refused:  # llama-bench's 0|1
        main(["predict", *base, "-nopo", "2"])
    assert refused.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_a_power_limit_and_the_battery_change_prefill_and_say_why(
        models: dict[str, Path], isolated_data_dir: Path, no_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["-m", str(models["llama-3.1-8b"]), "--hw", "RTX 4060 Laptop"]
    top = _predict(base, capsys)
    assert any("ships at 35-115 W: these figures assume 115 W" in n for n in top["notes"])
    for flags, says in ((["--power-limit", "60"], "at 60 W of RTX 4060 Laptop's 35-115 W"),
                        (["--on-battery"], "at 35 W of RTX 4060 Laptop's 35-115 W on battery")):
        got = _predict([*base, *flags], capsys)
        assert got["prefill"]["value"] < top["prefill"]["value"] and "power:" in got["prefill"]["source"]
        assert got["decode"]["value"] == pytest.approx(top["decode"]["value"])  # decode holds; its band widens
        assert got["decode"]["low"] < top["decode"]["low"]
        assert any(n.startswith("power (given): " + says) for n in got["notes"]), got["notes"]
    assert main(["predict", *base, "--power-limit", "20"]) != 0
    says = "--power-limit 20 W is outside what RTX 4060 Laptop runs at: 33-115 W (NVIDIA lists 35-115 W"
    assert says in capsys.readouterr().err
    assert main(["predict", "-m", str(models["llama-3.1-8b"]), "--hw", "RTX 4090", "--on-battery"]) != 0
    assert "RTX 4090 is a desktop part" in capsys.readouterr().err


def test_choose_shows_an_ncmoe_files_ttft_as_an_expected_figure_with_its_band(
        models: dict[str, Path], isolated_data_dir: Path, no_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(models["gpt-oss-20b"]), "--hw", "RTX 4060 Laptop", "--ctx", "8192", "--ram", "32"]
    doc = main_json("choose", argv, capsys)
    (f,) = doc["files"]
    assert f["n_cpu_moe"] > 0 and f["ttft_ms"]["kind"] == "split"
    assert f["ttft_ms"]["low"] < f["ttft_ms"]["value"] < f["ttft_ms"]["high"]
    assert main(["choose", *argv]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("gpt-oss-20b.gguf"))
    ttft = f"{f['ttft_ms']['value']:,.0f} ({f['ttft_ms']['low']:,.0f}–"
    assert "-ncmoe" in line and ttft in line and "split)" in line
    slower = main_json("choose", [*argv, "--power-limit", "60"], capsys)
    assert slower["files"][0]["ttft_ms"]["value"] > f["ttft_ms"]["value"]

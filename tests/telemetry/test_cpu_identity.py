"""The CPU identity the workbench reads (app/telemetry/cpu_identity.py): /proc/cpuinfo, or the stand-in that
GGUF_WORKBENCH_CPUINFO names, for every fact read from it: the name rows record, the flags peaks and repacking
follow, and the key the repack guard's verdict is kept under."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.telemetry import repack_guard
from app.telemetry.cpu_features import read_cpu_features
from app.telemetry.cpu_identity import CPUINFO_ENV
from app.telemetry.host import cpu_model

CPUINFO = Path(__file__).resolve().parents[1] / "data" / "cpuinfo"


@pytest.mark.parametrize(("file", "name", "amx"), [("intel-xeon-amx.txt", "Intel(R) Xeon(R) Platinum 8481C", True),
                                                    ("amd-epyc.txt", "AMD EPYC", False)])
def test_a_stand_in_cpuinfo_is_the_cpu_every_reader_sees(file: str, name: str, amx: bool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPUINFO_ENV, raising=False)
    real_key, real_model, _build = repack_guard.machine_key()
    monkeypatch.setenv(CPUINFO_ENV, str(CPUINFO / file))
    assert cpu_model().startswith(name)
    flags = read_cpu_features().flags
    assert ("amx_int8" in flags) is amx and "avx2" in flags
    key, model, _build = repack_guard.machine_key()
    assert model.startswith(name)
    if not real_model.startswith(name):  # another CPU's verdict is kept apart from this machine's
        assert key != real_key


def test_a_stand_in_that_cannot_be_read_gives_no_flags_and_a_name_still(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    monkeypatch.setenv(CPUINFO_ENV, str(tmp_path / "missing"))
    assert read_cpu_features().flags == () and cpu_model()

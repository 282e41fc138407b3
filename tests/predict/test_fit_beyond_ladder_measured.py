"""Issue #41 item 7 measured: a small ladder (Q8_0 over three shapes and a mixture of experts, Q4_1 on one shape)
calibrated here, then three shapes it does not hold measured against the band ``answer()`` gives them: a tied
32k vocabulary whose output matrix is most of what a token reads, a mixture of another expert count and width, and
a mix with a type the ladder never measured (Q5_0, read through a stand-in). ``benchmarks/fit_beyond_ladder.py``
does the same with calibrate's whole ladder and realistic sizes.

The ladder's models are small enough to sit in the last-level cache, as the held-out ones do: the test judges the
fit's reach, so the cache term is off (every byte counted from memory, in the ladder and the predictions alike). A
calibration that refuses (too few stable, quiet tests: a busy neighbour on this shared machine) is tried once more,
then the test skips, saying so; so does a held-out row that stays unstable or busy."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from app.calibrate import ladder
from app.calibrate.ladder import CalibrateOptions, Calibration
from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.gguf_facts import read_model_facts
from app.predict.answer import answer
from app.predict.fitted_model import FitError
from app.predict.machine import Machine
from app.predict.settings import PredictSettings
from app.predict.store_efficiency import untrustworthy
from app.run.plan import TestSpec
from app.run.session import SweepSession

pytestmark = pytest.mark.heavy  # a calibration and measurements through the worker: about a minute

OPTIONS = CalibrateOptions(types=("Q8_0", "Q4_1"), shapes=((256, 4, 1, 512), (512, 2, 4, 512), (512, 6, 4, 512)),
                           n_gen=16, prompts=(16, 64), repetitions=2, type_shape=(512, 3, 4), narrow_shape=None,
                           deep=None, passes=1, moe=(256, 3, 8, 2), use_store=False)
HELD_OUT = {
    "tied-32k": SynthShape(256, 2, "Q8_0", arch="gemma", n_vocab=32000),
    "moe-16x4": SynthShape(512, 2, "Q8_0", ff_ratio=0.5, n_expert=16, n_expert_used=4, embd_type="F16"),
    "q5_0-mix": SynthShape(512, 4, "Q8_0", mix=((r"blk\.\d+\.ffn_(up|down)\.weight", "Q5_0"),), n_vocab=4096),
}


def _calibrate() -> None:
    for attempt in range(2):
        try:
            Calibration(OPTIONS).run()
            return
        except FitError as e:
            if attempt:
                pytest.skip(f"calibration refused twice (a busy machine): {e}")


def _measure(paths: dict[str, Path]) -> dict[str, dict]:
    """Each held-out model's row, measured again (up to twice) while unstable or taken on a busy machine."""
    rows: dict[str, dict] = {}
    for _ in range(3):
        todo = [n for n in paths if n not in rows or untrustworthy(rows[n])]
        if not todo:
            break
        tests = [TestSpec(str(paths[n]), n_prompt=16, n_gen=32, repetitions=3) for n in todo]
        rows.update(zip(todo, SweepSession(tests, store=None, token_ticks=False).run().rows, strict=True))
    return rows


def test_held_out_shapes_decode_inside_the_band_predict_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ladder, "llc_bytes", lambda: 0)
    paths = {n: write_synth_model(tmp_path / f"{n}.gguf", s) for n, s in HELD_OUT.items()}
    _calibrate()
    machine = Machine.load(read_store=False)
    assert machine.fit is not None and machine.cpu is not None
    rows = _measure(paths)
    lines, outside = [], []
    for name, row in rows.items():
        if row.get("status") != "ok" or untrustworthy(row):
            pytest.skip(f"{name}: no stable, quiet measurement ({row.get('error') or 'unstable or busy'})")
        got = answer(read_model_facts(paths[name]), machine.cpu, PredictSettings.from_row(row), machine,
                     measured=False).decode
        measured = statistics.median(float(x) for x in row["decode_samples_tps"])
        assert got.is_expected and got.low is not None and got.high is not None, (name, got)
        lines.append(f"{name}: predicted {got.value:.1f} ({got.low:.1f}-{got.high:.1f}), measured {measured:.1f}; "
                     f"{got.source.detail}")
        if not got.low <= measured <= got.high:
            outside.append(name)
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not outside, lines
    assert "beyond the ladder" in " ".join(lines)  # at least one band says it widened, and why

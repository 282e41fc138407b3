"""A sweep past a model's trained context runs in the window too, with the same warning line as the CLI's in
the message area (issue #13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.run.plan import SweepSpec
from tests.gguf_synth import write_synthetic_gguf

pytestmark = pytest.mark.heavy  # the real window's background jobs


def test_past_the_trained_context_warns_in_the_window(window, qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    model = write_synthetic_gguf(tmp_path / "short-ctx.gguf", n_ctx_train=512)
    tests = SweepSpec(models=[str(model)], n_prompt=[4], n_gen=[2], n_depth=[600], n_threads=[1],
                      repetitions=1).tests()
    with qtbot.waitSignal(window.sweepFinished, timeout=120_000):
        window.start_tests(tests, "past-context")
    text = " ".join(window.messages.messages())
    assert "short-ctx.gguf: tests reach 606 tokens" in text and "trained context of 512" in text
    assert window.results.rowCount() == 1

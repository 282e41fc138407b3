"""Issue #44, the walkthrough's defects outside the window: ``predict -fa 0`` said "flash attention on" for the
figure at the full context, and ``model_type`` read "llama 256M" for a 135M model with no word of why."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.cli.main import main


@pytest.mark.parametrize(("fa", "says"), [("0", "flash attention off"), ("1", "flash attention on"),
                                          ("auto", "flash attention on")])
def test_predict_says_the_flash_attention_it_was_asked(make_gguf: Callable[..., Path], fa: str, says: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    model = make_gguf()
    assert main(["predict", "-m", str(model), "--hw", "RTX 4060 Laptop", "-fa", fa]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "at a full" in line)
    assert says in line, line
    assert main(["predict", "-m", str(model), "--hw", "RTX 4060 Laptop", "-fa", fa, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["at_context"]["flash_attn"] is (fa != "0")


def test_model_type_is_llama_benchs_size_class_and_says_so() -> None:
    """llama.cpp names the size class by layer count (src/models/llama.cpp: 30 layers are "256M", SmolDocling's), and
    llama-bench writes llama_model_desc as it is: the column keeps llama-bench's text (rows compare across the two
    tools) and its description says where the count is."""
    from app.results.fields import FIELD_BY_NAME

    tip = FIELD_BY_NAME["model_type"].tip
    assert "llama_model_desc" in tip and "layer count" in tip and "model_n_params" in tip

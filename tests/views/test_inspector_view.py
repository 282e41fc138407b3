"""Issue #52 item 3: the inspector's figures as one Qt-free view (app.views.inspector), the one ``predict`` prints and
the window renders; a failed answer gives its reason instead of figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.model.gguf_facts import read_model_facts
from app.predict.answer import Machine, answer
from app.predict.placement import fit_verdict
from app.predict.profiles import find_profile, load_profiles
from app.predict.questions import Question, decode_depth_at
from app.views.inspector import InspectorView, inspector_view


def _view(path: Path, question: Question, hw: str = "RTX 4060 Laptop") -> InspectorView | str | None:
    facts, profile, machine = read_model_facts(str(path)), find_profile(hw, load_profiles()), Machine.elsewhere()
    return inspector_view(facts, profile, question, fit_verdict(facts, profile, question, machine),
                          lambda s: answer(facts, profile, s, machine), path.name)


def test_the_view_says_the_verdict_then_each_phases_figure(make_gguf: Callable[..., Path]) -> None:
    view = _view(make_gguf("m.gguf", n_layer=4), Question(n_ctx=4096))
    assert isinstance(view, InspectorView)
    labels = [r.label for r in view.rows()]
    assert labels[:3] == ["Memory needed", "Largest context", "Decode ceiling"]
    assert "Decode expected" in labels and "Prefill ceiling" in labels
    assert view.decode_depth == decode_depth_at(4096)  # decode at the context full, as the plots ask it
    text = view.text()
    assert text.splitlines()[0].startswith("On RTX 4060 Laptop: Fits (-ngl ") and "4,096 tokens" in text
    doc = view.to_json_dict()
    assert doc["flags"] == view.flags and [r["label"] for r in doc["rows"]] == labels


def test_a_placement_the_user_sets_is_the_one_shown(make_gguf: Callable[..., Path]) -> None:
    view = _view(make_gguf("m.gguf", n_layer=4), Question(n_ctx=4096, n_gpu_layers=2))
    assert isinstance(view, InspectorView) and view.flags.startswith("-ngl 2 ")
    assert view.got.prediction.n_gpu_layers == 2  # the figures are the placement's, not all layers'


def test_a_failed_answer_shows_its_reason(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf("m.gguf", n_layer=4)
    facts, profile = read_model_facts(str(path)), find_profile("RTX 4060 Laptop", load_profiles())
    question = Question(n_ctx=4096)
    verdict = fit_verdict(facts, profile, question, Machine.elsewhere())
    assert inspector_view(facts, profile, question, verdict, lambda _s: None) == \
        "no prediction for this model and profile"
    assert inspector_view(facts, profile, question, "no verdict: the file's header is cut short",
                          lambda _s: None) == "no verdict: the file's header is cut short"

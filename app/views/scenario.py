"""The scenario panel's prediction, decided once: one request's rates per phase and what each rests on.

Each phase takes the answer's own figure for the request (``predict -p/-n``'s question, app.predict.questions'
:meth:`~app.predict.questions.Question.request`): measured where this file ran here, else expected, else the ceiling;
the kinds say which (a phase marked ceiling is the least it can take). ``gguf-bench predict``'s ``request`` line and
JSON key give the same figures."""

from __future__ import annotations

from dataclasses import dataclass

from app.predict.questions import Question
from app.views.inspector import Ask


@dataclass(frozen=True)
class RequestRates:
    """One request's predicted rates: prefill and decode tok/s, and each phase's figure kind ("public", "split",
    "ceiling"…)."""

    prefill_tps: float
    decode_tps: float
    prefill_kind: str
    decode_kind: str

    @property
    def rates(self) -> tuple[float, float]:
        return self.prefill_tps, self.decode_tps

    @property
    def kinds(self) -> str:
        """"public / split": the TTFT's figure kind, then decode's."""
        return f"{self.prefill_kind} / {self.decode_kind}"

    def named(self, profile_name: str) -> str:
        """The profile as the panel names it, with what each phase's figure is: "RTX 4060 Laptop (TTFT ceiling,
        decode split)"."""
        return f"{profile_name} (TTFT {self.prefill_kind}, decode {self.decode_kind})"


def request_rates(ask: Ask, question: Question) -> RequestRates | None:
    """The rates of ``question``'s request (its prompt, output, context, KV type and placement), per phase as the
    answer gives them; None where there is no answer or no prompt."""
    got = ask(question.request())
    if got is None or got.prefill is None:
        return None
    return RequestRates(got.prefill.value, got.decode.value, str(got.prefill.kind), str(got.decode.kind))


__all__ = ["RequestRates", "request_rates"]

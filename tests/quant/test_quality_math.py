"""Quality statistics against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.quality.scores import QualityAccumulator, kl_divergence, log_softmax


def test_log_softmax_and_kld_by_hand() -> None:
    logp = log_softmax(np.array([[0.0, math.log(3.0)]]))  # probabilities 1/4, 3/4
    assert logp == pytest.approx(np.log([[0.25, 0.75]]), abs=1e-6)
    ref = np.log(np.array([[0.5, 0.5]], dtype=np.float32))
    # KL(ref || p) = 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) = 0.5 ln 2 + 0.5 ln(2/3)
    assert kl_divergence(ref, logp)[0] == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), abs=1e-6)
    assert kl_divergence(logp, logp)[0] == pytest.approx(0.0, abs=1e-7)


def test_summary_by_hand() -> None:
    acc = QualityAccumulator()
    logp = np.log(np.array([[0.5, 0.5], [0.25, 0.75], [0.8, 0.2]], dtype=np.float32))
    ref = np.log(np.array([[0.5, 0.5], [0.75, 0.25], [0.8, 0.2]], dtype=np.float32))
    acc.add(logp, np.array([0, 1, 0]), ref, ref.argmax(axis=1))
    s = acc.summary()
    nll = np.array([math.log(2), -math.log(0.75), -math.log(0.8)])
    assert s["n_tokens"] == 3
    assert s["ppl"] == pytest.approx(math.exp(nll.mean()), rel=1e-6)
    # llama.cpp: sqrt((mean(nll^2) - mean(nll)^2) / (n - 1)) * ppl
    assert s["ppl_err"] == pytest.approx(math.sqrt((np.mean(nll**2) - nll.mean() ** 2) / 2) * s["ppl"], rel=1e-5)
    kld_mid = 0.75 * math.log(0.75 / 0.25) + 0.25 * math.log(0.25 / 0.75)
    assert s["mean_kld"] == pytest.approx(kld_mid / 3, abs=1e-6)
    assert s["same_top_rate"] == pytest.approx(2 / 3)  # row 0 ties (argmax 0 both), row 1 differs, row 2 agrees
    assert s["kld_p99"] == pytest.approx(float(np.percentile([0, kld_mid, 0], 99)), abs=1e-6)


def test_no_tokens_gives_no_figures() -> None:
    assert QualityAccumulator().summary()["ppl"] is None

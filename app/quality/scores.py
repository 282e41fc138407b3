"""Quality statistics from next-token distributions: perplexity, KL divergence to a reference, same-top-token rate.

Pure numpy, the formulas of llama.cpp's perplexity tool (tools/perplexity/perplexity.cpp): perplexity is
exp(mean negative log-likelihood) with the error ``ppl × sqrt(var(nll) / (n - 1))`` (its "Final estimate: PPL =
x +/- e"); KLD per token is ``sum p_ref × (log p_ref − log p)`` in nats (its kl_divergence()), summarised as the
mean (± its standard error, as llama.cpp's "Mean KLD: x ± e") and the 99th percentile; "same top" counts
tokens where both argmaxes agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float32 (numerically stable)."""
    x = logits.astype(np.float32, copy=True)
    x -= x.max(axis=1, keepdims=True)
    x -= np.log(np.exp(x).sum(axis=1, keepdims=True))
    return x


def kl_divergence(ref_logp: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """Per-row KL(ref || model) in nats from two log-probability arrays of the same shape (never below 0)."""
    ref = ref_logp.astype(np.float32, copy=False)
    kld = (np.exp(ref) * (ref - logp)).sum(axis=1)
    clipped: np.ndarray = np.maximum(kld, 0.0)
    return clipped


@dataclass
class QualityAccumulator:
    """Per-token values gathered chunk by chunk; ``summary`` gives the row's figures."""

    nll: list[np.ndarray] = field(default_factory=list)
    kld: list[np.ndarray] = field(default_factory=list)
    same_top: list[np.ndarray] = field(default_factory=list)

    def add(self, logp: np.ndarray, targets: np.ndarray, ref_logp: np.ndarray | None = None,
            ref_top: np.ndarray | None = None) -> None:
        """One chunk: ``logp`` rows predict ``targets``; the reference's rows and argmaxes when comparing."""
        self.nll.append(-logp[np.arange(len(targets)), targets].astype(np.float64))
        if ref_logp is not None:
            self.kld.append(kl_divergence(ref_logp, logp).astype(np.float64))
        if ref_top is not None:
            self.same_top.append(logp.argmax(axis=1) == ref_top)

    @property
    def n_tokens(self) -> int:
        return int(sum(len(x) for x in self.nll))

    def summary(self) -> dict[str, float | int | None]:
        """ppl, ppl_err, mean_kld (± mean_kld_err, its standard error), kld_p99, same_top_rate, n_tokens (KLD figures
        None when not compared)."""
        nll = np.concatenate(self.nll) if self.nll else np.zeros(0)
        n = len(nll)
        ppl = ppl_err = mean_kld = mean_kld_err = kld_p99 = same_top_rate = None
        if n:
            mean = float(nll.mean())
            ppl = math.exp(mean)
            var = float((nll * nll).mean()) - mean * mean
            ppl_err = ppl * math.sqrt(var / (n - 1)) if n > 1 and var > 0 else 0.0
            if self.kld:
                kld = np.concatenate(self.kld)
                mean_kld = float(kld.mean())
                mean_kld_err = float(kld.std(ddof=1) / math.sqrt(len(kld))) if len(kld) > 1 else 0.0
                kld_p99 = float(np.percentile(kld, 99))
            if self.same_top:
                same_top_rate = float(np.concatenate(self.same_top).mean())
        return {"n_tokens": n, "ppl": ppl, "ppl_err": ppl_err, "mean_kld": mean_kld, "mean_kld_err": mean_kld_err,
                "kld_p99": kld_p99, "same_top_rate": same_top_rate}

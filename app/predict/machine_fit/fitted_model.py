"""Fitted time models of decode and prefill: what a machine (or a GPU architecture) *achieves*, beside the ceilings.

The form (one per phase; times in seconds per token; coefficients ≥ 0, fitted by least squares on relative time):

    decode  = Σ_class bytes_class × (1 − llc) × s_per_byte[class] + Σ bytes × llc × s_per_llc_byte
              + kv_bytes × s_per_kv_byte[fa]
              (+ attn_dec × s_per_attn + attn_dec_view × s_per_attn_view + split × t_split, fa on)
              + expert_matmuls × t_expert + n_layer × t_layer + t_fixed
    prefill = Σ_class flops_class × s_per_flop[class] + attn_work × s_per_attn[fa] (+ spill_work × s_per_spill, fa on)
              + expert_flops × s_per_expert_flop
              + n_layer × t_layer + n_layer × ubatches / n_prompt × t_layer_ubatch
              + Σ_class width_class × s_per_width[class]

- ``bytes_class``: weight bytes read per generated token, split by kernel class (``workload.KERNEL_CLASS``: on the CPU
  the int8 dot-product paths of the quantized types against f16/f32), so ``1 / s_per_byte`` is η_bw × bandwidth of
  that kernel; ``kv_bytes``: the KV cache read at the average depth of the generation; ``attn_dec``: the attention
  work of one generated token there, depth × n_layer × n_embd_attn (it grows with the query heads, the bytes with
  the KV heads: models of other GQA ratios need both; with flash attention off, rare on CPUs, the bytes only).
  On the CPU the attention of a token that ggml's flash attention runs on its split-KV path (the cells, not the
  heads, spread across threads: from the 257th cell on, see ``cpu_kernels.SPLIT_KV_CELLS``) is its own term,
  ``attn_dec_view``, with a cost per layer of that path, ``split`` (n_layer × the share of generated tokens on it).
  That path gives each thread an equal span of the cache's padded view, so its time follows the view's cells, not
  the used ones (``_split_kv_decode``). A fit with too few points to tell these apart folds them (``FOLDS``).
- ``flops_class``: 2 × the matmul parameters of that class per prompt token (so ``1 / s_per_flop`` = η_c × compute);
  ``attn_work``: (depth + n_prompt / 2) × n_layer × n_embd_attn, with separate coefficients with flash attention
  on and off; ``layer_ubatch`` is a per-layer cost per micro-batch, spread over the prompt.
- ``width_class``: n_layer × (n_embd + n_ff) per prompt token, shared among the classes by their FLOPs: the work
  that grows with a layer's width, not with its square (each matmul's activations quantized, each output row's dot
  product set up, the norms and elementwise ops); per class, as the kernels differ in it. Beside the FLOPs it
  weighs most in narrow models (a narrow model spends more time per FLOP). It is told from attention by prompts of
  one length from an empty cache at several widths (the ladder measures every type at two). Its coefficients move
  between calibrations more than the figures they predict (``benchmarks/prediction.py`` prints both).
- ``spill_work``: the part of ``attn_work`` whose keys and values do not fit in one core's L2 cache. The CPU's flash
  attention walks one KV head's whole span (depth + n_prompt keys) for every tile of 64 queries; while that span
  fits in L2 each tile re-reads it from there, beyond it every tile streams it from L3 or memory, so the cost per
  unit of attention work may rise with depth. ``spill_work = attn_work × max(0, 1 − L2 / span bytes)``; with no
  cache size known it is 0 (and absent). The fit decides its size (≥ 0; it can come out near zero, attention then
  costing the same per unit at any depth). Prompts of under 64 tokens run the scalar, untiled kernel, slower per
  unit (not modelled: a ladder point of that kind at depth is set aside as an outlier).
- ``llc``: the share of the weights that stays in the last-level cache between decoded tokens
  (``workload.llc_share``: all of a working set within half the cache, none from the whole cache on): small models
  read their bytes from there at a cost of their own, so they no longer pass for a cheaper byte in memory.
- ``expert_matmuls``: a mixture's routed-expert matmuls per generated token (layers × expert matrices ×
  n_expert_used), each a small matmul of its own in ``mul_mat_id`` over experts scattered in their tensor;
  ``expert_flops``: the routed experts' share of the prompt's FLOPs, which ``mul_mat_id`` runs expert by expert, off
  the dense matmul's kernel. Learned from the ladder's one mixture; a fit without it folds both away (``FOLDS``).
- The band beyond the ladder: each fit keeps its coefficients refitted with each model left out (``refits``); a
  figure's jackknife spread over them (``PhaseFit.reach``) says how far the ladder's models agree on the terms that
  figure leans on, and widens its band by ``REACH_Z`` times it (``calibration_fit.beyond_ladder``).
- The kernel class of a type is the caller's (``classify``): ``kernel_class`` by default (GPUs, the public table),
  the CPU's own table (:mod:`app.predict.cpu_kernels`: repacked and plain paths apart) for a CPU fit.

A class holding under ``MINOR_SHARE`` of the bytes (the f32 norms) is merged into the largest class.

Other fitters (e.g. a public-GPU table) build ``Workload``s from their own data with ``workload_for``, fit with
``fit_phase`` and call ``PhaseFit.expected``: every figure is an ``Expected`` (value, band, source). Pure functions;
numpy least squares; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from app.model.facts import ModelFacts
from app.predict.machine_fit.workload import Phase, Workload
from app.shown_text import quoted

if TYPE_CHECKING:
    from app.predict.settings import PredictSettings

#: The band of an expected figure is at least this fraction either side.
BAND_FLOOR = 0.05
#: ... and otherwise this percentile of the fit's absolute relative residuals.
BAND_PERCENTILE = 90.0
#: The widest band a saved fit may carry: a figure ÷ or × 101 says nothing, and one past it (1e308) made bands of
#: ±inf% and JSON's non-standard Infinity.
MAX_BAND_FRAC = 100.0
#: Standard errors of a figure's spread over the leave-one-model-out refits that its band widens by beyond the
#: ladder: the two-sided 90 % of a normal spread, as the band's own 90th percentile of residuals.
REACH_Z = 1.645
#: A point off the first fit by more than this × the median error, and by more than OUTLIER_MIN, is set aside.
OUTLIER_FACTOR = 4.0
OUTLIER_MIN = 0.25
#: Terms a fit with too few points (or points that cannot tell them apart) folds away, in this order: the split-KV
#: path's per-layer cost is dropped, then its attention over the view becomes the same tokens' used cells
#: (``attn_split:fa``), which in turn joins the whole-head term ``attn:fa``, then prefill's width term is dropped.
#: A name ending in ":" stands for every regressor it begins (one per kernel class). A fold may take the value it
#: moves from the workload (third field; None: the folded regressors' own value). A fit made with terms folded
#: reads workloads with the same terms folded (``PhaseFit.features``).
FOLDS: tuple[tuple[str, str | None, Callable[[Workload], float] | None], ...] = (
    ("split:fa", None, None),
    ("attn_view:fa", "attn_split:fa", lambda w: w.decode_attn_split_used_work),
    ("attn_split:fa", "attn:fa", None),
    ("width:", None, None),
    ("experts", None, None),
)


class FitError(ValueError):
    """The points cannot determine the model (too few, or not varied enough); the message says what is missing."""


@dataclass(frozen=True)
class Expected:
    """An expected figure (tokens/s): the fitted value, its band, and where the parameters came from."""

    value: float
    low: float
    high: float
    source: str
    kind: str = "expected"

    def to_json_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "source": self.source, "kind": self.kind}


#: Expected figures from a fit (``MachineFit.expected`` of this machine on one backend): phase -> Expected or None.
FittedExpectation = Callable[[ModelFacts, "PredictSettings"], Mapping[str, "Expected | None"]]


@dataclass(frozen=True)
class FitPoint:
    """One measured point and what the fit makes of it (tokens/s), with where it lies: the weight bytes its model
    reads per generated token and its prompt length (0: not recorded, a fit saved before they were)."""

    label: str
    measured_tps: float
    fitted_tps: float
    used: bool = True  # False: set aside as an outlier (a hiccup of the machine), not in the coefficients or band
    weight_bytes: float = 0.0
    n_prompt: int = 0

    @property
    def rel_error(self) -> float:
        return self.fitted_tps / self.measured_tps - 1.0


@dataclass(frozen=True)
class PhaseFit:
    """Fitted coefficients of one phase (seconds per unit of each regressor) and how well they fit."""

    phase: Phase
    coefficients: dict[str, float]
    band_frac: float
    points: tuple[FitPoint, ...] = field(default_factory=tuple)
    #: the coefficients refitted with each model's points left out in turn (empty: not computed, an older fit):
    #: how far a figure moves with them is how far the fit's reach holds there (:meth:`reach`)
    refits: tuple[dict[str, float], ...] = field(default_factory=tuple)
    #: how far a measured weight type's figures move when its time is taken from the type that would stand in for
    #: it, leave one type out (the largest over the types; 0: none judged); a type the ladder never measured takes
    #: a stand-in's class and this much more band on its share
    stand_in_error: float = 0.0

    @property
    def used_points(self) -> list[FitPoint]:
        return [p for p in self.points if p.used]

    @property
    def median_error(self) -> float:
        """Median absolute relative error of the points the fit used."""
        import numpy as np

        used = self.used_points
        return float(np.median([abs(p.rel_error) for p in used])) if used else math.nan

    @property
    def worst_error(self) -> float:
        return max((abs(p.rel_error) for p in self.used_points), default=math.nan)

    def features(self, workload: Workload) -> dict[str, float]:
        """``workload``'s regressors as this fit knows them: with the terms of ``FOLDS`` it was fitted without (too
        few points, or points that never took the split-KV path) folded as the fit folded them; a fit without a
        last-level-cache term (none of its points fit in the cache) reads every byte from memory."""
        if "bytes_llc" not in self.coefficients and workload.llc_share:
            workload = replace(workload, llc_share=0.0)
        return _as_known(workload, self.phase, lambda name: bool(_named(self.coefficients, name)))

    def disturbed(self) -> set[str]:
        """Labels of the points set aside, or missed by more than the outlier test allows (the tests worth
        measuring again)."""
        limit = max(OUTLIER_FACTOR * self.median_error, OUTLIER_MIN)
        return {p.label for p in self.points if not p.used or abs(p.rel_error) > limit}

    def missing(self, workload: Workload) -> list[str]:
        """Regressors of ``workload`` this fit has no coefficient for (it cannot predict it)."""
        return sorted(set(self.features(workload)) - set(self.coefficients))

    def seconds_per_token(self, workload: Workload) -> float:
        """Fitted seconds per token; KeyError names a regressor the fit never saw (e.g. an uncalibrated class)."""
        feats = self.features(workload)
        missing = self.missing(workload)
        if missing:
            raise KeyError(", ".join(missing))
        return sum(self.coefficients[k] * v for k, v in feats.items())

    def reach(self, workload: Workload) -> float:
        """The jackknife standard error of ``workload``'s fitted time over :attr:`refits`, relative to the time: small
        where the ladder's models agree on every term the workload weighs, large where one model alone decides a
        term it leans on (a shape, width or type the ladder barely holds); 0 without refits."""
        import numpy as np

        try:
            seconds = self.seconds_per_token(workload)
        except KeyError:
            return 0.0
        devs = []
        for coefficients in self.refits:
            refit = PhaseFit(self.phase, coefficients, self.band_frac)
            try:
                other = refit.seconds_per_token(workload)
            except KeyError:
                continue
            devs.append(other / seconds - 1.0)
        if len(devs) < 2 or seconds <= 0:
            return 0.0
        d = np.asarray(devs)
        return float(np.sqrt((len(d) - 1) / len(d) * np.sum((d - d.mean()) ** 2)))

    def expected(self, workload: Workload, source: str) -> Expected | None:
        """Tokens/s with its band (÷ and × (1 + band_frac): never below zero); None when the workload needs a
        coefficient the fit lacks or the time is ≤ 0."""
        try:
            seconds = self.seconds_per_token(workload)
        except KeyError:
            return None
        if seconds <= 0:
            return None
        tps = 1.0 / seconds
        return Expected(tps, tps / (1.0 + self.band_frac), tps * (1.0 + self.band_frac), source)

    def to_json_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "coefficients": dict(self.coefficients), "band_frac": self.band_frac,
                "points": [[p.label, p.measured_tps, p.fitted_tps, p.used, p.weight_bytes, p.n_prompt]
                           for p in self.points],
                "refits": [dict(c) for c in self.refits], "stand_in_error": self.stand_in_error}

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> PhaseFit:
        """Each point is [label, measured, fitted, used] and, since fits record where points lie, [weight bytes,
        prompt length]; a point of another length raises ValueError. ``refits`` and ``stand_in_error`` are optional
        (a fit saved before them has none: its band does not widen beyond the ladder)."""
        points = tuple(_point_from_json(p) for p in d["points"])
        coefficients = {str(k): float(v) for k, v in d["coefficients"].items()}
        band = float(d["band_frac"])
        refits = tuple({str(k): float(v) for k, v in c.items()} for c in d.get("refits", ()))
        stand_in_error = float(d.get("stand_in_error", 0.0))
        if not all(math.isfinite(v) for v in (*coefficients.values(), band, stand_in_error,
                                               *(v for c in refits for v in c.values()))):
            raise ValueError("a saved fit holds a coefficient or band that is not a finite number")
        if not (0.0 <= band <= MAX_BAND_FRAC and 0.0 <= stand_in_error <= MAX_BAND_FRAC):
            raise ValueError(f"a saved fit's band ±{quoted(band)} (stand-in error {quoted(stand_in_error)}) is not "
                             f"from 0 to {MAX_BAND_FRAC:g} (±{MAX_BAND_FRAC:.0%}): no fit this program makes")
        phase = _PHASES.get(str(d["phase"]))
        if phase is None:
            raise ValueError(f"a saved fit of phase {quoted(d['phase'])}, not decode or prefill")
        return cls(phase, coefficients, band, points, refits, stand_in_error)


_PHASES: dict[str, Phase] = {"decode": "decode", "prefill": "prefill"}


def _point_from_json(p: Sequence[Any]) -> FitPoint:
    if len(p) not in (4, 6):
        raise ValueError(f"a saved fit point has {len(p)} fields, not 4 or 6")
    label, measured, fitted, used = p[:4]
    weight_bytes, n_prompt = p[4:] if len(p) == 6 else (0.0, 0)
    return FitPoint(str(label), float(measured), float(fitted), bool(used), float(weight_bytes), int(n_prompt))


def _rel_errors(fitted_over_measured_s: np.ndarray) -> np.ndarray:
    """|fitted tps / measured tps - 1| from fitted ÷ measured seconds per token (a non-positive fit: infinitely off)."""
    import numpy as np

    with np.errstate(divide="ignore"):
        return np.where(fitted_over_measured_s > 0, np.abs(1.0 / fitted_over_measured_s - 1.0), np.inf)


def _scaled(design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``design`` with each column divided by its largest magnitude, and those divisors: regressors run from
    bytes (1e9) to layer counts (1e1), and the solver's tolerances need columns of one size."""
    import numpy as np

    scale = np.abs(design).max(axis=0)
    scale[scale == 0] = 1.0
    return design / scale, scale


def scaled_nnls(design: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """min ‖design·c − rhs‖ with c ≥ 0, solved on column-scaled regressors: the one solver of the machine fit
    (:func:`fit_phase`) and the public GPU fit (``public_arch_fit``)."""
    scaled, scale = _scaled(design)
    solution: np.ndarray = nnls(scaled, rhs) / scale
    return solution


def _solve(design: np.ndarray, names: list[str], phase: str) -> np.ndarray:
    """Least squares of ``design`` (one row per point, each divided by its measured time) against ones."""
    import numpy as np

    scaled, _scale = _scaled(design)
    rank = np.linalg.matrix_rank(scaled, tol=1e-6 * max(scaled.shape))
    if rank < len(names):
        raise FitError(f"{phase}: the points cannot separate {', '.join(names)} (rank {rank} of {len(names)}): "
                       "vary the model size, layer count, prompt length and depth")
    return scaled_nnls(design, np.ones(len(design)))


def nnls(a: np.ndarray, b: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """min ‖a·x − b‖ with x ≥ 0 (Lawson and Hanson's active set): every cost in the form is non-negative, so a noisy
    point cannot buy a better fit with a negative per-layer cost that makes small models' times negative."""
    import numpy as np

    n = a.shape[1]
    free = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    for _ in range(3 * n):
        grad = a.T @ (b - a @ x)
        if free.all() or grad[~free].max() <= tol:
            break
        free[np.argmax(np.where(free, -np.inf, grad))] = True
        while True:
            z = np.zeros(n)
            z[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
            if (z[free] > tol).all():
                break
            neg = free & (z <= tol)
            step = np.min(x[neg] / np.maximum(x[neg] - z[neg], 1e-300))
            x = x + step * (z - x)
            free &= x > tol
            x[~free] = 0.0
        x = z
    return x



def fit_phase(
    phase: Phase, points: Sequence[tuple[Workload, float]], labels: Sequence[str] | None = None,
    *, band_floor: float = BAND_FLOOR, outlier_factor: float = OUTLIER_FACTOR,
) -> PhaseFit:
    """Fit ``phase``'s coefficients to (workload, measured tokens/s) points by least squares on relative time.

    Points off the first fit by more than ``outlier_factor`` × the median error (and by over OUTLIER_MIN) are set
    aside and the rest refitted once: a test slowed by another process must not bend the fit for every model.
    Raises FitError when there are fewer points than coefficients + 2, or when the points cannot tell two
    regressors apart (e.g. every point has the same model size, so per-byte and fixed costs are confounded), even
    with the terms of ``FOLDS`` folded away.
    """
    def without(n_folded: int) -> list[dict[str, float]]:  # the regressors with the first n_folded FOLDS folded
        folded = {name for name, _, _ in FOLDS[:n_folded]}
        return [_as_known(w, phase, lambda name: name not in folded) for w, _ in points]

    for n_folded in range(len(FOLDS)):
        try:
            return _fit_features(phase, points, without(n_folded), labels, band_floor, outlier_factor)
        except FitError:
            pass
    return _fit_features(phase, points, without(len(FOLDS)), labels, band_floor, outlier_factor)


def _named(names: Mapping[str, float], name: str) -> list[str]:
    """The keys of ``names`` that ``name`` stands for: itself, or with a trailing ":" every key it begins."""
    return [k for k in names if k.startswith(name)] if name.endswith(":") else [name] if name in names else []


def _as_known(workload: Workload, phase: Phase, knows: Callable[[str], bool]) -> dict[str, float]:
    """``workload``'s regressors for ``phase`` with each term of ``FOLDS`` that ``knows`` rejects folded away."""
    feats = workload.features(phase)
    for name, into, value_of in FOLDS:
        if _named(feats, name) and not knows(name):
            feats = _fold(feats, name, into, None if value_of is None else value_of(workload))
    return feats


def _fold(feats: dict[str, float], name: str, into: str | None, value: float | None = None) -> dict[str, float]:
    """``feats`` without ``name`` (see ``_named``): its value (or ``value``) added to ``into``, or dropped (``into``
    None)."""
    out = dict(feats)
    own = sum(out.pop(k) for k in _named(feats, name))
    value = own if value is None else value
    if into is not None and value:
        out[into] = out.get(into, 0.0) + value
    return out


def _fit_features(
    phase: Phase, points: Sequence[tuple[Workload, float]], feats: Sequence[dict[str, float]],
    labels: Sequence[str] | None, band_floor: float, outlier_factor: float,
) -> PhaseFit:
    import numpy as np

    names = sorted({k for f in feats for k in f})
    if len(points) < len(names) + 2:
        raise FitError(f"{phase}: {len(points)} points for {len(names)} coefficients ({', '.join(names)}); "
                       f"need at least {len(names) + 2}")
    tps = np.array([float(m) for _, m in points])
    if not np.all(np.isfinite(tps)) or np.any(tps <= 0):
        raise FitError(f"{phase}: measured tokens/s must be positive and finite")
    design = np.array([[f.get(n, 0.0) for n in names] for f in feats]) * tps[:, None]
    coef = _solve(design, names, phase)
    rel = _rel_errors(design @ coef)
    used = rel <= max(outlier_factor * float(np.median(rel)), OUTLIER_MIN)
    if not used.all() and used.sum() >= len(names) + 2:
        try:
            coef = _solve(design[used], names, phase)
        except FitError:
            used[:] = True
    else:
        used[:] = True
    fitted_s = design @ coef / tps
    if np.any(fitted_s[used] <= 0):
        raise FitError(f"{phase}: the fit gives non-positive times for some points; the data do not follow the form")
    labels = list(labels) if labels is not None else [str(i) for i in range(len(points))]
    fit_points = tuple(FitPoint(lab, float(m), float(1.0 / s) if s > 0 else math.inf, bool(u),
                                float(sum(w.class_bytes.values())), int(w.n_prompt))
                       for lab, m, s, u, (w, _) in zip(labels, tps, fitted_s, used, points, strict=True))
    errors = [abs(p.rel_error) for p in fit_points if p.used]
    band = max(band_floor, float(np.percentile(errors, BAND_PERCENTILE)))
    return PhaseFit(phase, dict(zip(names, coef.tolist(), strict=True)), band, fit_points)

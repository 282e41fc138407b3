"""Calibration: this machine's efficiency (achieved ÷ ceiling, by phase and backend) learned from stored runs.

Once one model has been measured here, other model files can be predicted on this machine: the ceiling
from their GGUF facts times the efficiency learned from the others. Only rows that can be trusted teach it: status
ok, stable (``unstable`` unset), not taken on a busy machine (:func:`app.results.fields.taken_while_busy`; rows
from before that column count as quiet) and run on the thread count the prediction is for (a -t 1 row says
nothing of a run on every core).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from app.predict.machine_fit.calibration_fit import MachineFit
from app.predict.machine_fit.calibration_store import load_fit
from app.predict.machine_fit.fitted_model import FittedExpectation
from app.results.fields import RowStatus, taken_while_busy
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from engines.base import resolve_n_threads


@dataclass(frozen=True)
class Efficiency:
    """Achieved ÷ ceiling per phase, learned from stored rows of other models; times the ceilings, an expected
    figure where no fit gives one."""

    prefill: float = 1.0
    decode: float = 1.0

    def __post_init__(self) -> None:
        if self.prefill <= 0 or self.decode <= 0:
            raise ValueError("Efficiency factors must be positive")


def threads_for(n_threads: int | None) -> int:
    """The CPU threads a prediction for ``n_threads`` is for: None or 0 is the count a default run uses here (every
    logical CPU, as the engine resolves ``n_threads`` 0)."""
    return resolve_n_threads(n_threads or 0)


def row_threads(row: ResultRow) -> int:
    """The CPU threads a stored row ran with: its ``n_threads_effective``, else its ``n_threads`` resolved as the
    engine resolves it (0, or no setting recorded: the default count)."""
    for value in (row.n_threads_effective, row.n_threads):
        if value is not None and value > 0:
            return value
    return resolve_n_threads(0)


def untrustworthy(row: ResultRow) -> bool:
    """True for a row marked unstable or taken while the machine was busy (unknown business counts as quiet)."""
    return bool(row.unstable) or taken_while_busy(row) is True


@dataclass(frozen=True)
class RowSelection:
    """The rows an efficiency is learned from, and what was left out of the same pool."""

    rows: list[ResultRow]
    n_threads: int
    n_untrusted: int = 0  # unstable or busy rows at that thread count
    n_other_threads: int = 0  # stable, quiet rows at another thread count

    def left_out(self) -> str:
        """What was left out, as a clause ("3 unstable/busy rows and 2 rows at other thread counts left out"), or
        ""."""
        parts = [_count(self.n_untrusted, "unstable/busy row") if self.n_untrusted else "",
                 f"{_count(self.n_other_threads, 'row')} at other thread counts" if self.n_other_threads else ""]
        said = " and ".join(p for p in parts if p)
        return f"{said} left out" if said else ""


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: "1 row", "3 threads"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def select_rows(rows: list[ResultRow], n_threads: int | None = None) -> RowSelection:
    """The ok, stable, quiet rows of ``rows`` at the thread count :func:`threads_for` gives for ``n_threads``."""
    threads = threads_for(n_threads)
    ok = [r for r in rows if r.status == RowStatus.OK]
    at_threads = [r for r in ok if row_threads(r) == threads]
    kept = [r for r in at_threads if not untrustworthy(r)]
    n_other = sum(1 for r in ok if row_threads(r) != threads and not untrustworthy(r))
    return RowSelection(kept, threads, len(at_threads) - len(kept), n_other)


def efficiency_from_rows(rows: list[ResultRow], n_threads: int | None = None) -> Efficiency | None:
    """Median achieved fraction per phase over the rows :func:`select_rows` keeps (ok, stable, quiet, at the thread
    count for ``n_threads``); None when a phase has no measurement."""
    return _median_efficiency(select_rows(rows, n_threads).rows)


def _median_efficiency(rows: list[ResultRow]) -> Efficiency | None:
    dec = _fractions(rows, "decode_achieved_frac")
    pre = _fractions(rows, "prefill_achieved_frac")
    if not dec or not pre:
        return None
    return Efficiency(prefill=statistics.median(pre), decode=statistics.median(dec))


def _fractions(rows: list[ResultRow], key: str) -> list[float]:
    """The positive finite numbers under ``key``; a stored row with anything else there is skipped."""
    out = []
    for r in rows:
        value = getattr(r, key)  # the fraction named by the caller
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
            out.append(float(value))
    return out


def fitted_expectation(fit: MachineFit | None, backend: str = "CPU") -> FittedExpectation | None:
    """``predict()``'s ``fitted`` hook from a saved fit of this machine; None when it has no fit on ``backend``."""
    if fit is None or backend not in fit.fits:
        return None
    return lambda facts, settings: fit.expected(facts, settings, backend)


class StoreCalibration:
    """Looks efficiencies up in the results store for this machine (same CPU and GPU), excluding the model itself."""

    def __init__(self, store: ResultStore, cpu_info: str, gpu_info: str = "", limit: int = 500) -> None:
        self.rows = [r for r in store.recent_rows(limit)
                     if r.cpu_info == cpu_info and (r.gpu_info or "") == gpu_info]
        self._cache: dict[tuple[str, str, str, int], tuple[Efficiency | None, str, str]] = {}
        self.machine_fit: MachineFit | None = load_fit(cpu_info, gpu_info)  # `gguf-bench calibrate`'s, if any

    def fitted(self, backend: str = "CPU") -> FittedExpectation | None:
        """Expected figures from this machine's saved fit on ``backend`` (None: not calibrated there); they take
        the place of the stored efficiencies in ``predict``."""
        return fitted_expectation(self.machine_fit, backend)

    def __call__(self, backends: str, model_filename: str, file_type: str = "",
                 n_threads: int | None = None) -> tuple[Efficiency | None, str]:
        """Efficiency from other models on this backend at ``n_threads`` (None: the default count), preferring the
        same quantization type; with the source: "4 rows (same type Q4_1) of a.gguf at 2 threads; 3 unstable/busy
        rows left out" ("" when there is no efficiency).

        The efficiency of a kernel depends on the weight type (on a CPU, Q8_0 dot products run far faster than
        Q4_1's), so rows of the same ``file_type`` are used when there are any.
        """
        eff, source, _ = self._look_up(backends, model_filename, file_type, n_threads)
        return eff, source

    def why_none(self, backends: str, model_filename: str, file_type: str = "", n_threads: int | None = None) -> str:
        """Why :meth:`__call__` gives no efficiency for these arguments, in one clause ("" when it gives one)."""
        return self._look_up(backends, model_filename, file_type, n_threads)[2]

    def _look_up(self, backends: str, model_filename: str, file_type: str,
                 n_threads: int | None) -> tuple[Efficiency | None, str, str]:
        threads = threads_for(n_threads)
        key = (backends, model_filename, file_type, threads)
        if key not in self._cache:
            others = [r for r in self.rows if (r.backends or "CPU") == backends
                      and r.model_filename != model_filename and r.status == RowStatus.OK]
            same = select_rows([r for r in others if file_type and r.model_ftype == file_type], threads)
            chosen = same if same.rows else select_rows(others, threads)
            eff = _median_efficiency(chosen.rows)
            at, left_out = _count(threads, "thread"), chosen.left_out()
            if eff is None:
                why = f"no stable, quiet rows of other models on {backends} at {at}"
                self._cache[key] = (None, "", why + (f" ({left_out})" if left_out else ""))
            else:
                models = ", ".join(sorted({str(r.model_filename) for r in chosen.rows}))
                kind = f"same type {file_type}" if same.rows else "other types"
                source = f"{_count(len(chosen.rows), 'row')} ({kind}) of {models} at {at}"
                self._cache[key] = (eff, source + (f"; {left_out}" if left_out else ""), "")
        return self._cache[key]

"""The held-out tables of published llama-bench results (``HELD_OUT_TABLE_PATHS``:
``profiles/reference/llama_bench_public_more.toml`` and ``llama_bench_public_held_out_issues.toml``), and the check
of the public fit against them.

The held-out rows are never fitted: every row read here is marked ``held_out`` and :class:`PublicGpuModel` refuses
such rows, and the shipped fit (``load_public_model``) reads only the training tables (``TRAINING_TABLE_PATHS`` of
app/predict/public/data.py), whose rows come from other sources (held out by source). The file has the
schema of app/predict/public/data.py with its optional keys (date, flash_attn, n_depth, n_ubatch, n_batch; MoE
n_expert, n_expert_used, expert_ff); a malformed file raises ``ReferenceTableError`` with one line naming it.

Each row is predicted the way ``predict`` does it: the ceiling from the row's model shape on the GPU's profile
(header-only facts, as the fit computes them: weights read less an untied embedding table and a MoE model's idle
experts, the KV cache at the row's depth), then :meth:`PublicGpuModel.expected` for the row's backend and build.
Pure, except :func:`load_held_out`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.paths import PROFILES_DIR
from app.predict.machine_fit.fitted_model import Expected
from app.predict.machine_fit.workload import PHASES, Phase
from app.predict.profiles import HardwareProfile, ProfileError, find_profile
from app.predict.public.arch_fit import measured_tps, row_era, row_shape, used
from app.predict.public.bands import SituationBand
from app.predict.public.data import ReferenceResult, load_reference, source_key
from app.predict.public.fit import PublicGpuModel, row_ceiling_tps

HELD_OUT_TABLE_PATH = PROFILES_DIR / "reference" / "llama_bench_public_more.toml"
#: Every held-out table: the first one, and rows of llama.cpp's issues and discussions.
HELD_OUT_TABLE_PATHS: tuple[Path, ...] = (
    HELD_OUT_TABLE_PATH, *(PROFILES_DIR / "reference" / f"llama_bench_public_held_out_{part}.toml"
                           for part in ("issues",)))


def load_held_out(paths: Path | Sequence[Path] = HELD_OUT_TABLE_PATHS) -> list[ReferenceResult]:
    """Read and validate the held-out tables, file by file; every row comes back marked ``held_out``."""
    return [r for path in ([paths] if isinstance(paths, Path) else paths) for r in load_reference(path, held_out=True)]


@dataclass(frozen=True)
class HeldOutCheck:
    """One held-out figure and what the fit (trained without it) expected."""

    row: ReferenceResult
    phase: Phase
    profile: HardwareProfile
    expected: Expected | None
    why_none: str = ""
    band: SituationBand | None = None  # the situation the figure was made in, and the errors its band came from

    @property
    def measured_tps(self) -> float:
        return measured_tps(self.row, self.phase)

    @property
    def rel_error(self) -> float:
        """expected ÷ measured − 1; NaN when there is no expected figure."""
        return self.expected.value / self.measured_tps - 1.0 if self.expected else math.nan

    @property
    def inside_band(self) -> bool:
        return self.expected is not None and self.expected.low <= self.measured_tps <= self.expected.high


@dataclass(frozen=True)
class Skipped:
    """A held-out row that could not be checked, and why (no hardware profile, ...)."""

    row: ReferenceResult
    reason: str


def resolve_gpu(row: ReferenceResult, profiles: Sequence[HardwareProfile]) -> tuple[HardwareProfile | None, str]:
    """The profile the row's GPU name names exactly (``find_profile``), or (None, why)."""
    try:
        return find_profile(row.gpu, profiles), ""
    except ProfileError as e:
        return None, str(e)


def expected_for_row(model: PublicGpuModel, row: ReferenceResult, profile: HardwareProfile,
                     phase: Phase) -> tuple[Expected | None, str, SituationBand | None]:
    """What the public fit expects for ``row``'s figure of ``phase`` on ``profile``, at the row's settings, backend
    and build: the same call ``predict`` makes, with the row's ceiling (uncapped spec rates); and its band's
    situation."""
    return model.expected_with_band(profile, phase, row_ceiling_tps(row, profile, phase), row.ggml_type,
                                    row_shape(row, phase), backend=row.backend, build=row.build_number, date=row.date)


def check_held_out(model: PublicGpuModel, rows: Iterable[ReferenceResult],
                   profiles: Sequence[HardwareProfile]) -> tuple[list[HeldOutCheck], list[Skipped]]:
    """Every used figure of ``rows`` predicted by ``model`` (which never saw them), and the rows skipped."""
    checks: list[HeldOutCheck] = []
    skipped: list[Skipped] = []
    for r in rows:
        profile, why = resolve_gpu(r, profiles)
        if profile is None:
            skipped.append(Skipped(r, why))
            continue
        for phase in PHASES:
            if used(r, phase):
                exp, why_none, band = expected_for_row(model, r, profile, phase)
                checks.append(HeldOutCheck(r, phase, profile, exp, why_none, band))
    return checks, skipped


@dataclass(frozen=True)
class CheckSummary:
    """Median |error| and band coverage of a set of held-out figures of one phase."""

    n: int  # figures with an expected value
    median_abs_error: float
    inside_band: int
    unpredicted: int


def summarize_checks(checks: Iterable[HeldOutCheck]) -> CheckSummary:
    checks = list(checks)
    errs = [abs(c.rel_error) for c in checks if c.expected is not None]
    return CheckSummary(len(errs), statistics.median(errs) if errs else math.nan,
                        sum(c.inside_band for c in checks), len(checks) - len(errs))


@dataclass(frozen=True)
class RepeatSpread:
    """How far published figures of the same question disagree among themselves: the floor under any fit's error.

    A "question" is one GPU, backend, model, weight type, test (pp or tg size, depth) and build era (or exact build
    number): every input a prediction has. Each figure of a question asked at least twice is predicted by the
    median of the *other* figures of that question, an oracle that no fit can beat with those inputs."""

    phase: Phase
    exact_build: bool
    single: int  # questions published once (no spread to measure)
    tolerance: float
    rows: tuple[ReferenceResult, ...]  # the repeated figures' rows: judge a fit on these against the oracle
    errors: tuple[float, ...]  # the oracle's |error| of each of ``rows``, in order
    log_errors: tuple[float, ...] = ()  # log(the others' median ÷ the figure) of each of ``rows``, in order
    publications: tuple[int, ...] = ()  # how many publications asked each of ``rows``' question, in order

    @property
    def across_publications(self) -> int:
        """Repeated figures whose question more than one publication asked: the only repeats that show how far two
        machines of one GPU name disagree (the others are one machine over builds or runs)."""
        return sum(n > 1 for n in self.publications)

    @property
    def repeated(self) -> int:
        """Figures whose question was published at least twice."""
        return len(self.errors)

    @property
    def median_abs_error(self) -> float:
        return statistics.median(self.errors) if self.errors else math.nan

    def band_width(self, coverage: float) -> float:
        """High ÷ low edge of the oracle's own band that holds ``coverage`` of the repeated figures, the central one
        (10–90 % at 80 %): a band around a prediction with only these inputs is about this wide at best (NaN
        without repeated figures)."""
        if len(self.log_errors) < 2:
            return math.nan
        cuts = statistics.quantiles(self.log_errors, n=100, method="inclusive")  # cuts[k - 1]: the k-th percentile
        tail = round(50 * (1 - coverage))
        return math.exp(cuts[100 - tail - 1] - cuts[tail - 1])

    @property
    def within(self) -> float:
        """Share of the repeated figures within ``tolerance`` of the others' median."""
        return sum(e <= self.tolerance for e in self.errors) / len(self.errors) if self.errors else math.nan


def repeat_spread(rows: Iterable[ReferenceResult], phase: Phase, *, exact_build: bool = False,
                  tolerance: float = 0.15) -> RepeatSpread:
    """The repeat spread of one phase's published figures (see :class:`RepeatSpread`)."""
    questions: dict[tuple[Any, ...], list[ReferenceResult]] = {}
    for r in rows:
        if not used(r, phase):
            continue
        size = r.n_prompt if phase == "prefill" else r.n_gen
        key = (r.gpu, r.backend, r.model.name, r.weight_type, size, r.n_depth, row_era(r),
               r.build_number if exact_build else None)
        questions.setdefault(key, []).append(r)
    repeated: list[ReferenceResult] = []
    ratios: list[float] = []
    publications: list[int] = []
    for asked in (a for a in questions.values() if len(a) > 1):
        tps = [measured_tps(r, phase) for r in asked]
        repeated += asked
        ratios += [statistics.median(tps[:i] + tps[i + 1:]) / x for i, x in enumerate(tps)]
        publications += [len({r.publication_key for r in asked})] * len(asked)
    single = sum(len(asked) == 1 for asked in questions.values())
    return RepeatSpread(phase, exact_build, single, tolerance, tuple(repeated), tuple(abs(q - 1) for q in ratios),
                        tuple(math.log(q) for q in ratios), tuple(publications))


#: The groups the check is reported by: name -> the group of a figure.
def form_factor(profile: HardwareProfile) -> str:
    """Where a GPU is found: "laptop GPU" (a laptop part), "laptop iGPU" (the integrated GPU of an AMD or Intel
    laptop processor: Radeon 780M-890M, 8060S, Arc 140V), "Apple silicon" (MacBooks and desktops alike), else
    "desktop or datacenter"."""
    if profile.kind == "laptop":
        return "laptop GPU"
    if profile.kind == "unified":
        return "Apple silicon" if profile.vendor.lower() == "apple" else "laptop iGPU"
    return "desktop or datacenter"


def on_a_laptop(profile: HardwareProfile) -> bool:
    """A laptop GPU or a laptop processor's integrated GPU: the users' own case."""
    return form_factor(profile) in ("laptop GPU", "laptop iGPU")


GROUPINGS: Mapping[str, Callable[[HeldOutCheck], str]] = {
    "all": lambda c: "all",
    "laptop": lambda c: "laptop GPUs and iGPUs" if on_a_laptop(c.profile) else "not a laptop part",
    "form factor": lambda c: form_factor(c.profile),
    "backend": lambda c: c.row.backend,
    "weight type": lambda c: c.row.weight_type,
    "build era": lambda c: row_era(c.row) or "unknown",
    "GPU kind": lambda c: c.profile.kind,
    "GPU": lambda c: c.profile.name,
    "source": lambda c: source_key(c.row.source_url),  # one source can dominate the rows: judge it apart
    "situation": lambda c: c.band.asked.text() if c.band else "no figure",  # how the figure and its band were made
}

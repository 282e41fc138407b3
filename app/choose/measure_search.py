"""``choose --measure``: close the loop on this machine. The chooser's files are measured best quality first, each
only where the prediction cannot rule it out, until one meets the speed floor: every better file was then
measured below it or ruled out, so the answer is decided and the rest is not run (early stop). Where a GPU device
holds part of the model (``-ngl`` below all layers, or ``-ncmoe`` experts in system RAM), the fewest layers
offloaded (or the most experts kept in system RAM) that still meet the floor are binary-searched between the fit's
bound and the other end.

:func:`search` is the pure part, over a ``measure(candidate) -> float`` callable. :class:`Measurer` is its I/O
shell: each measurement is one short llama-bench-like test (``-p 64 -n 32 -r 2`` after one warmup, flash attention
on, the file's KV type and placement) run through the sweep session in a worker process, its row stored in the
results store like any run's, and the figure kept in :mod:`app.choose.measure_cache`, so the same question asked
again is answered without a worker.

Decode is judged at the asked context, as the floor is. The test runs at that depth (``-d``) when filling it is
cheap (the expected prefill says under :data:`DEPTH_FILL_BUDGET_S`); otherwise from an empty cache, scaled to the
context by the ratio of the file's own figures there and empty (what the chooser does with any stored
measurement), and the output says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.choose.measure_cache import CachedMeasurement, MeasureCache, file_identity
from app.choose.verdicts import FileChoice, llama_server_command, quality_key
from app.model.gguf_http import is_url
from app.predict.answer import Figure
from app.results.fields import BUSY_OTHER_CPU_PCT, RowStatus, taken_while_busy
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.run.events import Event, Notice
from app.run.plan import TestSpec
from app.run.sweep_setup import prepare_sweep
from app.telemetry.host import usable_cpu_threads
from app.telemetry.llama_build import installed_gpu_backends, llama_build

#: The short test each measurement is (llama-bench's -p, -n, -r; one warmup runs first and is not counted).
MEASURE_N_PROMPT = 64
MEASURE_N_GEN = 32
MEASURE_REPETITIONS = 2
#: Filling the KV cache to the asked context before the test is "cheap" under this many seconds (expected).
DEPTH_FILL_BUDGET_S = 10.0
SWEEP_NAME = "choose-measure"


class MeasureFailed(Exception):
    """A measurement that gave no figure (the test failed, the worker died); ``str()`` is the one-line cause."""


class MeasuredWhileBusy(MeasureFailed):
    """A figure taken while other processes held the cores: it is no measure of this machine, except as a floor
    (contention only slows a test). ``decode_tps`` is the figure at the asked context."""

    def __init__(self, decode_tps: float, other_cpu_pct: float) -> None:
        self.decode_tps, self.other_cpu_pct = decode_tps, other_cpu_pct
        super().__init__(f"{decode_tps:,.1f} tok/s measured while other processes used {other_cpu_pct:.0f} % of a CPU "
                         f"(over {BUSY_OTHER_CPU_PCT:.0f} %): not this machine's figure, not cached; measure again "
                         "when it is quieter")


class MeasureCancelled(Exception):
    """The user stopped the search."""


# ------------------------------------------------------------------------------------------------ pure search
@dataclass(frozen=True)
class Candidate:
    """One placement of one file to measure: the chooser's verdict with the -ngl and -ncmoe to run it at."""

    choice: FileChoice = field(compare=False)
    source: str
    n_gpu_layers: int
    n_cpu_moe: int
    type_k: str

    @classmethod
    def of(cls, choice: FileChoice, n_gpu_layers: int | None = None, n_cpu_moe: int | None = None) -> Candidate:
        return cls(choice, choice.source, choice.n_gpu_layers if n_gpu_layers is None else n_gpu_layers,
                   choice.n_cpu_moe if n_cpu_moe is None else n_cpu_moe, choice.type_k)

    @property
    def label(self) -> str:
        """``"X.gguf at -ngl 12 -ncmoe 4 -ctk q8_0"``."""
        moe = f" -ncmoe {self.n_cpu_moe}" if self.n_cpu_moe else ""
        return f"{self.choice.filename} at -ngl {self.n_gpu_layers}{moe} -ctk {self.type_k}"


class StepKind(StrEnum):
    RULED_OUT = "ruled_out"  # the predicted band lies entirely below the floor: not run
    MEASURED = "measured"  # measured (now or from the cache)
    FAILED = "failed"  # the test gave no figure
    BUSY = "busy"  # measured below the floor while other processes held the cores: undecided, the search stops
    SKIPPED = "skipped"  # cannot be measured here (a URL)


@dataclass(frozen=True)
class Step:
    """What the search did with one candidate, in order."""

    candidate: Candidate
    kind: StepKind
    decode_tps: float | None = None  # measured, at the asked context
    meets_floor: bool = False
    why: str = ""

    def to_json_dict(self) -> dict[str, Any]:
        c = self.candidate
        return {"filename": c.choice.filename, "source": c.source, "n_gpu_layers": c.n_gpu_layers,
                "n_cpu_moe": c.n_cpu_moe, "type_k": c.type_k, "kind": str(self.kind), "decode_tps": self.decode_tps,
                "meets_floor": self.meets_floor, "why": self.why}


@dataclass(frozen=True)
class SearchResult:
    """The search's answer: the pick (the best-quality candidate measured at the floor or above) and every step."""

    min_decode_tps: float
    steps: tuple[Step, ...]
    pick: Candidate | None
    pick_decode_tps: float | None
    not_needed: tuple[FileChoice, ...]  # lower-quality files not measured: the answer was decided before them
    placement_note: str = ""  # why placements were not searched, when they were not
    cancelled: bool = False

    def count(self, kind: StepKind) -> int:
        return sum(s.kind == kind for s in self.steps)


Measure = Callable[[Candidate], float]


def quality_order(choices: Sequence[FileChoice], max_kld: float | None = None) -> list[FileChoice]:
    """The files that can be the answer (they fit; their KLD, where measured, within ``max_kld``), best quality
    first by the recommendation's own key (verdicts: by KLD when every such file has one, else bits per weight; a
    requantized copy after its source)."""
    ok = [c for c in choices if c.usable and (max_kld is None or c.quality is None or c.quality.mean_kld is None
                                              or c.quality.mean_kld <= max_kld)]
    by_kld = bool(ok) and all(c.quality is not None and c.quality.mean_kld is not None for c in ok)
    return sorted(ok, key=lambda c: quality_key(c, choices, by_kld))


def predicted_high(fig: Figure) -> float | None:
    """The most a figure's prediction allows: its band's top, or the value of a ceiling (a physical bound); None
    where neither is known (an expected figure without a band, a measurement)."""
    if fig.high is not None:
        return fig.high
    return fig.value if fig.kind == "ceiling" else None


def ruled_out_by_prediction(fig: Figure, min_decode_tps: float) -> bool:
    high = predicted_high(fig)
    return high is not None and high < min_decode_tps


def _band_text(fig: Figure) -> str:
    if fig.low is not None and fig.high is not None:
        return f"predicted {fig.low:,.1f}–{fig.high:,.1f} tok/s"
    return f"predicted at most {fig.value:,.1f} tok/s ({fig.kind})"


def placement_axis(choice: FileChoice, gpu_offload: bool) -> str:
    """What the search may move for a file that met the floor: "ngl" for a partial offload, "ncmoe" for experts in
    system RAM, "" for nothing (all on the device, or no GPU device)."""
    if not gpu_offload:
        return ""
    if choice.n_cpu_moe:
        return "ncmoe"
    return "ngl" if choice.status == "partial" and choice.n_gpu_layers > 0 else ""


def _measure_step(candidate: Candidate, measure: Measure, floor: float) -> Step:
    try:
        value = measure(candidate)
    except MeasuredWhileBusy as e:  # slowed by others: it can show the floor is met, never that it is not
        if e.decode_tps >= floor:
            return Step(candidate, StepKind.MEASURED, e.decode_tps, True,
                        f"meets the {floor:g} tok/s floor even while other processes used {e.other_cpu_pct:.0f} % "
                        "of a CPU")
        return Step(candidate, StepKind.BUSY, e.decode_tps, why=str(e))
    except MeasureFailed as e:
        return Step(candidate, StepKind.FAILED, why=str(e))
    meets = value >= floor
    why = (f"meets the {floor:g} tok/s floor" if meets
           else f"below the {floor:g} tok/s floor ({value:,.1f} measured)")
    return Step(candidate, StepKind.MEASURED, value, meets, why)


def _refine(first: Step, axis: str, measure: Measure, floor: float, on_step: Callable[[Step], None],
            steps: list[Step]) -> Step:
    """Binary-search the placement of a file that met the floor at its best placement (``first``): the fewest
    layers on the GPU (-ngl in [0, the most that fit]) or the most layers' experts in system RAM (-ncmoe in [the
    fewest that fit, all layers]) that still meet it. Speed is taken as monotone in each; a failed test counts as
    not meeting the floor. Each step is appended to ``steps`` as it is taken; returns the best."""
    c = first.candidate
    best = first

    def at(n: int) -> Step:
        cand = Candidate.of(c.choice, n_gpu_layers=n) if axis == "ngl" else Candidate.of(c.choice, n_cpu_moe=n)
        step = _measure_step(cand, measure, floor)
        steps.append(step)
        on_step(step)
        return step

    if axis == "ngl":
        lo, hi = 0, c.n_gpu_layers  # hi meets the floor
        while lo < hi:
            mid = (lo + hi) // 2
            s = at(mid)
            if s.meets_floor:
                hi, best = mid, s
            else:
                lo = mid + 1
    else:
        lo, hi = c.n_cpu_moe, c.choice.n_layer  # lo meets the floor
        while lo < hi:
            mid = (lo + hi + 1) // 2
            s = at(mid)
            if s.meets_floor:
                lo, best = mid, s
            else:
                hi = mid - 1
    return best


def search(choices: Sequence[FileChoice], min_decode_tps: float, measure: Measure, *, max_kld: float | None = None,
           gpu_offload: bool = False, measurable: Callable[[FileChoice], bool] | None = None,
           on_step: Callable[[Step], None] | None = None, placement_note: str = "") -> SearchResult:
    """Measure ``choices`` best quality first (:func:`quality_order`) until one meets ``min_decode_tps``.

    A file whose predicted band lies entirely below the floor is ruled out unmeasured; one ``measurable`` refuses
    (a URL) is skipped; a failed measurement rules that file out. The first that meets the floor is the pick and the
    search stops; with ``gpu_offload`` its placement is then searched (:func:`_refine`). A file measured below the
    floor while other processes held the cores stops it with no pick: that file is not shown to be too slow, so no
    file of lower quality may be chosen over it. A MeasureCancelled from ``measure`` ends the search with what it
    has (``cancelled``)."""
    report = on_step or (lambda _s: None)
    ordered = quality_order(choices, max_kld)
    steps: list[Step] = []
    pick: Step | None = None
    cancelled = False
    i = 0
    try:
        for i, c in enumerate(ordered):  # noqa: B007 - i says where the search stopped
            cand = Candidate.of(c)
            if measurable is not None and not measurable(c):
                step = Step(cand, StepKind.SKIPPED, why="not on this machine (a URL): download it to measure it")
            elif ruled_out_by_prediction(c.decode_tps, min_decode_tps):
                step = Step(cand, StepKind.RULED_OUT,
                            why=f"{_band_text(c.decode_tps)}, below the {min_decode_tps:g} floor")
            else:
                step = _measure_step(cand, measure, min_decode_tps)
            steps.append(step)
            report(step)
            if step.kind == StepKind.BUSY:
                break
            if step.meets_floor:
                pick = step
                axis = placement_axis(c, gpu_offload)
                if axis:
                    pick = _refine(step, axis, measure, min_decode_tps, report, steps)
                break
    except MeasureCancelled:
        cancelled = True
    rest = tuple(ordered[i + 1:]) if pick is not None else ()
    return SearchResult(min_decode_tps, tuple(steps), pick.candidate if pick else None,
                        pick.decode_tps if pick else None, rest, placement_note, cancelled)


def gpu_placement_note(profile_kind: str, gpu_backends: Sequence[str] | None) -> str:
    """Why -ngl/-ncmoe are not searched on this machine, or "" when they can be (a GPU and a GPU build)."""
    if profile_kind == "cpu":
        return "no GPU device here: -ngl is 0, there is no placement to search"
    if not gpu_backends:
        return ("the installed llama.cpp has no GPU backend: -ngl changes nothing here, there is no placement to "
                "search (packaging/install-gpu.sh)")
    return ""


def context_depth(choice: FileChoice, n_ctx: int) -> int:
    """The -d that puts a test's decode (``-p 64 -n 32``: at depth + 64 + 16 on average) at the depth the chooser's
    figure is for (``decode_depth``, within the context)."""
    return max(0, min(choice.decode_depth, n_ctx) - MEASURE_N_PROMPT - MEASURE_N_GEN // 2)


def empty_cache_note(target: int) -> str:
    return f"from an empty cache, not at depth {target:,}"


def measure_depth(choice: FileChoice, n_ctx: int, ttft_prompt_tokens: int,
                  budget_s: float = DEPTH_FILL_BUDGET_S) -> tuple[int, str]:
    """(-d for the test, why it is not the context's depth or ""): :func:`context_depth` when the expected time to
    fill the cache that far is within ``budget_s`` (from the file's expected or measured TTFT for
    ``ttft_prompt_tokens`` tokens); else 0, from an empty cache."""
    target = context_depth(choice, n_ctx)
    if target == 0:
        return 0, ""
    if choice.ttft_ms.kind == "ceiling":
        return 0, f"{empty_cache_note(target)}: the time to fill it is unknown (the TTFT here is only a ceiling)"
    fill_s = choice.ttft_ms.value / 1000.0 * target / max(ttft_prompt_tokens, 1)
    if fill_s > budget_s:
        return 0, f"{empty_cache_note(target)}: filling it first would take about {fill_s:,.0f} s"
    return target, ""


def depth_scale(choice: FileChoice) -> float:
    """The file's decode at the asked context over its decode from an empty cache (its own figures, both expected or
    both ceilings or both scaled from a measurement): what turns an empty-cache measurement into the context's."""
    empty = choice.decode_empty_tps
    if empty is None or not empty.value or not choice.decode_tps.value:
        return 1.0
    return min(choice.decode_tps.value / empty.value, 1.0)


# ------------------------------------------------------------------------------------------------ I/O shell
@dataclass(frozen=True)
class MeasuredTest:
    """One measurement the shell took (or found in the cache), as the output lists it."""

    candidate: Candidate
    decode_tps: float  # as measured, at n_depth
    n_depth: int
    at_context_tps: float  # judged against the floor
    from_cache: bool
    unstable: bool
    run_id: str
    measured_at: str
    depth_note: str  # "" when measured at the context's depth
    busy_other_cpu_pct: float | None = None  # other processes' CPU use during the test, where over the busy bound

    def to_json_dict(self) -> dict[str, Any]:
        c = self.candidate
        return {"filename": c.choice.filename, "source": c.source, "n_gpu_layers": c.n_gpu_layers,
                "n_cpu_moe": c.n_cpu_moe, "type_k": c.type_k, "n_prompt": MEASURE_N_PROMPT, "n_gen": MEASURE_N_GEN,
                "repetitions": MEASURE_REPETITIONS, "n_depth": self.n_depth, "decode_tps": round(self.decode_tps, 3),
                "decode_at_context_tps": round(self.at_context_tps, 3), "from_cache": self.from_cache,
                "unstable": self.unstable, "run_id": self.run_id, "measured_at": self.measured_at,
                "depth_note": self.depth_note, "busy_other_cpu_pct": self.busy_other_cpu_pct}


def spec_for(c: Candidate, n_depth: int, n_threads: int = 0) -> TestSpec:
    """The test one measurement runs: llama-bench's ``-p 64 -n 32 -r 2 -d N -ngl … -ncmoe … -ctk T -ctv T -fa 1``."""
    return TestSpec(model_path=c.source, n_prompt=MEASURE_N_PROMPT, n_gen=MEASURE_N_GEN, n_depth=n_depth,
                    n_gpu_layers=c.n_gpu_layers, n_cpu_moe=c.n_cpu_moe, type_k=c.type_k, type_v=c.type_k,
                    flash_attn=1, n_threads=n_threads, repetitions=MEASURE_REPETITIONS)


def measurement_key(test: TestSpec, machine: dict[str, Any], build: str) -> dict[str, Any]:
    """The cache key of one test: the model file's identity, the settings, the hardware and the llama.cpp build.
    OSError when the model file cannot be read."""
    return {
        "model": file_identity(test.model_path),
        "settings": {"n_prompt": test.n_prompt, "n_gen": test.n_gen, "n_depth": test.n_depth,
                     "n_gpu_layers": test.n_gpu_layers, "n_cpu_moe": test.n_cpu_moe, "type_k": test.type_k,
                     "type_v": test.type_v, "flash_attn": test.flash_attn, "n_threads": test.n_threads,
                     "repetitions": test.repetitions, "repack": test.repack},
        "hardware": {"cpu_model": str(machine.get("cpu_model") or ""), "gpu_info": str(machine.get("gpu_info") or ""),
                     "usable_threads": usable_cpu_threads()},
        "build": build,
    }


RunTest = Callable[[TestSpec], ResultRow]


class Measurer:
    """``measure(candidate) -> float`` for :func:`search`, on this machine: the cache first, else one test in a worker
    (rows stored in the results store at ``store_path``, None: the default one). ``progress`` gets one line per
    test; ``on_event`` the session's events. :meth:`cancel` is safe from any thread and kills the worker."""

    def __init__(self, n_ctx: int, machine: dict[str, Any], *, ttft_prompt_tokens: int,
                 cache: MeasureCache | None = None, store_path: str | None = None,
                 progress: Callable[[str], None] | None = None, on_event: Callable[[Event], None] | None = None,
                 run_test: RunTest | None = None, command: str = "") -> None:
        self.n_ctx = n_ctx
        self.machine = machine
        self.ttft_prompt_tokens = ttft_prompt_tokens
        self.cache = cache if cache is not None else MeasureCache()
        self.store_path = store_path
        self.progress = progress or (lambda _line: None)
        self.on_event = on_event
        self.command = command
        self.build = llama_build()
        self.tests: list[MeasuredTest] = []
        self._run_test = run_test or self._run_in_worker
        self._cancel = threading.Event()
        self._session: Any = None

    def cancel(self) -> None:
        self._cancel.set()
        session = self._session
        if session is not None:
            session.cancel(grace_s=0.0)

    def __call__(self, c: Candidate) -> float:
        if self._cancel.is_set():
            raise MeasureCancelled()
        target = context_depth(c.choice, self.n_ctx)
        depth, why_empty = measure_depth(c.choice, self.n_ctx, self.ttft_prompt_tokens)
        try:
            key_at = {d: measurement_key(spec_for(c, d), self.machine, self.build) for d in {target, 0}}
        except OSError as e:
            raise MeasureFailed(f"{c.source}: cannot read the file ({e.strerror or e})") from None
        # the same question measured before: at the context's depth best, else from an empty cache (scaled)
        found, from_cache, depth_note = self.cache.get(key_at[target]), True, ""
        if found is None and target and (found := self.cache.get(key_at[0])) is not None:
            depth_note = empty_cache_note(target)
        if found is None:
            test = spec_for(c, depth)
            self.progress(f"measuring {c.label} (-p {test.n_prompt} -n {test.n_gen} -r {test.repetitions} "
                          f"-d {test.n_depth}) …")
            found, from_cache, depth_note = self._measure(test, key_at[depth]), False, why_empty
        scale = depth_scale(c.choice) if depth_note else 1.0
        m = MeasuredTest(c, found.decode_tps, found.n_depth, found.decode_tps * scale, from_cache, found.unstable,
                         found.run_id, found.measured_at, depth_note, found.busy_other_cpu_pct)
        self.tests.append(m)
        self.progress(self.result_line(m))
        if m.busy_other_cpu_pct is not None:
            raise MeasuredWhileBusy(m.at_context_tps, m.busy_other_cpu_pct)
        return m.at_context_tps

    def _measure(self, test: TestSpec, key: dict[str, Any]) -> CachedMeasurement:
        row = self._run_test(test)
        if self._cancel.is_set():
            raise MeasureCancelled()
        if row.status != RowStatus.OK or not row.decode_tps:
            raise MeasureFailed(row.error or "the test gave no decode figure")
        busy = taken_while_busy(row) is True
        m = CachedMeasurement(
            decode_tps=float(row.decode_tps), n_depth=test.n_depth,
            prefill_tps=float(row.prefill_tps) if row.prefill_tps else None,
            ttft_ms=float(row.ttft_ms) if row.ttft_ms else None, unstable=row.unstable == 1 or busy,
            run_id=row.run_id or "", build_commit=row.build_commit or "",
            measured_at=datetime.now().isoformat(timespec="seconds"), model_filename=row.model_filename or "",
            busy_other_cpu_pct=float(row.host_other_cpu_pct) if busy else None)  # type: ignore[arg-type]
        if busy:  # never the cached answer to this question: the next search measures it again
            self.cache.release()
            return m
        try:
            self.cache.put(key, m)
        except OSError as e:
            self.progress(f"note: the measurement cache was not written ({self.cache.path}: {e.strerror or e})")
        return m

    def result_line(self, m: MeasuredTest) -> str:
        """``"  → 41.2 tok/s"`` for a test run now; ``"from cache: X at -ngl 0 -ctk f16: 41.2 tok/s (…)"``."""
        figure = f"{m.decode_tps:,.1f} tok/s at depth {m.n_depth:,}"
        if m.depth_note:
            figure += f"; {m.at_context_tps:,.1f} at {self.n_ctx:,} tokens by the ratio of its predicted figures"
        figure += " ⚠ unstable" if m.unstable else ""
        if m.busy_other_cpu_pct is not None:
            figure += f": other processes used {m.busy_other_cpu_pct:.0f} % of a CPU during it (not cached)"
        if not m.from_cache:
            return f"  → {figure}"
        when = f"measured {m.measured_at}" + (f", run {m.run_id}" if m.run_id else "")
        return f"from cache: {m.candidate.label}: {figure} ({when})"

    def _run_in_worker(self, test: TestSpec) -> ResultRow:
        """One test through the sweep session (a worker process), its row stored as a normal run's."""
        with ResultStore.recover(self.store_path) as store:
            setup = prepare_sweep([test], store)
            session = setup.session(store, sweep_name=SWEEP_NAME, command=self.command, token_ticks=False)
            self._session = session
            try:
                if self._cancel.is_set():
                    raise MeasureCancelled()
                outcome = session.run(self.on_event)
            finally:
                self._session = None
        if outcome.status == "cancelled" or self._cancel.is_set():
            raise MeasureCancelled()
        if not outcome.rows:
            raise MeasureFailed("; ".join(outcome.errors) or "the worker gave no row")
        return outcome.rows[0]

    def counts_text(self, result: SearchResult) -> str:
        """``"measured 2 tests, 1 from cache, 3 ruled out by prediction"`` (and what was skipped or not needed)."""
        now = sum(not t.from_cache for t in self.tests)
        cached = len(self.tests) - now
        parts = [f"measured {now} test{'s' * (now != 1)}", f"{cached} from cache",
                 f"{result.count(StepKind.RULED_OUT)} ruled out by prediction"]
        if result.count(StepKind.FAILED):
            parts.append(f"{result.count(StepKind.FAILED)} failed")
        if result.count(StepKind.BUSY):
            parts.append(f"{result.count(StepKind.BUSY)} taken while other processes held the cores")
        if result.count(StepKind.SKIPPED):
            parts.append(f"{result.count(StepKind.SKIPPED)} skipped (URLs)")
        if result.not_needed:
            parts.append(f"{len(result.not_needed)} lower-quality not needed")
        return ", ".join(parts)


def notice(line: str) -> Notice:
    """A progress line as an event, for listeners that read events only (the window's progress dialog)."""
    return Notice(t_ns=0, message=line, level="info")


# ------------------------------------------------------------------------------------------------ the answer
@dataclass(frozen=True)
class MeasuredAnswer:
    """The search, the tests it took and the answer in words, with the command of the pick."""

    result: SearchResult
    tests: tuple[MeasuredTest, ...]
    sentence: str
    command: str
    counts: str
    n_ctx: int

    def to_json_dict(self) -> dict[str, Any]:
        r = self.result
        pick = r.pick
        return {
            "min_decode_tps": r.min_decode_tps, "n_ctx": self.n_ctx,
            "settings": {"n_prompt": MEASURE_N_PROMPT, "n_gen": MEASURE_N_GEN, "repetitions": MEASURE_REPETITIONS},
            "pick": None if pick is None else {
                "filename": pick.choice.filename, "source": pick.source, "n_gpu_layers": pick.n_gpu_layers,
                "n_cpu_moe": pick.n_cpu_moe, "type_k": pick.type_k, "decode_tps": r.pick_decode_tps},
            "sentence": self.sentence, "command": self.command, "counts": self.counts,
            "steps": [s.to_json_dict() for s in r.steps], "measurements": [t.to_json_dict() for t in self.tests],
            "not_needed": [c.filename for c in r.not_needed], "placement_note": r.placement_note,
            "cancelled": r.cancelled,
        }


def answer(result: SearchResult, tests: Sequence[MeasuredTest], n_ctx: int, counts: str) -> MeasuredAnswer:
    """The measured pick in one sentence with its llama-server command, or why there is none."""
    floor = result.min_decode_tps
    if result.pick is not None:
        p = result.pick
        choice = replace(p.choice, n_gpu_layers=p.n_gpu_layers, n_cpu_moe=p.n_cpu_moe)
        better = [s for s in result.steps if s.candidate.source != p.source]
        lost = "; ".join(f"{s.candidate.choice.filename}: {s.why}" for s in better if s.kind != StepKind.SKIPPED)
        skipped = ", ".join(s.candidate.choice.filename for s in better if s.kind == StepKind.SKIPPED)
        sentence = (f"Measured here: run {p.choice.filename} ({p.choice.file_type}) at -ngl {p.n_gpu_layers}"
                    + (f" -ncmoe {p.n_cpu_moe}" if p.n_cpu_moe else "")
                    + f" -ctk {p.type_k}: {result.pick_decode_tps:,.1f} tok/s at {n_ctx:,} tokens, at or above the "
                    f"{floor:g} tok/s floor. "
                    + (f"Better-quality files lost: {lost}." if lost
                       else "It has the best quality of the files that fit.")
                    + (f" Not measured (not on this machine): {skipped}." if skipped else ""))
        return MeasuredAnswer(result, tuple(tests), sentence, llama_server_command(choice, n_ctx), counts, n_ctx)
    busy = next((s for s in result.steps if s.kind == StepKind.BUSY), None)
    if result.cancelled:
        sentence = "Cancelled: no answer yet (what was measured is kept in the cache and the results store)."
    elif busy is not None:
        sentence = (f"No answer yet: {busy.candidate.label} was measured while other processes held the cores "
                    f"({busy.why}).")
    elif not result.steps:
        sentence = "Nothing to measure: no file fits here at that context within the KLD limit."
    else:
        measured = [s for s in result.steps if s.decode_tps is not None]
        best = max(measured, key=lambda s: s.decode_tps or 0.0) if measured else None
        sentence = (f"No file meets the {floor:g} tok/s floor as measured here"
                    + (f": the fastest measured is {best.candidate.label} at {best.decode_tps:,.1f} tok/s"
                       if best is not None else "") + ".")
    return MeasuredAnswer(result, tuple(tests), sentence, "", counts, n_ctx)


def measure_toward_floor(choices: Sequence[FileChoice], min_decode_tps: float, measurer: Measurer, *,
                         max_kld: float | None = None, profile_kind: str = "cpu",
                         on_step: Callable[[Step], None] | None = None) -> MeasuredAnswer:
    """The search with ``measurer`` on this machine (a GPU placement searched only with a GPU device and a GPU
    build), and its answer."""
    if measurer.cache.problem:
        measurer.progress(f"note: {measurer.cache.problem}")
    backends = installed_gpu_backends()
    note = gpu_placement_note(profile_kind, backends)
    if note:
        measurer.progress(f"note: {note}")
    result = search(choices, min_decode_tps, measurer, max_kld=max_kld, gpu_offload=not note,
                    measurable=lambda c: not is_url(c.source), on_step=on_step, placement_note=note)
    return answer(result, measurer.tests, measurer.n_ctx, measurer.counts_text(result))


def step_line(step: Step) -> str:
    """A search step as a progress line: what was ruled out, skipped or failed, and whether a measurement meets the
    floor (the measurement itself is the Measurer's line)."""
    c = step.candidate
    if step.kind == StepKind.RULED_OUT:
        return f"ruled out: {c.choice.filename} ({step.why})"
    if step.kind == StepKind.SKIPPED:
        return f"skipped: {c.choice.filename} ({step.why})"
    if step.kind == StepKind.FAILED:
        return f"failed: {c.label}: {step.why}"
    if step.kind == StepKind.BUSY:
        return f"undecided: {c.label}: {step.why}"
    return f"  {c.choice.filename}: {step.decode_tps:,.1f} tok/s at the context, {step.why}"

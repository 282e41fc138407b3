"""``choose``: gather the files (paths, folders, URLs), the hardware, this machine's measurements and the measured
quality, and rank them with :mod:`app.choose.verdicts`. Shared by ``gguf-bench choose`` and the window's chooser."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.choose.verdicts import (
    DEFAULT_N_GEN,
    DEFAULT_PREFER,
    FileChoice,
    Quality,
    Recommendation,
    display_name,
    evaluate_file,
    recommend,
)
from app.model.gguf_facts import GGUFFileError
from app.model.gguf_http import DEFAULT_DEADLINE_S, DEFAULT_MAX_HEADER_BYTES, RemoteOptions, is_url, read_facts
from app.model.library import scan_folder
from app.model.lineage import KEY_REQUANTIZED_FROM, header_strings, requantized_from
from app.predict.answer import Machine, with_power_state
from app.predict.expected_quality import PREFERENCES
from app.predict.profiles import HardwareProfile, ProfileError, with_given_ram
from app.predict.questions import DEFAULT_MARGIN_BYTES, DEFAULT_N_CTX, Question
from app.results.quality_store import quality_for
from app.results.store import ResultStore, StoreError
from app.telemetry.machine import MachineScan, ProbeMode, scan_machine

THIS_MACHINE = ("", "this", "local", "cpu")
#: ``choose --json``'s document version: 2 added schema_version, each file's expected quality, device and host bytes
#: and the margin, and the pick's device and host bytes (every earlier key kept)
CHOOSE_SCHEMA_VERSION = 2


#: choose --ram's range (GiB): from a small board to more than any workstation holds
RAM_GIB_RANGE = (0.5, 65536.0)
#: choose --margin's range (MiB): none, up to more than any GPU holds
MARGIN_MIB_RANGE = (0.0, 1_048_576.0)
DEFAULT_MARGIN_MIB = DEFAULT_MARGIN_BYTES / 2**20


@dataclass(frozen=True)
class ChooseRequest:
    """What ``choose`` is asked: files/folders/URLs, hardware (None: this machine), context, floors."""

    sources: tuple[str, ...]
    hw: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    min_decode_tps: float | None = None
    max_kld: float | None = None
    n_prompt: int | None = None
    n_gen: int = DEFAULT_N_GEN
    store_path: str | None = None
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    url_deadline_s: float = DEFAULT_DEADLINE_S  # the whole read of one URL (--url-timeout)
    ram_gib: float | None = None  # system RAM around the GPU (--ram); None: this machine's, or assumed
    power_limit_w: float | None = None  # the GPU's power limit (--power-limit); None: the part's top, or NVML's
    on_battery: bool = False  # a laptop on battery (--on-battery)
    prefer: str = DEFAULT_PREFER  # quality | balanced | speed (app.choose.expected_quality)
    margin_mib: float = DEFAULT_MARGIN_MIB  # GPU memory every placement leaves free (--margin)

    def question(self) -> Question:
        """What every file is asked: this context and request, the margin kept free."""
        return Question(n_ctx=self.n_ctx, n_prompt=self.n_prompt, n_gen=self.n_gen,
                        margin_bytes=int(self.margin_mib * 2**20))


@dataclass(frozen=True)
class ChooseReport:
    """Every file's verdict, the files that could not be read, and the recommendation."""

    profile: HardwareProfile
    this_machine: bool
    n_ctx: int
    choices: list[FileChoice]
    errors: list[tuple[str, str]]  # (source, one-line cause)
    recommendation: Recommendation
    notes: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "schema_version": CHOOSE_SCHEMA_VERSION, "profile": self.profile.name,
            "this_machine": self.this_machine, "n_ctx": self.n_ctx,
            "vram_bytes": self.profile.vram_bytes, "files": [c.to_json_dict() for c in self.choices],
            "errors": [{"source": s, "error": e} for s, e in self.errors],
            "recommendation": self.recommendation.to_json_dict(), "notes": list(self.notes),
        }


def expand_sources(sources: Sequence[str]) -> list[str]:
    """Files as given, every GGUF under a folder (later split shards skipped), URLs as they are."""
    out: list[str] = []
    for s in sources:
        if not is_url(s) and Path(s).expanduser().is_dir():
            found = [e.path for e in scan_folder(s)]
            if not found:
                raise ValueError(f"{s}: no .gguf files in this folder")
            out += found
        else:
            out.append(s if is_url(s) else os.path.expanduser(s))
    return list(dict.fromkeys(out))


def _hardware(hw: str | None, machine: Machine) -> HardwareProfile:
    """The profile asked, by the one rule (:meth:`Machine.profile_for`): this machine's GPU (else its CPU) for none,
    "this" or "local"; its CPU for "cpu"; else the profile named (a GPU that is not this machine's is answered as
    such: nothing of this machine applies to it)."""
    return machine.profile_for(hw)


def _quality(store: ResultStore | None, source: str, notes: list[str]) -> Quality | None:
    """The file's measured quality; none where the reference it was measured against was itself requantized (a
    KLD against a copy of a quantized file says nothing of the loss against the original model)."""
    if store is None:
        return None
    row = quality_for(store, source)
    if row is not None and row.is_reference:
        # the reference against itself: 0 by definition (the table says so; the sentence says it is the reference)
        return Quality(mean_kld=float(row.mean_kld) if row.mean_kld is not None else 0.0, ppl=row.ppl,
                       same_top_rate=row.same_top_rate, reference=row.reference_filename or "", is_reference=True)
    if row is None or row.mean_kld is None:
        return None
    ref_path = row.reference_path or ""
    ref_origin = header_strings(ref_path).get(KEY_REQUANTIZED_FROM, "") if ref_path and Path(ref_path).exists() else ""
    if ref_origin:
        notes.append(f"{display_name(source)}: its KLD was measured against {Path(ref_path).name}, itself requantized "
                     f"from {ref_origin}: not used (measure quality again with a reference that was not requantized)")
        return None
    return Quality(mean_kld=float(row.mean_kld), ppl=row.ppl, same_top_rate=row.same_top_rate,
                   reference=row.reference_filename or "", is_reference=bool(row.is_reference))


def _open_store(path: str | None, notes: list[str]) -> ResultStore | None:
    try:
        return ResultStore.open_read_only(path)
    except (StoreError, OSError) as e:
        notes.append(f"results store not read ({e})")
        return None


class ChooseCancelled(Exception):
    """The user stopped a choose while it read its files."""


def context_problem(n_ctx: int, n_prompt: int | None, n_gen: int) -> str:
    """Why a prompt of ``n_prompt`` tokens (None: the context less ``n_gen``) and ``n_gen`` generated cannot be held
    by a context of ``n_ctx`` tokens, in one line; "" when they fit."""
    if n_ctx < 1:
        return f"--ctx must be at least 1 (got {n_ctx})"
    if n_prompt is None and n_gen >= n_ctx:
        return (f"-n {n_gen:,} generated tokens and a prompt of at least 1 do not fit --ctx {n_ctx:,} (raise --ctx or "
                "lower -n)")
    if n_prompt is not None and n_prompt + n_gen > n_ctx:
        return (f"-p {n_prompt:,} and -n {n_gen:,} make {n_prompt + n_gen:,} tokens, more than --ctx {n_ctx:,} holds "
                "(raise --ctx, or lower -p or -n)")
    return ""


def run_choose(req: ChooseRequest, *, scan: MachineScan | None = None, machine: Machine | None = None,
               progress: Callable[[str], None] | None = None,
               cancelled: Callable[[], bool] | None = None) -> ChooseReport:
    """Evaluate every file of ``req`` and recommend one. Raises ProfileError for an unknown --hw, ValueError for
    an empty folder or a bad context, ChooseCancelled once ``cancelled()`` turns true (checked before each file);
    ``progress`` hears "reading 3 of 200: name". Unreadable files are listed in ``errors``, not raised.
    ``machine``: this
    machine as already loaded (else it is loaded here; for a GPU named by --hw nothing of this machine is)."""
    problem = context_problem(req.n_ctx, req.n_prompt, req.n_gen)
    if problem:
        raise ValueError(problem)
    if req.prefer not in PREFERENCES:
        raise ValueError(f"--prefer must be one of {', '.join(PREFERENCES)} (got {req.prefer!r})")
    this_asked = (req.hw or "").strip().lower() in THIS_MACHINE
    if machine is None:
        if scan is None and not this_asked:  # a GPU named by --hw: nothing of this machine is scanned or probed
            machine = Machine.elsewhere()
        else:
            machine = Machine.load(scan if scan is not None else scan_machine(ProbeMode.RUN),
                                   store_path=req.store_path)
    profile = _hardware(req.hw, machine)
    profile = with_given_ram(profile, req.ram_gib)
    if req.power_limit_w is not None or req.on_battery:  # else as it is (this machine's: as NVML and psutil read it)
        profile = with_power_state(profile, req.power_limit_w, req.on_battery or profile.on_battery)
    this = machine.is_this(profile)
    notes = [f"GPU profile chosen: {profile.name}" + ("" if this else "; nothing of this machine applies to it")
             ] if not this_asked else []
    sources = expand_sources(req.sources)
    store = _open_store(req.store_path, notes)
    opts = RemoteOptions(max_header_bytes=req.max_header_bytes, deadline_s=req.url_deadline_s)
    try:
        choices, errors = [], []
        for i, source in enumerate(sources, 1):
            if cancelled is not None and cancelled():
                raise ChooseCancelled(f"stopped after {i - 1} of {len(sources)} files")
            if progress:
                progress(f"reading {i} of {len(sources)}: {display_name(source)}")
            try:
                facts = read_facts(source, opts)
            except GGUFFileError as e:
                errors.append((source, e.cause))
                continue
            choices.append(evaluate_file(
                source, facts, profile, req.n_ctx, machine=machine, quality=_quality(store, source, notes),
                requantized_from=requantized_from(facts), min_decode_tps=req.min_decode_tps, prefer=req.prefer,
                question=req.question()))
    finally:
        if store is not None:
            store.close()
    rec = recommend(choices, profile.name, req.n_ctx, req.min_decode_tps, req.max_kld, req.prefer)
    return ChooseReport(profile, this, req.n_ctx, choices, errors, rec, notes)


__all__ = ["ChooseCancelled", "ChooseReport", "ChooseRequest", "ProfileError", "context_problem", "expand_sources",
           "run_choose"]

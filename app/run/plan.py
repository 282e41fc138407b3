"""Sweep plans: lists of settings crossed into tests, ordered so each model loads as few times as possible."""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Self

from app.bounded_read import TomlFileError, read_toml
from app.paths import SWEEP_PRESETS_DIR, absolute_path
from app.run.params import (
    DEVICES_AUTO,
    DEVICES_NONE,
    LIST_PARAMS,
    MAX_TESTS,
    MAX_TOKENS,
    PARAM,
    PARAMS,
    REPACK_AUTO,
    THREADS_PER_CPU,
    PlanError,
    override_pairs,
    parse_flash_attn,
    parse_list,
    parse_n_cpu_moe,
    parse_repack,
)
from app.shown_text import quoted
from app.telemetry.host import usable_cpu_threads
from app.telemetry.llama_build import installed_gpu_backends

__all__ = ["PlanError", "RemoteTest", "SpecError", "SweepSpec", "TestSpec", "count_loads", "load_sweep_preset",
           "order_tests", "parse_list", "preset_names", "sweep_path", "typed_fields"]


class SpecError(ValueError):
    """A table that is not a test: str() is one line naming the field and what it holds."""


def typed_fields(cls: type[Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """The values ``data`` gives for the fields of dataclass ``cls``, each of its annotated type: ``int``, ``float``
    (a whole number too), ``str``, ``bool``, and ``| None``; the fields in ``cls.OLD_BOOLS`` may be booleans. Keys
    that are not fields (an older or newer build's, or derived ones a table writes for readers) are left out; a
    field with no default must be given. SpecError, one line naming the field, if not."""
    if not isinstance(data, Mapping):
        raise SpecError(f"a test is {type(data).__name__}, not a table")
    old_bools: frozenset[str] = getattr(cls, "OLD_BOOLS", frozenset())
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise SpecError(f"a test has no {f.name}")
            continue
        value, kinds = data[f.name], {k.strip() for k in str(f.type).split("|")}
        if value is None:
            ok = "None" in kinds
        elif isinstance(value, bool):
            ok = "bool" in kinds or f.name in old_bools
        else:
            ok = (("int" in kinds and isinstance(value, int)) or ("float" in kinds and isinstance(value, int | float))
                  or ("str" in kinds and isinstance(value, str)))
        if not ok:
            shown = repr(value)[:40] if not isinstance(value, dict | list) else type(value).__name__
            raise SpecError(f"a test's {f.name} is {type(value).__name__} {shown}, not {f.type}")
        out[f.name] = value
    return out


def _one(name: str) -> Any:
    return PARAM[name].first_default


def _many(name: str) -> Any:
    default = PARAM[name].default
    return field(default_factory=lambda: list(default))


@dataclass(frozen=True)
class TestSpec:
    """One test: a model, its load settings, its context settings and its token counts (defaults: params.PARAMS)."""

    __test__ = False  # not a pytest class

    model_path: str
    n_prompt: int = _one("n_prompt")
    n_gen: int = _one("n_gen")
    n_depth: int = _one("n_depth")
    n_gpu_layers: int = _one("n_gpu_layers")
    n_cpu_moe: int = _one("n_cpu_moe")  # layers whose experts stay in host memory; -1 all, -2 half (params.NCMOE_*)
    type_k: str = _one("type_k")
    type_v: str = _one("type_v")
    flash_attn: int = _one("flash_attn")  # -1 auto, 0 off, 1 on (llama-bench's column); old dicts hold bools
    n_threads: int = _one("n_threads")
    n_batch: int = _one("n_batch")
    n_ubatch: int = _one("n_ubatch")
    n_parallel: int = _one("n_parallel")
    no_op_offload: int = _one("no_op_offload")  # 1: llama.cpp's op_offload off (llama-bench -nopo)
    device_mem_limit_mib: int = _one("device_mem_limit_mib")  # 0: no limit
    repack: int = _one("repack")  # 1/0: llama.cpp's use_extra_bufts (llama-bench --repack); -1: not yet resolved
    split_mode: str = _one("split_mode")  # none|layer|row|tensor
    main_gpu: int = _one("main_gpu")
    tensor_split: str = _one("tensor_split")  # llama-bench's column text: "3.00/1.00"; "0.00": llama.cpp's default
    devices: str = _one("devices")  # auto, none or "Vulkan0/Vulkan1"
    tensor_buft_overrides: str = _one("tensor_buft_overrides")  # "PATTERN=BUFT;..." or none (llama-bench's text)
    no_host: int = _one("no_host")
    no_kv_offload: int = _one("no_kv_offload")  # 1: llama.cpp's offload_kqv off (llama-bench -nkvo)
    repetitions: int = _one("repetitions")
    prompt_file: str | None = _one("prompt_file")

    #: Fields that older stored tests hold as booleans (flash attention was on/off before auto).
    OLD_BOOLS: ClassVar[frozenset[str]] = frozenset({"flash_attn"})

    def __post_init__(self) -> None:
        for name, parse in (("flash_attn", parse_flash_attn), ("repack", parse_repack), ("n_cpu_moe", parse_n_cpu_moe)):
            try:
                object.__setattr__(self, name, parse(getattr(self, name)))
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None

    def with_repack_default(self, default_repack: int) -> TestSpec:
        """This test with ``auto`` repacking given the machine's default (0 or 1); other tests unchanged."""
        return replace(self, repack=default_repack) if self.repack == REPACK_AUTO else self

    def load_key(self) -> tuple[Any, ...]:
        """Tests with equal load keys share one loaded model (llama-bench's equal_mparams)."""
        return (self.model_path, *(getattr(self, p.name) for p in _LOAD))

    def context_key(self) -> tuple[Any, ...]:
        return (*(getattr(self, p.name) for p in _CONTEXT), self.n_ctx)

    @property
    def n_ctx(self) -> int:
        """Context large enough for depth + prompt + generated tokens for every sequence, rounded to 256."""
        per_seq = self.n_depth + self.n_prompt + self.n_gen + 1
        return -(-per_seq * self.n_parallel // 256) * 256

    def short_name(self) -> str:
        """``model p128 n32 d0 ngl99 f16 fa auto x4``: the file's name, then the tags of the parameter table
        (params.PARAMS: some shown only where they differ from the default). The window's and the CLI's."""
        name = os.path.basename(self.model_path)
        if name.lower().endswith(".gguf"):
            name = name[:-5]
        tags = (p.name_part(getattr(self, p.name)) for p in PARAMS)
        return " ".join([name, *(t for t in tags if t is not None)])

    def to_dict(self) -> dict[str, Any]:
        """The test as a JSON-ready table: how events, job files and stored logs carry it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Decode a test where it enters (an event, a job file, a stored log of any earlier version): see
        :func:`typed_fields`; flash attention, repacking and the CPU MoE count also as their words. SpecError, one
        line naming the field, if a value is not of its field's type."""
        values = typed_fields(cls, d)
        try:
            return cls(**values)
        except ValueError as e:
            raise SpecError(f"a test's {e}") from None


@dataclass(frozen=True)
class RemoteTest:
    """One test of a remote server (``gguf-bench run --url``, app.remote builds them): ``n_requests`` prompts of
    ``n_prompt`` tokens after ``n_depth`` tokens of context, ``concurrency`` in flight at most; with
    ``prefix_cache`` each request's context is loaded first, alone. Here beside TestSpec because the events carry
    both (app.run is below app.remote)."""

    __test__ = False  # not a pytest class

    endpoint: str  # the display URL (no credentials)
    served_model: str
    n_prompt: int
    n_gen: int
    concurrency: int
    n_requests: int
    rate_rps: float | None = None
    n_depth: int = 0
    prefix_cache: bool = False

    OLD_BOOLS: ClassVar[frozenset[str]] = frozenset()

    @property
    def model_path(self) -> str:
        """What names and plots read as the model: the served model."""
        return self.served_model

    @property
    def n_parallel(self) -> int:
        """Sequences in flight: the concurrency (rows hold it in ``n_parallel``)."""
        return self.concurrency

    @property
    def n_ctx(self) -> int:
        """Context that holds every request in flight: depth + prompt + generated + 1 per request, × concurrency,
        rounded up to 256 (as a local test's)."""
        return -(-(self.n_depth + self.n_prompt + self.n_gen + 1) * self.concurrency // 256) * 256

    def short_name(self) -> str:
        """``model p128 n32 c4`` (c: concurrency), and the arrival rate where one is set: ``... 2/s``."""
        rate = f" {self.rate_rps:g}/s" if self.rate_rps else ""
        return f"{self.served_model} p{self.n_prompt} n{self.n_gen} c{self.concurrency}{rate}"

    def to_dict(self) -> dict[str, Any]:
        """As stored in the run's test list and sent in TestStarted, with ``model_path`` and ``n_parallel`` for
        readers of earlier versions (:meth:`from_dict` leaves them out: they are derived)."""
        return {**asdict(self), "model_path": self.served_model, "n_parallel": self.concurrency}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Decode a remote test where it enters (see :func:`typed_fields`); SpecError, one line, if not one."""
        return cls(**typed_fields(cls, d))


_LOAD = tuple(p for p in LIST_PARAMS if p.scope == "load")
_CONTEXT = tuple(p for p in LIST_PARAMS if p.scope == "context")
#: The crossing order: loads outermost (fewest reloads), then contexts, then what a run varies
_RUN_ORDER = ("n_depth", "n_prompt", "n_gen")
_CROSS = tuple(p.name for p in _CONTEXT) + _RUN_ORDER
assert {p.name for p in LIST_PARAMS} == {p.name for p in _LOAD} | set(_CROSS), "a list parameter is not crossed"


@dataclass
class SweepSpec:
    """Lists of settings; every combination becomes a test (defaults and limits: params.PARAMS)."""

    models: list[str] = field(default_factory=list)
    n_prompt: list[int] = _many("n_prompt")
    n_gen: list[int] = _many("n_gen")
    n_depth: list[int] = _many("n_depth")
    n_gpu_layers: list[int] = _many("n_gpu_layers")
    type_k: list[str] = _many("type_k")
    type_v: list[str] = _many("type_v")  # empty: same as K
    flash_attn: list[int] = _many("flash_attn")
    n_threads: list[int] = _many("n_threads")
    n_batch: list[int] = _many("n_batch")
    n_ubatch: list[int] = _many("n_ubatch")
    n_parallel: list[int] = _many("n_parallel")
    no_op_offload: list[int] = _many("no_op_offload")
    device_mem_limit_mib: list[int] = _many("device_mem_limit_mib")
    repack: list[int] = _many("repack")
    n_cpu_moe: list[int] = _many("n_cpu_moe")
    split_mode: list[str] = _many("split_mode")
    main_gpu: list[int] = _many("main_gpu")
    tensor_split: list[str] = _many("tensor_split")
    devices: list[str] = _many("devices")
    tensor_buft_overrides: list[str] = _many("tensor_buft_overrides")
    no_host: list[int] = _many("no_host")
    no_kv_offload: list[int] = _many("no_kv_offload")
    repetitions: int = _one("repetitions")
    prompt_file: str | None = _one("prompt_file")
    name: str = "custom"
    description: str = ""

    def validate(self, where: str = "sweep") -> None:
        """Every value within its bounds, the largest context and the number of tests too; else one PlanError line.

        Nothing is built: the test count and the largest context are computed from the lists' lengths and maxima.
        """
        for p in LIST_PARAMS:
            p.check_list(getattr(self, p.name), where)
        PARAM["repetitions"].check(self.repetitions, where)
        if any(p == 0 and g == 0 for p in self.n_prompt for g in self.n_gen):
            raise PlanError(f"{where}: a test needs n_prompt > 0 or n_gen > 0")
        self._check_size(where)
        per_seq = max(self.n_depth) + max(self.n_prompt) + max(self.n_gen) + 1
        if per_seq * max(self.n_parallel) > MAX_TOKENS:
            raise PlanError(f"{where}: a test needs a context of {per_seq * max(self.n_parallel):,} tokens (depth + "
                            f"prompt + generated + 1, × parallel sequences); at most {MAX_TOKENS:,}")
        usable = usable_cpu_threads()
        if max(self.n_threads) > THREADS_PER_CPU * usable:
            raise PlanError(f"{where}: n_threads {max(self.n_threads):,} is far beyond the {usable} CPU threads "
                            f"this process may use (at most {THREADS_PER_CPU * usable})")
        check_placement_build(self.devices, self.tensor_buft_overrides, where)

    def n_tests(self) -> int:
        """How many tests :meth:`tests` builds, computed without building them (a sweep without models counts one)."""
        n = max(1, len(self.models))
        for p in LIST_PARAMS:
            n *= max(1, len(getattr(self, p.name)))
        return n

    def _check_size(self, where: str) -> None:
        n = self.n_tests()
        if n > MAX_TESTS:
            lists = ", ".join(f"{p.name} ({p.flags[0]}) {len(getattr(self, p.name))}"
                              for p in LIST_PARAMS if len(getattr(self, p.name)) > 1)
            raise PlanError(f"{where}: {n:,} tests, at most {MAX_TESTS:,} in one sweep; shorten the lists "
                            f"({lists})")

    def tests(self) -> list[TestSpec]:
        """Every combination, ordered so tests that share a loaded model run together."""
        self.validate()
        out: list[TestSpec] = []
        lists = [getattr(self, name) or [None] for name in _CROSS]
        for model, *load in itertools.product(self.models, *(getattr(self, p.name) for p in _LOAD)):
            for combo in itertools.product(*lists):
                s = dict(zip(_CROSS, combo, strict=True))
                s["type_v"] = s["type_v"] or s["type_k"]
                s["n_ubatch"] = min(s["n_ubatch"], s["n_batch"])
                out.append(TestSpec(model_path=model, **dict(zip((p.name for p in _LOAD), load, strict=True)), **s,
                                    repetitions=self.repetitions, prompt_file=self.prompt_file))
        return order_tests(out)


def check_placement_build(devices: list[str], overrides: list[str], where: str,
                          gpu_backends: list[str] | None = None) -> None:
    """Refuse device names and buffer types a CPU-only llama.cpp build cannot have (one PlanError line).

    ``gpu_backends``: the build's GPU backends (default: read from the installed llama.cpp's library folder, without
    loading it). A GPU build's device and buffer type names are checked by the engine when the model loads.
    """
    backends = installed_gpu_backends() if gpu_backends is None else gpu_backends
    if backends != []:  # a GPU build, or no llama.cpp here to ask
        return
    for dev in devices:
        if dev not in (DEVICES_AUTO, DEVICES_NONE):
            raise PlanError(f"{where}: -dev {dev}: this llama.cpp build has no GPU backend (CPU only), so it has no "
                            f"such device; -dev takes auto or none here")
    for text in overrides:
        for pattern, buft in override_pairs(text):
            if buft != "CPU":
                raise PlanError(f"{where}: -ot {pattern}={buft}: no buffer type {buft!r} in this CPU-only llama.cpp "
                                f"build (valid: CPU)")


def order_tests(tests: list[TestSpec]) -> list[TestSpec]:
    """Group tests by load key (first-seen order kept), so each model loads once per distinct key."""
    groups: dict[tuple[Any, ...], list[TestSpec]] = {}
    for t in tests:
        groups.setdefault(t.load_key(), []).append(t)
    return [t for group in groups.values() for t in group]


def count_loads(tests: list[TestSpec]) -> int:
    """How many model loads running ``tests`` in order costs."""
    loads, prev = 0, None
    for t in tests:
        if t.load_key() != prev:
            loads, prev = loads + 1, t.load_key()
    return loads


_META = ("name", "description")  # SweepSpec fields that are not parameters


def load_sweep_preset(path: str | Path) -> SweepSpec:
    """Read a sweep preset TOML (``[sweep]`` table, keys from params.PARAMS); unknown keys and bad values are errors.

    Values are read strictly (``flash_attn = "no"`` is an error, not "on"); a lone value stands for a list of one.
    """
    p = Path(path)
    try:
        data = read_toml(p)
    except TomlFileError as e:
        says = {"missing": "sweep preset not found", "directory": "is a directory, not a sweep file",
                "not_regular": f"{e.cause} (a sweep preset is a TOML file)", "unreadable": f"cannot read ({e.cause})",
                "invalid": f"not valid TOML ({e.cause})", "nested": f"not a sweep preset ({e.cause})"}[e.kind]
        raise PlanError(f"{p}: {says}") from None
    table = data.get("sweep", data)
    if not isinstance(table, dict):
        raise PlanError(f"{p}: 'sweep' must be a table, got {table!r}")
    for key, value in data.items():
        if key != "sweep" and (isinstance(value, dict) or "sweep" in data):
            what = f"table [{key}]" if isinstance(value, dict) else f"key {key!r} outside [sweep]"
            raise PlanError(f"{p}: unknown {what} (sweep settings go in [sweep])")
    spec = SweepSpec(name=p.stem)
    for key, value in table.items():
        prm = PARAM.get(key)
        if prm is not None:
            value = prm.check_list(value, str(p)) if prm.is_list else prm.check(value, str(p))
        elif key in _META:
            if not isinstance(value, str):
                raise PlanError(f"{p}: {key} must be a string, got {quoted(value)}")
        else:
            raise PlanError(f"{p}: unknown key {quoted(key)}")
        setattr(spec, key, value)
    spec.validate(str(p))
    return spec


#: The presets a person tries first, in this order; any other preset file follows them by name.
_PRESET_ORDER = ("quick", "standard", "long-context", "chat", "rag")


def preset_names() -> list[str]:
    """The sweep presets (``profiles/sweeps/*.toml``): the usual five in :data:`_PRESET_ORDER`, then the rest."""
    found = sorted(p.stem for p in SWEEP_PRESETS_DIR.glob("*.toml"))
    return [n for n in _PRESET_ORDER if n in found] + [n for n in found if n not in _PRESET_ORDER]


def sweep_path(name: str, files: bool = True) -> Path:
    """The file a ``--sweep`` value names: a preset's or, with ``files``, a TOML file's (made absolute).

    PlanError, one line naming the value and the valid choices, when it names neither: ``gguf-bench run --sweep``
    (presets or files) and ``gguf-workbench --sweep`` (presets only) both ask here, before any work starts.
    """
    names = ", ".join(preset_names())
    choices = f"presets: {names}, or a TOML file" if files else f"presets: {names}"
    if not name.strip():
        raise PlanError(f"--sweep: an empty name ({choices})")
    if files and (name.endswith(".toml") or os.path.isfile(name)):  # isfile: False for a name too long, not OSError
        return absolute_path(name, "--sweep")
    if name in preset_names():
        return SWEEP_PRESETS_DIR / f"{name}.toml"
    shown = name if len(name) <= 80 else name[:80] + "..."
    raise PlanError(f"--sweep {shown}: no such sweep {'file or preset' if files else 'preset'} ({choices})")

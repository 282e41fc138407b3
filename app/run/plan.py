"""Sweep plans: lists of settings crossed into tests, ordered so each model loads as few times as possible."""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from app.model.kv_cache import CACHE_TYPES


class PlanError(ValueError):
    """A sweep spec or preset file is invalid; str() is one line naming the file or flag."""


@dataclass(frozen=True)
class TestSpec:
    """One test: a model, its load settings, its context settings and its token counts."""

    __test__ = False  # not a pytest class

    model_path: str
    n_prompt: int = 512
    n_gen: int = 128
    n_depth: int = 0
    n_gpu_layers: int = 99
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = False
    n_threads: int = 0
    n_batch: int = 2048
    n_ubatch: int = 512
    n_parallel: int = 1
    repetitions: int = 5
    prompt_file: str | None = None

    def load_key(self) -> tuple[Any, ...]:
        """Tests with equal load keys share one loaded model (llama-bench's equal_mparams)."""
        return (self.model_path, self.n_gpu_layers)

    def context_key(self) -> tuple[Any, ...]:
        return (self.type_k, self.type_v, self.flash_attn, self.n_threads, self.n_batch, self.n_ubatch,
                self.n_parallel, self.n_ctx)

    @property
    def n_ctx(self) -> int:
        """Context large enough for depth + prompt + generated tokens for every sequence, rounded to 256."""
        per_seq = self.n_depth + self.n_prompt + self.n_gen + 1
        return -(-per_seq * self.n_parallel // 256) * 256

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestSpec:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


#: Sweep parameters that take lists, with their llama-bench flag names.
LIST_PARAMS: dict[str, str] = {
    "n_prompt": "-p",
    "n_gen": "-n",
    "n_depth": "-d",
    "n_gpu_layers": "-ngl",
    "type_k": "-ctk",
    "type_v": "-ctv",
    "flash_attn": "-fa",
    "n_threads": "-t",
    "n_batch": "-b",
    "n_ubatch": "-ub",
    "n_parallel": "--parallel",
}
INT_PARAMS = {"n_prompt", "n_gen", "n_depth", "n_gpu_layers", "n_threads", "n_batch", "n_ubatch", "n_parallel"}


@dataclass
class SweepSpec:
    """Lists of settings; every combination becomes a test."""

    models: list[str] = field(default_factory=list)
    n_prompt: list[int] = field(default_factory=lambda: [512])
    n_gen: list[int] = field(default_factory=lambda: [128])
    n_depth: list[int] = field(default_factory=lambda: [0])
    n_gpu_layers: list[int] = field(default_factory=lambda: [99])
    type_k: list[str] = field(default_factory=lambda: ["f16"])
    type_v: list[str] = field(default_factory=lambda: ["f16"])  # as llama-bench: -ctk alone leaves V at f16
    flash_attn: list[bool] = field(default_factory=lambda: [False])
    n_threads: list[int] = field(default_factory=lambda: [0])
    n_batch: list[int] = field(default_factory=lambda: [2048])
    n_ubatch: list[int] = field(default_factory=lambda: [512])
    n_parallel: list[int] = field(default_factory=lambda: [1])
    repetitions: int = 5
    prompt_file: str | None = None
    name: str = "custom"
    description: str = ""

    def validate(self, where: str = "sweep") -> None:
        for name in INT_PARAMS:
            values = getattr(self, name)
            if not values:
                raise PlanError(f"{where}: {name} needs at least one value")
            for v in values:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise PlanError(f"{where}: {name} value {v!r} is not an integer")
                low = 1 if name in ("n_batch", "n_ubatch", "n_parallel") else 0
                if v < low:
                    raise PlanError(f"{where}: {name} value {v} must be ≥ {low}")
        for name in ("type_k", "type_v"):
            for v in getattr(self, name):
                if v not in CACHE_TYPES:
                    raise PlanError(f"{where}: unknown cache type {v!r} for {name} (valid: {', '.join(CACHE_TYPES)})")
        if not isinstance(self.repetitions, int) or self.repetitions < 1:
            raise PlanError(f"{where}: repetitions must be a positive integer, got {self.repetitions!r}")
        if any(p == 0 and g == 0 for p in self.n_prompt for g in self.n_gen):
            raise PlanError(f"{where}: a test needs n_prompt > 0 or n_gen > 0")

    def tests(self) -> list[TestSpec]:
        """Every combination, ordered so tests that share a loaded model run together."""
        self.validate()
        out: list[TestSpec] = []
        for model, ngl in itertools.product(self.models, self.n_gpu_layers):
            for tk, tv, fa, nt, nb, nub, npar, d, p, g in itertools.product(
                self.type_k, self.type_v, self.flash_attn, self.n_threads, self.n_batch, self.n_ubatch,
                self.n_parallel, self.n_depth, self.n_prompt, self.n_gen,
            ):
                out.append(TestSpec(
                    model_path=model, n_prompt=p, n_gen=g, n_depth=d, n_gpu_layers=ngl, type_k=tk,
                    type_v=tv, flash_attn=bool(fa), n_threads=nt, n_batch=nb, n_ubatch=min(nub, nb),
                    n_parallel=npar, repetitions=self.repetitions, prompt_file=self.prompt_file,
                ))
        return order_tests(out)


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


def parse_list(flag: str, text: str, kind: type) -> list[Any]:
    """Parse llama-bench list syntax: ``128,512``, and ranges ``first-last+step`` / ``first-last*mult``."""
    out: list[Any] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if kind is int and "-" in part[1:]:
                out.extend(_parse_range(part))
            elif kind is bool:
                if part.lower() not in ("0", "1", "true", "false", "on", "off"):
                    raise ValueError(part)
                out.append(part.lower() in ("1", "true", "on"))
            else:
                out.append(kind(part))
        except ValueError:
            raise PlanError(f"{flag}: cannot read {part!r} as {kind.__name__}") from None
    if not out:
        raise PlanError(f"{flag}: no values given")
    return out


def _parse_range(part: str) -> list[int]:
    first_s, rest = part.split("-", 1)
    step_op, step = "+", 1
    for op in ("+", "*"):
        if op in rest:
            rest, step_s = rest.split(op, 1)
            step_op, step = op, int(step_s)
    first, last = int(first_s), int(rest)
    if step_op == "*" and (step < 2 or first < 1):
        raise ValueError(part)
    if step_op == "+" and step < 1:
        raise ValueError(part)
    vals, v = [], first
    while v <= last:
        vals.append(v)
        v = v * step if step_op == "*" else v + step
    return vals


def load_sweep_preset(path: str | Path) -> SweepSpec:
    """Read a sweep preset TOML (``[sweep]`` table with list values); unknown keys are errors."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanError(f"{p}: sweep preset not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise PlanError(f"{p}: not valid TOML ({e})") from None
    table = data.get("sweep", data)
    spec = SweepSpec(name=p.stem)
    valid = {f.name for f in fields(SweepSpec)} - {"models"}
    for key, value in table.items():
        if key not in valid:
            raise PlanError(f"{p}: unknown key {key!r}")
        if key in LIST_PARAMS and not isinstance(value, list):
            value = [value]
        if key == "flash_attn":
            value = [bool(v) for v in value]
        setattr(spec, key, value)
    spec.validate(str(p))
    return spec

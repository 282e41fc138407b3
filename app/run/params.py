"""The one table of sweep parameters: flags, defaults, limits, labels, help text and test-name tags.

Everything that describes a sweep setting reads this table: the ``gguf-bench run`` options, the
TestSpec/SweepSpec defaults and their validation, TOML presets, the GUI's sweep editor, the settings a
result row copies from its test, and the short test name (CLI progress line and GUI alike).
Flag names, list syntax and the flash attention values follow llama-bench.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.model.kv_cache import CACHE_TYPES


class PlanError(ValueError):
    """A sweep spec or preset file is invalid; str() is one line naming the file or flag."""


# --- bounds: every count is checked against these before anything is allocated or planned ----------------
#: Prompt, depth and generated tokens of one test, and the context of one test (all sequences together):
#: far beyond any trained context, yet well inside llama.cpp's int32/uint32 counters (no wrap-around).
MAX_TOKENS = 1 << 24
#: llama.cpp's LLAMA_MAX_SEQ: sequences one context can hold.
MAX_PARALLEL = 256
#: Batch sizes (llama.cpp caps them at the context anyway).
MAX_BATCH = 1 << 20
MAX_GPU_LAYERS = 9999
MAX_THREADS = 4096  # a fixed ceiling; plan validation also refuses more than THREADS_PER_CPU × usable CPUs
THREADS_PER_CPU = 4
MAX_REPETITIONS = 10_000
#: An imposed device memory limit (MiB): 16 TiB, beyond any device.
MAX_DEVICE_MEM_MIB = 1 << 24
#: Values in one list (``-p 1-100000000`` is refused before the list is built) and tests in one sweep.
MAX_LIST_VALUES = 1000
MAX_TESTS = 10_000


# --- flash attention: llama.cpp's llama_flash_attn_type, llama-bench's ``flash_attn`` column -------------
FA_AUTO, FA_OFF, FA_ON = -1, 0, 1
_FA_SPELLINGS: dict[str, int] = {  # llama-bench: common_arg_utils::is_truthy / is_falsey / is_autoy
    "on": FA_ON, "enabled": FA_ON, "true": FA_ON, "1": FA_ON,
    "off": FA_OFF, "disabled": FA_OFF, "false": FA_OFF, "0": FA_OFF,
    "auto": FA_AUTO, "-1": FA_AUTO,
}
FA_WORDS = "on, off or auto (also 1/0/-1, true/false, enabled/disabled)"


def parse_flash_attn(value: object) -> int:
    """-1 (auto), 0 (off) or 1 (on) from a llama-bench spelling, one of those ints, or a bool (old stored runs).

    Anything else raises ValueError: ``"no"`` is not read as on.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (FA_AUTO, FA_OFF, FA_ON):
        return value
    if isinstance(value, str) and value.strip().lower() in _FA_SPELLINGS:
        return _FA_SPELLINGS[value.strip().lower()]
    raise ValueError(f"{value!r} is not {FA_WORDS}")


def flash_attn_text(value: object) -> str:
    """``auto``, ``0`` or ``1``: how the sweep editor shows a flash attention value."""
    fa = parse_flash_attn(value)
    return "auto" if fa == FA_AUTO else str(fa)


# --- weight repacking: llama.cpp's use_extra_bufts, llama-bench's ``repack`` column ------------------------
#: ``auto``: this machine's default, 1 as in llama-bench unless the crash guard found repacked weights crash here
#: (app.telemetry.repack_guard); a test is given 0 or 1 before it runs, and rows record that.
REPACK_AUTO = -1
REPACK_WORDS = "0, 1 or auto"


def parse_repack(value: object) -> int:
    """0, 1 or -1 (auto) from ``0``/``1``/``auto``/``-1``, one of those ints, or a bool; anything else ValueError."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (REPACK_AUTO, 0, 1):
        return value
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "-1", "auto"):
        v = value.strip().lower()
        return REPACK_AUTO if v in ("auto", "-1") else int(v)
    raise ValueError(f"{value!r} is not {REPACK_WORDS}")


def repack_text(value: object) -> str:
    return "auto" if parse_repack(value) == REPACK_AUTO else str(parse_repack(value))


# --- kinds of value ----------------------------------------------------------------------------------
def _strict_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer")
    return value


def _strict_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a string")
    return value


@dataclass(frozen=True)
class Kind:
    """How one kind of value is read from text (CLI, editor), checked (TOML, Python) and shown."""

    name: str  # in "cannot read 'x' as <name>"
    from_text: Callable[[str], Any]  # one list item typed by a user; ValueError if unreadable
    check: Callable[[Any], Any]  # a TOML/Python value -> the canonical value; ValueError if not this kind
    to_text: Callable[[Any], str] = str


INT = Kind("int", int, _strict_int)
TEXT = Kind("str", str.strip, _strict_str)
FLASH_ATTN = Kind("on|off|auto", parse_flash_attn, parse_flash_attn, flash_attn_text)
PATH = Kind("path", str.strip, _strict_str)
REPACK = Kind("0|1|auto", parse_repack, parse_repack, repack_text)


@dataclass(frozen=True)
class Param:
    """One sweep setting. ``name`` is the TestSpec/SweepSpec field, the argparse dest and the TOML key."""

    name: str
    flags: tuple[str, ...]  # as llama-bench: short, long
    kind: Kind
    default: Any  # a tuple for list parameters
    help: str  # argparse's
    label: str = ""  # the sweep editor's; "" = not in the editor
    tip: str = ""  # the sweep editor's tooltip
    scope: str = "run"  # "load" (a model reload), "context" (a new context) or "run"
    tag: str | None = None  # in the short test name: f"{tag}{value}"; None = not shown
    tag_always: bool = True  # False: shown only when not the default
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False  # the list may be empty (type_v: same as K)
    is_list: bool = True
    column: str = ""  # the result row's column, when not ``name``

    @property
    def row_column(self) -> str:
        return self.column or self.name

    @property
    def first_default(self) -> Any:
        """The single-test default (TestSpec's)."""
        return self.default[0] if self.is_list else self.default

    def check(self, value: Any, where: str) -> Any:
        """``value`` as this parameter's canonical value, or a one-line PlanError naming ``where`` and the key."""
        try:
            v = self.kind.check(value)
        except ValueError as e:
            raise PlanError(f"{where}: {self.name} value {e}") from None
        if self.choices and v not in self.choices:
            raise PlanError(f"{where}: unknown cache type {v!r} for {self.name} (valid: {', '.join(self.choices)})")
        if self.min is not None and v < self.min:
            raise PlanError(f"{where}: {self.name} value {v} must be ≥ {self.min}")
        if self.max is not None and v > self.max:
            raise PlanError(f"{where}: {self.name} value {v} must be ≤ {self.max}")
        return v

    def check_list(self, values: Any, where: str) -> list[Any]:
        """A list parameter's values checked one by one; a lone value (TOML ``n_gen = 64``) becomes a list."""
        items = values if isinstance(values, (list, tuple)) else [values]
        if len(items) > MAX_LIST_VALUES:
            raise PlanError(f"{where}: {self.name} has {len(items):,} values (at most {MAX_LIST_VALUES:,} in one list)")
        if not items and not self.optional:
            raise PlanError(f"{where}: {self.name} needs at least one value")
        return [self.check(v, where) for v in items]

    def parse_text(self, text: str, flag: str | None = None) -> list[Any]:
        """llama-bench list syntax typed on the command line or in the editor, e.g. ``128,512`` or ``0,auto``."""
        return parse_list(flag or self.flags[0], text, self.kind)

    def text(self, values: list[Any]) -> str:
        """``values`` written back in list syntax (the editor's field text)."""
        return ",".join(self.kind.to_text(v) for v in values)

    def name_part(self, value: Any) -> str | None:
        """This setting's piece of the short test name, or None when it is not shown."""
        if self.tag is None or (not self.tag_always and value == self.first_default):
            return None
        if self.kind is FLASH_ATTN:
            fa = parse_flash_attn(value)
            return "fa auto" if fa == FA_AUTO else f"fa{fa}"
        if self.kind is REPACK:
            return None if value in (REPACK_AUTO, 1) else f"{self.tag}{value}"
        return f"{self.tag}{value}"


PARAMS: tuple[Param, ...] = (
    Param("n_prompt", ("-p", "--n-prompt"), INT, (512,), "prompt lengths, e.g. 128,512", "Prompt lengths",
          "prompt tokens per test (-p), e.g. 128,512 or 128-2048*2", tag="p", min=0, max=MAX_TOKENS),
    Param("n_gen", ("-n", "--n-gen"), INT, (128,), "generated tokens (decode steps)", "Output lengths",
          "generated tokens per test (-n)", tag="n", min=0, max=MAX_TOKENS),
    Param("n_depth", ("-d", "--n-depth"), INT, (0,), "tokens already in the KV cache before the timed part",
          "Depths", "tokens already in the KV cache before the timed part (-d)", tag="d", min=0, max=MAX_TOKENS),
    Param("n_gpu_layers", ("-ngl", "--n-gpu-layers"), INT, (99,), "layers to offload to the GPU", "GPU layers",
          "layers offloaded to the GPU (-ngl); 99 = all", scope="load", tag="ngl", min=0, max=MAX_GPU_LAYERS),
    Param("type_k", ("-ctk", "--cache-type-k"), TEXT, ("f16",), "K cache type: f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1",
          "K cache", "K cache types (-ctk): f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1", scope="context", tag="",
          choices=tuple(CACHE_TYPES)),
    Param("type_v", ("-ctv", "--cache-type-v"), TEXT, ("f16",),  # as llama-bench: -ctk alone leaves V at f16
          "V cache type (default f16, as llama-bench; quantized V needs flash attention, which auto turns on)",
          "V cache", "V cache types (-ctv); empty: same as K", scope="context", choices=tuple(CACHE_TYPES),
          optional=True),
    Param("flash_attn", ("-fa", "--flash-attn"), FLASH_ATTN, (FA_AUTO,),
          "flash attention: on|off|auto or 1|0|-1, e.g. 0,1 (default auto, as llama-bench)", "Flash attention",
          "0, 1, auto, or a list such as 0,1 (-fa); default auto, as llama-bench", scope="context", tag="fa"),
    Param("n_threads", ("-t", "--threads"), INT, (0,), "CPU threads (0: all)", "Threads",
          "CPU threads (-t); 0 = all", scope="context", min=0, max=MAX_THREADS),
    Param("n_batch", ("-b", "--batch-size"), INT, (2048,), "logical batch size", "Batch sizes",
          "logical batch size (-b)", scope="context", min=1, max=MAX_BATCH),
    Param("n_ubatch", ("-ub", "--ubatch-size"), INT, (512,), "physical batch size", "Micro-batches",
          "physical batch size (-ub)", scope="context", min=1, max=MAX_BATCH),
    Param("n_parallel", ("--parallel",), INT, (1,), "sequences decoding together in one batch, e.g. 1,2,4,8",
          "Parallel seqs", "sequences decoding together (--parallel)", scope="context", tag="x", tag_always=False,
          min=1, max=MAX_PARALLEL),
    Param("no_op_offload", ("-nopo", "--no-op-offload"), INT, (0,),
          "1: host tensor ops stay on the CPU (llama.cpp's op_offload off; with -ngl 0 the prompt is otherwise "
          "sent to the GPU), e.g. 0,1 (default 0, as llama-bench)", "No op offload",
          "1: keep host tensor ops on the CPU (-nopo; llama.cpp's op_offload off), e.g. 0,1", scope="context",
          tag="nopo", tag_always=False, min=0, max=1),
    Param("device_mem_limit_mib", ("--device-mem-limit",), INT, (0,),
          "MiB a GPU device may hold (weights + KV cache + compute, as llama.cpp reports them): a test over it "
          "fails as out of memory, the predicted largest context beside it (default 0: no limit)",
          "GPU limit (MiB)", "MiB a GPU device may hold (--device-mem-limit); 0 = no limit", scope="context",
          tag="lim", tag_always=False, min=0, max=MAX_DEVICE_MEM_MIB),
    Param("repack", ("--repack",), REPACK, (REPACK_AUTO,),
          "weight repacking (llama.cpp's extra buffer types: AMX, CPU_REPACK): 0, 1 or auto, e.g. 0,1; a change "
          "reloads the model (default auto: 1 as llama-bench, or 0 on a CPU where repacked weights were found to "
          "crash llama.cpp; gguf-bench doctor says which)", "Repack",
          "weight repacking (--repack): 0, 1, auto or 0,1; auto: 1, or 0 where repacked weights crash this CPU",
          scope="load", tag="repack", tag_always=False),
    Param("repetitions", ("-r", "--repetitions"), INT, 5, "timed repetitions per test (one warmup is extra)",
          "Repetitions", "timed repetitions per test (one warmup runs first and is kept apart)", min=1,
          max=MAX_REPETITIONS, is_list=False, column="n_repetitions"),
    Param("prompt_file", ("--prompt-file",), PATH, None, "real text for the prompt instead of random token ids",
          is_list=False),
)
PARAM: dict[str, Param] = {p.name: p for p in PARAMS}
LIST_PARAMS: tuple[Param, ...] = tuple(p for p in PARAMS if p.is_list)


def parse_list(flag: str, text: str, kind: Kind | type) -> list[Any]:
    """Parse llama-bench list syntax: ``128,512``, and ranges ``first-last+step`` / ``first-last*mult``."""
    k = {int: INT, str: TEXT}.get(kind, kind) if isinstance(kind, type) else kind
    if not isinstance(k, Kind):
        raise TypeError(f"no list syntax for {kind!r}")
    out: list[Any] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if k is INT and "-" in part[1:]:
                out.extend(_parse_range(part, MAX_LIST_VALUES - len(out)))
            else:
                out.append(k.from_text(part))
        except _TooMany:
            raise PlanError(f"{flag}: {part!r} gives more than {MAX_LIST_VALUES:,} values "
                            f"(at most {MAX_LIST_VALUES:,} in one list)") from None
        except ValueError:
            raise PlanError(f"{flag}: cannot read {part[:40]!r} as {k.name}") from None
        if len(out) > MAX_LIST_VALUES:
            raise PlanError(f"{flag}: more than {MAX_LIST_VALUES:,} values (at most {MAX_LIST_VALUES:,} in one list)")
    if not out:
        raise PlanError(f"{flag}: no values given")
    return out


class _TooMany(Exception):
    """A range holds more values than a list may."""


def _parse_range(part: str, room: int) -> list[int]:
    """The values of ``first-last+step`` or ``first-last*mult``; _TooMany past ``room`` values, counted first."""
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
    if step_op == "+" and last >= first and (last - first) // step + 1 > room:
        raise _TooMany(part)
    vals, v = [], first
    while v <= last:
        if len(vals) >= room:
            raise _TooMany(part)
        vals.append(v)
        v = v * step if step_op == "*" else v + step
    return vals


def short_name(test: Mapping[str, Any]) -> str:
    """Short name of a test (a TestSpec dict): ``model p128 n32 d0 ngl99 f16 fa auto x4``.

    A remote server test (app.remote.session.RemoteTest's dict) reads ``model p128 n32 c4`` (c: concurrency).
    """
    if test.get("endpoint"):
        rate = f" {test['rate_rps']:g}/s" if test.get("rate_rps") else ""
        counts = f"p{test.get('n_prompt')} n{test.get('n_gen')} c{test.get('concurrency')}"
        return f"{test.get('served_model', '')} {counts}{rate}"
    name = os.path.basename(str(test.get("model_path", "")))
    if name.lower().endswith(".gguf"):
        name = name[:-5]
    parts = [name]
    for p in PARAMS:
        value = test.get(p.name)
        part = p.name_part(p.first_default if value is None else value)
        if part is not None:
            parts.append(part)
    return " ".join(parts)


"""The one table of sweep parameters: flags, defaults, limits, labels, help text and test-name tags.

Everything that describes a sweep setting reads this table: the ``gguf-bench run`` options, the
TestSpec/SweepSpec defaults and their validation, TOML presets, the GUI's sweep editor, the settings a
result row copies from its test, and the short test name (CLI progress line and GUI alike).
Flag names, list syntax and the flash attention values follow llama-bench.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.model.kv_cache import CACHE_TYPES
from app.shown_text import quoted
from engines.base import SPLIT_MODES


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
    raise ValueError(f"{quoted(value)} is not {FA_WORDS}")


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
    raise ValueError(f"{quoted(value)} is not {REPACK_WORDS}")


def repack_text(value: object) -> str:
    return "auto" if parse_repack(value) == REPACK_AUTO else str(parse_repack(value))


# --- placement: llama-bench's -ncmoe, -sm, -dev, -ts and -ot (tools/llama-bench/llama-bench.cpp) ---------------
#: llama.cpp's llama_max_devices() (src/llama.cpp): the length of tensor_split and the devices one model may use.
MAX_DEVICES = 16
#: -ncmoe words: every layer's experts, or the first half of the layers' (resolved from the GGUF before loading).
NCMOE_ALL, NCMOE_HALF = -1, -2
_NCMOE_WORDS = {"all": NCMOE_ALL, "half": NCMOE_HALF}
NCMOE_WORDS = "a layer count, all or half"
DEVICES_AUTO, DEVICES_NONE = "auto", "none"
TENSOR_SPLIT_DEFAULT = "0.00"  # llama-bench's column for "no split given" (all zeros)
NO_OVERRIDES = "none"  # llama-bench's tensor_buft_overrides column when there are none
#: Bounds on one -ot value (patterns are compiled by llama.cpp for every tensor of the model).
MAX_OVERRIDES = 64
MAX_OVERRIDE_CHARS = 4096
_NAME_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # a ggml device or buffer type name ("Vulkan0", "CUDA_Host")


def parse_n_cpu_moe(value: object) -> int:
    """A count of layers whose MoE expert tensors stay in host memory: an int ≥ 0, ``all`` (-1) or ``half`` (-2)."""
    if isinstance(value, str) and value.strip().lower() in _NCMOE_WORDS:
        return _NCMOE_WORDS[value.strip().lower()]
    if isinstance(value, str):
        value = int(value.strip())
    v = _strict_int(value)
    if v < NCMOE_HALF or v > MAX_GPU_LAYERS:
        raise ValueError(f"a count is 0 to {MAX_GPU_LAYERS}")
    return v


def n_cpu_moe_text(value: object) -> str:
    v = parse_n_cpu_moe(value)
    return {NCMOE_ALL: "all", NCMOE_HALF: "half"}.get(v, str(v))


def parse_devices(value: object) -> str:
    """``auto``, ``none`` or device names joined by ``/`` (``Vulkan0/Vulkan1``), as llama-bench's -dev; canonical."""
    text = _strict_str(value).strip()
    if text in (DEVICES_AUTO, DEVICES_NONE):
        return text
    names = [n.strip() for n in text.split("/")]
    if not text or any(not _NAME_RE.fullmatch(n) or n in (DEVICES_AUTO, DEVICES_NONE) for n in names):
        raise ValueError(f"{text[:40]!r} is not auto, none or device names such as Vulkan0/Vulkan1")
    if len(names) > MAX_DEVICES:
        raise ValueError(f"{len(names)} devices, at most {MAX_DEVICES}")
    return "/".join(names)


def device_names(devices: str) -> tuple[str, ...] | None:
    """The names in a canonical -dev value: None for auto (llama.cpp picks), () for none (no GPU device)."""
    if devices == DEVICES_AUTO:
        return None
    return () if devices == DEVICES_NONE else tuple(devices.split("/"))


def parse_tensor_split(value: object) -> str:
    """Proportions per device separated by ``/`` or ``;`` (``3/1``), written as llama-bench's column writes them:
    two decimals, up to the last non-zero one (``3.00/1.00``; all zeros: ``0.00``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    parts = [p for p in re.split(r"[;/]+", _strict_str(value).strip()) if p.strip()]
    if not parts:
        raise ValueError("no proportions given")
    if len(parts) > MAX_DEVICES:
        raise ValueError(f"{len(parts)} proportions, at most {MAX_DEVICES} (llama.cpp's device limit)")
    try:
        props = [float(p) for p in parts]
    except ValueError:
        raise ValueError("each proportion is a number ≥ 0") from None
    for p in props:
        if not math.isfinite(p) or p < 0:
            raise ValueError(f"{p:g} is not a proportion ≥ 0")
        if 0 < p < 0.005:
            raise ValueError(f"{p:g} would be 0.00: proportions keep two decimals, as llama-bench writes them")
    last = max((i for i, p in enumerate(props) if p > 0), default=0)
    return "/".join(f"{p:.2f}" for p in props[: last + 1])


def tensor_split_values(text: str) -> tuple[float, ...]:
    """The proportions of a canonical -ts value; () when all are zero (llama.cpp's default split)."""
    props = tuple(float(p) for p in text.split("/"))
    return props if any(props) else ()


def parse_overrides(value: object) -> str:
    """llama-bench's -ot value: ``PATTERN=BUFT`` entries separated by ``;`` (``none``: no override); canonical text.

    PATTERN is a regular expression searched in each tensor name, BUFT a buffer type name (``CPU``, ``Vulkan0``).
    """
    text = _strict_str(value).strip()
    if text == NO_OVERRIDES:
        return text
    if len(text) > MAX_OVERRIDE_CHARS:
        raise ValueError(f"{len(text):,} characters, at most {MAX_OVERRIDE_CHARS:,}")
    entries = [e.strip() for e in text.split(";") if e.strip()]
    if not entries:
        raise ValueError("no PATTERN=BUFT entry")
    if len(entries) > MAX_OVERRIDES:
        raise ValueError(f"{len(entries)} overrides, at most {MAX_OVERRIDES}")
    out = []
    for entry in entries:
        pattern, eq, buft = entry.partition("=")
        if not eq or not pattern or not buft:
            raise ValueError(f"{entry[:40]!r} needs PATTERN=BUFT, e.g. ffn_.*_exps=CPU")
        if not _NAME_RE.fullmatch(buft.strip()):
            raise ValueError(f"{buft[:40]!r} is not a buffer type name such as CPU or Vulkan0")
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"{pattern[:40]!r} is not a regular expression: {e}") from None
        out.append(f"{pattern}={buft.strip()}")
    return ";".join(out)


def override_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """(pattern, buffer type) of each entry of a canonical -ot value; () for none."""
    if text == NO_OVERRIDES:
        return ()
    return tuple(tuple(e.split("=", 1)) for e in text.split(";"))  # type: ignore[misc]


# --- kinds of value ----------------------------------------------------------------------------------
def _strict_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{quoted(value)} is not an integer")
    return value


def _strict_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{quoted(value)} is not a string")
    return value


@dataclass(frozen=True)
class Kind:
    """How one kind of value is read from text (CLI, editor), checked (TOML, Python) and shown."""

    name: str  # in "cannot read 'x' as <name>"
    from_text: Callable[[str], Any]  # one list item typed by a user; ValueError if unreadable
    check: Callable[[Any], Any]  # a TOML/Python value -> the canonical value; ValueError if not this kind
    to_text: Callable[[Any], str] = str
    ranges: bool = False  # ``first-last+step`` ranges allowed in a list (integers)


INT = Kind("int", int, _strict_int, ranges=True)
TEXT = Kind("str", str.strip, _strict_str)
FLASH_ATTN = Kind("on|off|auto", parse_flash_attn, parse_flash_attn, flash_attn_text)
PATH = Kind("path", str.strip, _strict_str)
REPACK = Kind("0|1|auto", parse_repack, parse_repack, repack_text)
N_CPU_MOE = Kind(NCMOE_WORDS, parse_n_cpu_moe, parse_n_cpu_moe, n_cpu_moe_text, ranges=True)
DEVICES = Kind("auto|none|DEV0/DEV1", parse_devices, parse_devices)
TENSOR_SPLIT = Kind("proportions such as 3/1", parse_tensor_split, parse_tensor_split)
OVERRIDES = Kind("PATTERN=BUFT;...", parse_overrides, parse_overrides)
_EXPLAINED = (N_CPU_MOE, DEVICES, TENSOR_SPLIT, OVERRIDES)  # kinds whose reading error says why, after the value


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
    what: str = "value"  # what one of ``choices`` is, in "unknown <what> 'x'"

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
            raise PlanError(f"{where}: unknown {self.what} {quoted(v)} for {self.name} (valid: "
                            f"{', '.join(self.choices)})")
        if self.min is not None and v < self.min:
            raise PlanError(f"{where}: {self.name} value {quoted(v)} must be ≥ {self.min}")
        if self.max is not None and v > self.max:
            raise PlanError(f"{where}: {self.name} value {quoted(v)} must be ≤ {self.max}")
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
        if self.kind is N_CPU_MOE:
            return f"{self.tag}{value}" if value >= 0 else f"{self.tag} {n_cpu_moe_text(value)}"
        if self.kind in (TEXT, DEVICES, TENSOR_SPLIT, OVERRIDES) and self.tag:
            text = str(value)
            return f"{self.tag} {text if len(text) <= 24 else text[:23] + '…'}"
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
    Param("n_cpu_moe", ("-ncmoe", "--n-cpu-moe"), N_CPU_MOE, (0,),
          "keep the MoE expert tensors of the first N layers in host memory (llama.cpp's expert-tensor overrides, "
          "as llama-bench), e.g. 0,4,all; all: every layer, half: the first half (default 0)", "MoE on CPU",
          "layers whose MoE expert weights stay in host memory (-ncmoe), e.g. 0,4,all or half", scope="load",
          tag="ncmoe", tag_always=False),
    Param("type_k", ("-ctk", "--cache-type-k"), TEXT, ("f16",), "K cache type: f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1",
          "K cache", "K cache types (-ctk): f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1", scope="context", tag="",
          choices=tuple(CACHE_TYPES), what="cache type"),
    Param("type_v", ("-ctv", "--cache-type-v"), TEXT, ("f16",),  # as llama-bench: -ctk alone leaves V at f16
          "V cache type (default f16, as llama-bench; quantized V needs flash attention, which auto turns on)",
          "V cache", "V cache types (-ctv); empty: same as K", scope="context", choices=tuple(CACHE_TYPES),
          optional=True, what="cache type"),
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
    # GPU placement: command line and TOML only (no label): with them the sweep editor's form would grow by two rows
    # and the window would no longer fit 1366x768; -ncmoe above took the form's last free place
    Param("split_mode", ("-sm", "--split-mode"), TEXT, ("layer",),
          "how a model is split across GPUs: none|layer|row|tensor, e.g. layer,row (default layer, as llama-bench)",
          scope="load", tag="sm", tag_always=False, choices=SPLIT_MODES, what="split mode"),
    Param("main_gpu", ("-mg", "--main-gpu"), INT, (0,),
          "the GPU (index among the devices used) that holds the whole model with -sm none, e.g. 0,1 (default 0)",
          scope="load", tag="mg", tag_always=False, min=0, max=MAX_DEVICES - 1),
    Param("tensor_split", ("-ts", "--tensor-split"), TENSOR_SPLIT, (TENSOR_SPLIT_DEFAULT,),
          "share of the model per GPU, proportions separated by / or ; e.g. 3/1,1/1 (default 0: llama.cpp's split "
          "by free memory)", scope="load", tag="ts", tag_always=False),
    Param("devices", ("-dev", "--device"), DEVICES, (DEVICES_AUTO,),
          "GPU devices to use, joined by / (Vulkan0/Vulkan1), none (host only) or auto, e.g. auto,none "
          "(default auto: all)", scope="load", tag="dev", tag_always=False),
    Param("tensor_buft_overrides", ("-ot", "--override-tensor"), OVERRIDES, (NO_OVERRIDES,),
          "tensors to place by name: PATTERN=BUFT entries joined by ; (regular expression = buffer type such as "
          "CPU or Vulkan0), several values by , e.g. 'ffn_.*_exps=CPU' (default none)", scope="load",
          tag="ot", tag_always=False),
    Param("no_host", ("--no-host",), INT, (0,),
          "1: weights in host memory use plain buffers, not the GPU backend's pinned host buffers, e.g. 0,1 "
          "(default 0)", scope="load", tag="nohost", tag_always=False, min=0, max=1),
    Param("no_kv_offload", ("-nkvo", "--no-kv-offload"), INT, (0,),
          "1: the KV cache (and attention) stays in host memory (llama.cpp's offload_kqv off), e.g. 0,1 (default 0)",
          scope="context", tag="nkvo", tag_always=False, min=0, max=1),
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
            if k.ranges and "-" in part[1:]:
                out.extend(_parse_range(part, MAX_LIST_VALUES - len(out)))
            else:
                out.append(k.from_text(part))
        except _TooMany:
            raise PlanError(f"{flag}: {part!r} gives more than {MAX_LIST_VALUES:,} values "
                            f"(at most {MAX_LIST_VALUES:,} in one list)") from None
        except ValueError as e:
            why = f" ({e})" if k in _EXPLAINED and "invalid literal" not in str(e) else ""
            raise PlanError(f"{flag}: cannot read {part[:40]!r} as {k.name}{why}") from None
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
    vals: list[int] = []
    v = first
    while v <= last:
        if len(vals) >= room:
            raise _TooMany(part)
        vals.append(v)
        v = v * step if step_op == "*" else v + step
    return vals


"""What a prediction is asked: ``PredictSettings`` (context, placement, cache types, the request) and the standard
questions every view asks (:func:`at_context`, :meth:`PredictSettings.empty_cache`). Plain values; no I/O.

``repack`` -1 ("auto") stays -1 here: the machine a figure is for resolves it (:meth:`PredictSettings.resolved`,
called by :func:`app.predict.answer.answer` with this machine's repack guard verdict).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.model.facts import ModelFacts
from app.predict.ceilings.offload import Placement, WeightSplit, effective_n_gpu_layers, split_weights
from app.predict.memory.buffers import DEFAULT_N_UBATCH
from app.results.fields import FIELD_BY_NAME
from app.results.row_types import ResultRow

#: llama-bench's -repack auto: this machine's default (1 unless its repack guard found repacked weights crash)
REPACK_AUTO = -1
#: tokens the standard questions generate (llama-bench's default -n): "at this context" and "from an empty cache"
AT_CONTEXT_GEN = 128


def flash_attn_enabled(value: Any) -> bool:
    """Flash attention as a yes/no: -1 (auto) and 1 are on, 0 is off; bools and "auto"/"on"/"off" text too."""
    if value is None or value == "":
        return False
    try:
        return int(float(value)) != 0
    except (TypeError, ValueError):
        return str(value).strip().lower() in ("auto", "on", "true", "yes", "enabled")


def _repack_of(value: int | None) -> int:
    """A row's repacking: its 0 or 1; auto (-1, a test not yet run) stays auto; none (rows from before the setting):
    1, llama.cpp's default then."""
    return value if value is not None and value in (0, 1, REPACK_AUTO) else 1


def _threads_of(row: ResultRow) -> int:
    """The CPU threads a row ran with (``n_threads_effective``, else ``n_threads``); 0: the default count."""
    for value in (row.n_threads_effective, row.n_threads):
        if value is not None and value > 0:
            return value
    return 0


#: The field-table columns a test's settings are read from (:meth:`PredictSettings.from_test`)
_SETTING_COLUMNS = ("n_prompt", "n_gen", "n_depth", "n_ctx", "n_gpu_layers", "type_k", "type_v", "n_ubatch",
                    "flash_attn", "flash_attn_effective", "repack", "n_cpu_moe", "no_kv_offload",
                    "tensor_buft_overrides", "n_threads_effective", "n_threads", "backends", "no_op_offload")


def _setting_value(name: str, value: Any) -> Any:
    """``value`` of the setting column ``name`` as its field's type; None where it is not one (read as absent)."""
    if value is None or value == "":
        return None
    if FIELD_BY_NAME[name].type is str:
        return str(value)
    if name in ("flash_attn", "flash_attn_effective") and isinstance(value, str):
        return int(flash_attn_enabled(value))  # "auto", "on", "off"
    if name in ("n_threads", "n_threads_effective") and (not isinstance(value, int) or isinstance(value, bool)):
        return None  # a count of threads is a whole number or no setting
    if name == "repack" and value not in (0, 1, REPACK_AUTO):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class PredictSettings:
    """What a prediction is asked for: the context, the offload, the KV cache types and the request.

    ``type_v`` None means ``type_k``; ``depth`` tokens already sit in the KV cache before the prompt (llama-bench
    ``-d``). ``flash_attn`` is whether flash attention runs (it sizes the compute buffer). ``n_threads`` 0 is the
    count a default run uses; ``backends`` is what a measured row ran on ("CPU", "Vulkan,CPU"), "" for a question.
    """

    n_ctx: int
    n_gpu_layers: int = 999
    type_k: str = "f16"
    type_v: str | None = None
    n_prompt: int = 512
    n_gen: int = 128
    depth: int = 0
    n_ubatch: int = DEFAULT_N_UBATCH
    flash_attn: bool = False
    swa_full: bool = False
    #: llama.cpp's weight repacking (llama-bench --repack): 1 on, 0 off (weights as in the file); -1 (auto): the
    #: machine's default, resolved by the answer for that machine
    repack: int = REPACK_AUTO
    #: -ncmoe: layers 0..N-1 keep their MoE expert tensors in host memory; -1 all, -2 half (resolved per model)
    n_cpu_moe: int = 0
    #: -nkvo 1: the KV cache (and the attention over it) in host memory
    no_kv_offload: bool = False
    #: -ot: PATTERN=BUFT entries joined by ";" (llama-bench's column text), "none" for none
    tensor_buft_overrides: str = "none"
    n_threads: int = 0
    backends: str = ""
    #: -nopo 1 (llama-bench --no-op-offload): host-held weights' ops stay on the CPU; 0, llama.cpp's default: a
    #: prompt's micro-batch moves them to the GPU (app/predict/ceilings/op_offload.py)
    no_op_offload: bool = False
    #: device memory a placement leaves free on a discrete GPU (a question's, like llama.cpp's --fit-target; a
    #: measured row's settings keep none: it ran as it ran)
    device_margin_bytes: int = 0

    def __post_init__(self) -> None:
        if self.repack not in (0, 1, REPACK_AUTO):
            object.__setattr__(self, "repack", REPACK_AUTO)
        if not self.type_v:
            object.__setattr__(self, "type_v", self.type_k)
        if not self.tensor_buft_overrides:
            object.__setattr__(self, "tensor_buft_overrides", "none")

    @property
    def decode_depth(self) -> float:
        """The KV depth a decode figure is taken at: the depth before the prompt, the prompt and half the generated
        tokens (the generation's average)."""
        return self.depth + self.n_prompt + self.n_gen / 2.0

    def placement(self, n_layer: int) -> Placement:
        """-ot and -ncmoe for a model of ``n_layer`` layers (all/half resolved)."""
        return Placement.from_text(self.n_cpu_moe, n_layer, self.tensor_buft_overrides)

    def resolved(self, default_repack: int) -> PredictSettings:
        """These settings with repack auto (-1) made the machine's ``default_repack``."""
        return replace(self, repack=default_repack) if self.repack == REPACK_AUTO else self

    def decode_at(self, depth: float) -> PredictSettings:
        """The question "decode at this KV depth" at this placement: 128 tokens generated (fewer, twice the depth,
        where it is shallower) around ``depth``, after a prompt that fills the cache up to where they start. The
        one rule every decode figure at a depth follows: :func:`at_context`'s is ``decode_at(n_ctx - 64)``, the
        empty cache's :meth:`empty_cache` ``decode_at(64)``."""
        n_gen = int(min(AT_CONTEXT_GEN, max(2 * depth, 1)))
        n_prompt = max(int(round(depth - n_gen / 2)), 0)
        n_ctx = -(-(n_prompt + n_gen + 1) // 256) * 256
        return replace(self, n_ctx=n_ctx, n_prompt=n_prompt, n_gen=n_gen, depth=0)

    def empty_cache(self) -> PredictSettings:
        """The question "decode from an empty cache" at this placement: llama-bench's tg128 (no prompt, 128 tokens
        generated from an empty cache, so its decode is read at depth 64). One question per file, placement and
        hardware, whatever context or request is asked."""
        return replace(self.decode_at(AT_CONTEXT_GEN / 2), n_ctx=2 * AT_CONTEXT_GEN)

    @classmethod
    def from_row(cls, row: ResultRow, *, n_ctx: int | None = None,
                 n_gpu_layers: int | None = None) -> PredictSettings:
        """Settings of a result row; fields it does not hold take the defaults.

        n_ctx: ``n_ctx`` (the argument, else the row's), else depth + prompt + generated + 1; n_gpu_layers: the
        argument, else the row's requested ``n_gpu_layers``; type_v falls back to type_k; flash attention is the row's
        ``flash_attn_effective`` (what llama.cpp used) when present, else ``flash_attn`` (-1 auto counts as on).
        """
        n_prompt = row.n_prompt if row.n_prompt is not None else 512
        n_gen = row.n_gen if row.n_gen is not None else 128
        depth = row.n_depth or 0
        ctx = n_ctx if n_ctx is not None else (row.n_ctx or depth + n_prompt + n_gen + 1)
        fa = row.flash_attn if row.flash_attn_effective is None else row.flash_attn_effective
        if n_gpu_layers is not None:
            ngl = n_gpu_layers
        else:
            ngl = row.n_gpu_layers if row.n_gpu_layers is not None else 999
        type_k = row.type_k or "f16"
        return cls(
            n_ctx=max(ctx, 1), n_gpu_layers=ngl, type_k=type_k, type_v=row.type_v or type_k,
            n_prompt=max(n_prompt, 1), n_gen=max(n_gen, 0), depth=max(depth, 0),
            n_ubatch=row.n_ubatch or DEFAULT_N_UBATCH, flash_attn=flash_attn_enabled(fa),
            repack=_repack_of(row.repack), n_cpu_moe=row.n_cpu_moe or 0, no_kv_offload=bool(row.no_kv_offload),
            tensor_buft_overrides=row.tensor_buft_overrides or "none",
            n_threads=_threads_of(row), backends=row.backends or "", no_op_offload=bool(row.no_op_offload),
        )

    @classmethod
    def from_test(cls, test: Mapping[str, Any], *, n_ctx: int | None = None,
                  n_gpu_layers: int | None = None) -> PredictSettings:
        """Settings of a test as the window holds it, or of keyword settings: a table keyed by the field table's
        column names (``n_prompt``, ``type_k``, ``flash_attn``…), values as a form or a file gave them.

        A boundary decoder: each setting column becomes its field's type (a value that is not one reads as absent,
        flash attention's "auto"/"on"/"off" as -1/1/0 would), the table a typed row, and :meth:`from_row` reads it.
        """
        values = {name: _setting_value(name, test.get(name)) for name in _SETTING_COLUMNS}
        row = ResultRow(**{name: value for name, value in values.items() if value is not None})
        return cls.from_row(row, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PredictSettings:
        """Settings from ``gguf-bench predict``'s arguments (--ctx, -ngl, -ncmoe, -nkvo, -nopo, -ctk, -ctv, -p, -n,
        -d, -fa, --repack, -t)."""
        return cls(
            n_ctx=args.ctx, n_gpu_layers=args.n_gpu_layers, type_k=args.type_k, type_v=args.type_v,
            n_prompt=args.n_prompt, n_gen=args.n_gen, depth=args.n_depth,
            flash_attn=flash_attn_enabled(args.flash_attn), repack=getattr(args, "repack", REPACK_AUTO),
            n_cpu_moe=getattr(args, "n_cpu_moe", 0), no_kv_offload=bool(getattr(args, "no_kv_offload", 0)),
            n_threads=getattr(args, "threads", 0) or 0, no_op_offload=bool(getattr(args, "no_op_offload", 0)),
        )


def at_context(n_ctx: int, *, type_k: str = "f16", type_v: str | None = None, n_gpu_layers: int = 999,
               n_ubatch: int = DEFAULT_N_UBATCH, n_cpu_moe: int = 0, no_kv_offload: bool = False,
               no_op_offload: bool = False) -> PredictSettings:
    """The one question every view answers for "this file on this hardware at this context" (the inspector, the
    chooser, the scenario panel at that length, ``predict``'s ``at_context``): a request that fills the context,
    a prompt of ``n_ctx`` − 128 then 128 generated tokens, flash attention on (what llama.cpp's auto picks where
    it can). Its decode figure is at the generation's average depth (:func:`at_context_depth`), its memory the
    fit's needed bytes at ``n_ctx``."""
    n_gen = min(AT_CONTEXT_GEN, max(n_ctx // 2, 1))
    return PredictSettings(n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, type_k=type_k, type_v=type_v,
                           n_prompt=max(n_ctx - n_gen, 1), n_gen=n_gen, depth=0, n_ubatch=n_ubatch, flash_attn=True,
                           n_cpu_moe=n_cpu_moe, no_kv_offload=no_kv_offload, no_op_offload=no_op_offload)


def at_context_depth(settings: PredictSettings) -> int:
    """The KV depth a request's decode figure is for: its prompt and half its generated tokens."""
    return int(settings.decode_depth)


def placed_weights(facts: ModelFacts, s: PredictSettings, tensor_bytes: Mapping[str, int] | None, *,
                   host_only: bool = False) -> tuple[WeightSplit, Placement, bool]:
    """(where ``s`` puts the weights, its -ncmoe/-ot placement, whether the KV cache sits with the offloaded
    layers): the one reading of a placement that predictions and the crossing fit share. On a CPU (``host_only``)
    everything stays in host memory whatever the flags say."""
    if host_only:
        return split_weights(facts, 0, tensor_bytes, Placement()), Placement(), True
    placement = s.placement(facts.n_layer)
    ngl = effective_n_gpu_layers(s.n_gpu_layers, facts.n_layer)
    return split_weights(facts, ngl, tensor_bytes, placement), placement, not s.no_kv_offload

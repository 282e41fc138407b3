"""The questions every surface asks :func:`app.predict.answer.answer`, built in one place with one set of defaults.

A :class:`Question` is what a user set (context, KV-cache type, placement, the request, the device margin); its
methods turn it into the :class:`PredictSettings` of each standard question, the way llama-bench turns one
``cmd_params_instance`` into the library's parameters in one function (``to_llama_cparams``):

- :meth:`Question.at_context`: the context full (a prompt of the context less the output, then the output), the
  figure the inspector, the chooser and ``predict``'s "at a full context" line show;
- :meth:`Question.short_prompt`: llama-bench's default prompt (``-p 512``) at that context: the prefill and TTFT rows;
- :meth:`Question.request`: one request of the asked prompt and output from an empty cache (the scenario panel,
  ``predict -p/-n``);
- :meth:`Question.decode_at`: decode at a depth (the plots' curves);
- :func:`settings_of`, :func:`prompt_point`, :func:`from_flags`, :func:`memory_at`: the settings of a test's table (a
  table row, a curve's point), of ``predict``'s flags and of a memory check, for the surfaces that start there.

The CLI (``predict``, ``choose``), the inspector, the scenario panel, the plots and the chooser window build their
questions here and nowhere else (an import contract keeps ``app.gui`` and ``app.cli`` off ``app.predict.settings``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.predict.memory.buffers import KV_CELL_PAD
from app.predict.memory.fit import DEFAULT_DEVICE_MARGIN_BYTES
from app.predict.settings import REPACK_AUTO, PredictSettings, at_context, at_context_depth

#: The context every surface asks by default: above llama.cpp's own floor when it fits a context to free memory
#: (``--fit`` never goes below 4,096: common/common.h ``fit_params_min_ctx``), a chat with a document in it.
DEFAULT_N_CTX = 8192
#: llama-bench's defaults: a 512-token prompt (``-p 512``), 128 generated tokens (``-n 128``)
DEFAULT_N_PROMPT = 512
DEFAULT_N_GEN = 128
MIB = 2**20
#: GPU memory a question leaves free by default: llama.cpp's --fit-target (app.predict.memory.fit)
DEFAULT_MARGIN_BYTES = DEFAULT_DEVICE_MARGIN_BYTES


def round_context(n_ctx: int) -> int:
    """The context llama.cpp allocates for an asked ``n_ctx``: padded up to a multiple of 256 cells
    (llama-context.cpp pads ``n_ctx`` to the KV cache's cell padding); at least one padding."""
    return max(-(-int(n_ctx) // KV_CELL_PAD) * KV_CELL_PAD, KV_CELL_PAD)


@dataclass(frozen=True)
class Question:
    """What a user asked about one file on one piece of hardware: the context and KV-cache type, the placement
    (``n_gpu_layers`` 999: all layers; ``n_cpu_moe``; ``no_kv_offload``; ``no_op_offload``), the request
    (``n_prompt`` then ``n_gen`` tokens), the device memory left free (``margin_bytes``), and the run's CPU threads
    and repacking."""

    n_ctx: int = DEFAULT_N_CTX
    type_k: str = "f16"
    type_v: str | None = None
    n_gpu_layers: int = 999
    n_cpu_moe: int = 0
    no_kv_offload: bool = False
    #: -nopo 1: host-held weights' ops stay on the CPU (llama.cpp's op offload off; a split's prefill then has the
    #: CPU compute its layers' share)
    no_op_offload: bool = False
    #: the prompt of the asked request; None: the context full (the context less the output)
    n_prompt: int | None = None
    n_gen: int = DEFAULT_N_GEN
    depth: int = 0
    margin_bytes: int = DEFAULT_MARGIN_BYTES
    flash_attn: bool = True
    n_threads: int = 0
    repack: int = REPACK_AUTO

    @property
    def margin_mib(self) -> float:
        return self.margin_bytes / MIB

    def _placed(self, s: PredictSettings) -> PredictSettings:
        return replace(s, n_threads=self.n_threads, repack=self.repack, device_margin_bytes=self.margin_bytes,
                       flash_attn=self.flash_attn)

    def at_context(self) -> PredictSettings:
        """This file at this context: the context full (:func:`app.predict.settings.at_context`), or where a prompt
        or an output length was asked, that request (its prompt by default the context less the output) at this
        context."""
        s = self._placed(at_context(self.n_ctx, type_k=self.type_k, type_v=self.type_v,
                                    n_gpu_layers=self.n_gpu_layers, n_cpu_moe=self.n_cpu_moe,
                                    no_kv_offload=self.no_kv_offload, no_op_offload=self.no_op_offload))
        if self.n_prompt is not None or self.n_gen != s.n_gen:
            prompt = max(1, self.n_ctx - self.n_gen) if self.n_prompt is None else self.n_prompt
            s = replace(s, n_prompt=prompt, n_gen=self.n_gen)
        return s

    def short_prompt(self, n_prompt: int = DEFAULT_N_PROMPT, n_gen: int = DEFAULT_N_GEN) -> PredictSettings:
        """A short request at this context (llama-bench's ``-p 512 -n 128`` by default): prefill and TTFT rows."""
        return replace(self.at_context(), n_prompt=max(n_prompt, 1), n_gen=max(n_gen, 0), depth=0)

    def request(self) -> PredictSettings:
        """The asked request (``n_prompt`` then ``n_gen`` tokens after ``depth`` cached ones) in a context that holds
        it: the asked context, or the request rounded up where it is longer."""
        prompt = DEFAULT_N_PROMPT if self.n_prompt is None else self.n_prompt
        need = self.depth + prompt + self.n_gen + 1
        return replace(self.at_context(), n_ctx=max(self.n_ctx, round_context(need)), n_prompt=prompt,
                       n_gen=self.n_gen, depth=self.depth)

    def decode_at(self, depth: float) -> PredictSettings:
        """Decode at KV depth ``depth`` at this placement (:meth:`PredictSettings.decode_at`)."""
        return self.at_context().decode_at(depth)

    def with_placement(self, n_gpu_layers: int, n_cpu_moe: int = 0, type_k: str | None = None) -> Question:
        """The same question at another placement (and KV-cache type, both K and V)."""
        kv = self.type_k if type_k is None else type_k
        return replace(self, n_gpu_layers=n_gpu_layers, n_cpu_moe=n_cpu_moe, type_k=kv,
                       type_v=self.type_v if type_k is None else kv)


def _int(table: Mapping[str, Any], key: str, default: int) -> int:
    try:
        return int(table.get(key, default) if table.get(key) is not None else default)
    except (TypeError, ValueError):
        return default


def run_context(table: Mapping[str, Any]) -> int:
    """The context the runner gives a test (``TestSpec.n_ctx``) from its table of column names: depth + prompt +
    generated (+1) per sequence, times the sequences, rounded up to 256 cells."""
    per_seq = _int(table, "n_depth", 0) + _int(table, "n_prompt", 0) + _int(table, "n_gen", 0) + 1
    return -(-per_seq * max(_int(table, "n_parallel", 1), 1) // 256) * 256


def settings_of(table: Mapping[str, Any], n_ctx: int | None = None) -> PredictSettings:
    """The settings of a test's table (a row as it ran, a curve's point, keyword settings): the one decoder,
    :meth:`PredictSettings.from_test`."""
    return PredictSettings.from_test(table, n_ctx=n_ctx)


def prompt_point(base: PredictSettings, n_prompt: int, depth: int = 0) -> PredictSettings:
    """A prefill curve's point: ``n_prompt`` tokens after ``depth`` cached ones, nothing generated, in the context
    a run gives that test."""
    return replace(base, n_ctx=run_context({"n_prompt": int(n_prompt), "n_depth": depth}),
                   n_prompt=max(int(n_prompt), 1), n_gen=0, depth=depth)


def from_flags(args: argparse.Namespace, margin_bytes: int = DEFAULT_MARGIN_BYTES) -> PredictSettings:
    """``gguf-bench predict``'s flags as asked (-p, -n, -d, -ngl, -ctk…), the device margin kept free."""
    return replace(PredictSettings.from_args(args), device_margin_bytes=margin_bytes)


def memory_at(n_ctx: int) -> PredictSettings:
    """A memory check at ``n_ctx`` (``inspect --dry-run``): every layer offloaded, flash attention on."""
    return PredictSettings(n_ctx=n_ctx, flash_attn=True)


def decode_depth_at(n_ctx: int) -> int:
    """The KV depth the decode figure for a context of ``n_ctx`` tokens is at (:meth:`Question.at_context`'s)."""
    return at_context_depth(at_context(max(int(n_ctx), 1)))


__all__ = ["DEFAULT_MARGIN_BYTES", "DEFAULT_N_CTX", "DEFAULT_N_GEN", "DEFAULT_N_PROMPT", "Question",
           "decode_depth_at", "settings_of", "from_flags", "memory_at", "prompt_point", "round_context",
           "run_context"]

"""The questions every surface asks :func:`app.predict.answer.answer`, built in one place with one set of defaults.

A :class:`Question` is what a user set (context, KV-cache type, placement, the request, the device margin); its
methods turn it into the :class:`PredictSettings` of each standard question, the way llama-bench turns one
``cmd_params_instance`` into the library's parameters in one function (``to_llama_cparams``):

- :meth:`Question.at_context`: the context full (a prompt of the context less the output, then the output), the
  figure the inspector, the chooser and ``predict``'s "at a full context" line show;
- :meth:`Question.short_prompt`: llama-bench's default prompt (``-p 512``) at that context: the prefill and TTFT rows;
- :meth:`Question.request`: one request of the asked prompt and output from an empty cache (the scenario panel,
  ``predict -p/-n``);
- :meth:`Question.decode_at`: decode at a depth (the plots' curves).

The CLI (``predict``, ``choose``), the inspector, the scenario panel, the plots and the chooser window build their
questions here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.predict.memory.buffers import KV_CELL_PAD
from app.predict.memory.fit import DEFAULT_DEVICE_MARGIN_BYTES
from app.predict.settings import REPACK_AUTO, PredictSettings, at_context

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
    (``n_gpu_layers`` 999: all layers; ``n_cpu_moe``; ``no_kv_offload``), the request (``n_prompt`` then ``n_gen``
    tokens), the device memory left free (``margin_bytes``), and the run's CPU threads and repacking."""

    n_ctx: int = DEFAULT_N_CTX
    type_k: str = "f16"
    type_v: str | None = None
    n_gpu_layers: int = 999
    n_cpu_moe: int = 0
    no_kv_offload: bool = False
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
                                    no_kv_offload=self.no_kv_offload))
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


__all__ = ["DEFAULT_MARGIN_BYTES", "DEFAULT_N_CTX", "DEFAULT_N_GEN", "DEFAULT_N_PROMPT", "Question", "round_context"]

"""Next-token log-probabilities of a chunk of text through llama.cpp, for perplexity and KL divergence. Worker only.

A chunk is evaluated as llama.cpp's perplexity tool does (tools/perplexity/perplexity.cpp, perplexity()): the KV
cache cleared, the chunk's first token replaced by BOS when the model adds one, the tokens decoded in ``n_batch``
pieces with logits requested only from position ``first`` on. The logits come back as float32 numpy rows.
"""

from __future__ import annotations

import ctypes

import numpy as np

from engines.base import ContextConfig, DecodeError, LoadConfig, LoadedModel
from engines.llama_cpp_engine import (
    LlamaCppEngine,
    lc,  # the one module that imports llama_cpp
)
from engines.llama_log import last_error


class LlamaCppLogits(LlamaCppEngine):
    """The llama.cpp engine, with a context sized for scoring chunks and raw logits out."""

    def open(self, model_path: str, n_ctx: int, n_threads: int = 0, n_gpu_layers: int = 0,
             repack: int = 1) -> LoadedModel:
        """Load ``model_path`` (weights repacked for extra buffer types when ``repack``) and build a context of
        ``n_ctx`` tokens (one chunk; batches of up to 512)."""
        loaded = self.load(LoadConfig(model_path=model_path, n_gpu_layers=n_gpu_layers, use_extra_bufts=bool(repack)))
        n_batch = min(n_ctx, 512)
        self.new_context(ContextConfig(n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=n_threads))
        return loaded

    def bos_token(self) -> int | None:
        """The BOS token when the model adds one at the start of a text (as the perplexity tool checks), else None."""
        if self._vocab is None or not lc.llama_vocab_get_add_bos(self._vocab):
            return None
        return int(lc.llama_vocab_bos(self._vocab))

    def chunk_logits(self, tokens: list[int], first: int) -> np.ndarray:
        """Logits (float32, shape ``(len(tokens) - first, n_vocab)``) at positions ``first`` .. end of one chunk.

        Row ``i`` is the model's prediction for the token at position ``first + i + 1``.
        """
        if self._ctx is None or self._ctx_cfg is None:
            raise DecodeError("no context")
        if not 0 <= first < len(tokens) <= self._ctx_cfg.n_ctx:
            raise DecodeError(f"chunk of {len(tokens)} tokens (scored from {first}) does not fit the context")
        lc.llama_memory_clear(lc.llama_get_memory(self._ctx), True)
        items = [(tok, pos, 0, pos >= first) for pos, tok in enumerate(tokens)]
        n_vocab = self._n_vocab
        out = np.empty((len(tokens) - first, n_vocab), dtype=np.float32)
        done = 0
        batches = self._batches(items, self._ctx_cfg.n_batch)
        try:
            for batch in batches:
                rc = lc.llama_decode(self._ctx, batch)
                if rc != 0:
                    raise DecodeError(f"llama_decode failed scoring a chunk (code {rc}): {last_error('no detail')}")
                n_out = sum(1 for i in range(batch.n_tokens) if batch.logits[i])
                if n_out:
                    ptr = ctypes.cast(lc.llama_get_logits(self._ctx), ctypes.POINTER(ctypes.c_float))
                    out[done : done + n_out] = np.ctypeslib.as_array(ptr, shape=(n_out, n_vocab))
                    done += n_out
        finally:
            for batch in batches:
                lc.llama_batch_free(batch)
        return out

"""The worker's quality job: the reference's next-token distributions once, then every other file against them.

The text is cut into chunks of ``n_ctx`` tokens, each scored on its second half (llama.cpp's perplexity tool).
The reference's log-probabilities go to a float16 memmap in the job's temporary folder, chunk by chunk, and are read
back one chunk at a time while each other file is scored, so memory holds one chunk's logits whatever the budget.
Events: TestStarted / JobProgress (per chunk) / TestFinished or TestFailed per file, then SweepFinished.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from app.quality.plan import CHARS_PER_TOKEN_BOUND
from app.quality.scores import QualityAccumulator, log_softmax
from app.results.fields import RowStatus
from app.results.row_types import QualityRow
from app.run.events import (
    Event,
    FailureKind,
    JobItem,
    JobProgress,
    SweepFinished,
    TestFailed,
    TestFinished,
    TestStarted,
)

Emit = Callable[[Event], None]
#: Characters of the text every file must tokenize exactly as the reference does.
TOKENIZER_SAMPLE_CHARS = 4096


def _now() -> int:
    return time.perf_counter_ns()


class QualityError(Exception):
    """A file cannot be scored; str() is the row's error."""


class QualityJob:
    """Scores the job's files; ``request_cancel`` (from the signal handler) stops after the chunk under way."""

    def __init__(self, job: dict[str, Any], emit: Emit) -> None:
        from engines.llama_cpp_logits import LlamaCppLogits  # the worker owns the native library

        self._engine_class = LlamaCppLogits
        self.models: list[str] = list(job["models"])
        self.ref_index = int(job["reference_index"])
        self.text_path = str(job["text_path"])
        self.n_tokens = int(job["n_tokens"])
        self.n_ctx = int(job["n_ctx"])
        self.n_threads = int(job.get("n_threads", 0))
        self.repack = int(job.get("repack", 1))  # llama.cpp's weight repacking (use_extra_bufts)
        self.tmp_dir = str(job["tmp_dir"])
        self.run_id = str(job.get("run_id", ""))
        self.log_path = job.get("log_path")
        self.emit = emit
        self.cancel_requested = False
        self.chunks: list[list[int]] = []
        self.ref_logp: np.memmap | None = None
        self.ref_top: np.ndarray | None = None
        self.n_vocab = 0
        self.sample_text = ""
        self.sample_tokens: list[int] = []

    def request_cancel(self) -> None:
        self.cancel_requested = True

    @property
    def first(self) -> int:
        """Position from which a chunk is scored: its second half (the perplexity tool's ``first = n_ctx/2``)."""
        return self.n_ctx // 2

    def run(self) -> int:
        order = [self.ref_index] + [i for i in range(len(self.models)) if i != self.ref_index]
        n_ok = n_failed = 0
        ref_error = ""
        for index in order:
            if self.cancel_requested:
                break
            ok = self.one(index, ref_error)
            if index == self.ref_index and not ok:
                ref_error = "the reference could not be scored"
            n_ok, n_failed = n_ok + ok, n_failed + (not ok)
        self.emit(SweepFinished(t_ns=_now(), n_ok=n_ok, n_failed=n_failed, cancelled=self.cancel_requested))
        return 0 if n_failed == 0 else 1

    def one(self, index: int, ref_error: str) -> bool:
        path = self.models[index]
        self.emit(TestStarted(t_ns=_now(), test_index=index, test=JobItem({"model_path": path})))
        row = QualityRow(run_id=self.run_id, model_index=index, model_path=path, n_ctx=self.n_ctx,
                         is_reference=index == self.ref_index)
        t0 = time.perf_counter()
        try:
            if ref_error:
                raise QualityError(ref_error)
            row = row.replace(**self._score(index, path))
        except Exception as e:  # noqa: BLE001 - engine errors, a short text, a different vocabulary: a failed row
            reason = str(e) or e.__class__.__name__
            row = row.replace(status=RowStatus.FAILED, error=reason, elapsed_s=round(time.perf_counter() - t0, 3))
            self.emit(TestFailed(t_ns=_now(), test_index=index, reason=reason, row=row,
                                 kind=FailureKind.ENGINE_ERROR))
            return False
        row = row.replace(status=RowStatus.OK, error="", elapsed_s=round(time.perf_counter() - t0, 3))
        self.emit(TestFinished(t_ns=_now(), test_index=index, row=row))
        return True

    def _score(self, index: int, path: str) -> dict[str, Any]:
        engine = self._engine_class(log_path=self.log_path)
        try:
            loaded = engine.open(path, self.n_ctx, self.n_threads, repack=self.repack)
            is_ref = index == self.ref_index
            if is_ref:
                self._prepare(engine, loaded.n_vocab)
            elif loaded.n_vocab != self.n_vocab:
                raise QualityError(f"vocabulary of {loaded.n_vocab} tokens, the reference has {self.n_vocab}: "
                                   "not the same model")
            elif engine.tokenize(self.sample_text) != self.sample_tokens:
                raise QualityError("its tokenizer splits the text differently from the reference's (same vocabulary "
                                   "size, other tokens): not the same model")
            acc, eval_s = self._chunks(engine, index, is_ref)
        finally:
            engine.close()
        out: dict[str, Any] = {"n_chunks": len(self.chunks), **acc.summary()}
        if is_ref:
            out.update(mean_kld=0.0, mean_kld_err=0.0, kld_p99=0.0, same_top_rate=1.0)
        out["tokens_per_s"] = round(len(self.chunks) * self.n_ctx / eval_s, 2) if eval_s > 0 else None
        return out

    def _prepare(self, engine: Any, n_vocab: int) -> None:
        """Tokenize the text with the reference's vocabulary, cut the chunks, and open the reference memmap."""
        with open(self.text_path, encoding="utf-8") as f:
            text = f.read(self.n_tokens * CHARS_PER_TOKEN_BOUND + 4096)
        tokens = engine.tokenize(text)
        # every other file must split this sample into the same tokens: a vocabulary of the same size is not enough
        self.sample_text = text[:TOKENIZER_SAMPLE_CHARS]
        self.sample_tokens = engine.tokenize(self.sample_text)
        n_chunks = min(len(tokens) // self.n_ctx, max(1, self.n_tokens // self.n_ctx))
        if n_chunks < 1:
            raise QualityError(f"the text gives {len(tokens)} tokens; one chunk needs {self.n_ctx} (--ctx)")
        bos = engine.bos_token()
        self.chunks = []
        for c in range(n_chunks):
            chunk = tokens[c * self.n_ctx : (c + 1) * self.n_ctx]
            if bos is not None:
                chunk[0] = bos
            self.chunks.append(chunk)
        self.n_vocab = n_vocab
        n_rows = n_chunks * (self.n_ctx - 1 - self.first)
        self.ref_logp = np.memmap(os.path.join(self.tmp_dir, "reference-logp.f16"), dtype=np.float16, mode="w+",
                                  shape=(n_rows, n_vocab))
        self.ref_top = np.empty(n_rows, dtype=np.int32)

    def _chunks(self, engine: Any, index: int, is_ref: bool) -> tuple[QualityAccumulator, float]:
        """Every chunk through ``engine``: the reference's rows stored, another file's compared with them."""
        acc = QualityAccumulator()
        assert self.ref_logp is not None and self.ref_top is not None
        per = self.n_ctx - 1 - self.first
        eval_s = 0.0
        for c, chunk in enumerate(self.chunks):
            if self.cancel_requested:
                raise QualityError("cancelled")
            t0 = time.perf_counter()
            logits = engine.chunk_logits(chunk, self.first)[:per]
            eval_s += time.perf_counter() - t0
            logp = log_softmax(logits)
            del logits
            targets = np.asarray(chunk[self.first + 1 :], dtype=np.int64)
            rows = slice(c * per, (c + 1) * per)
            if is_ref:
                self.ref_logp[rows] = logp
                self.ref_top[rows] = logp.argmax(axis=1)
                acc.add(logp, targets)
            else:
                acc.add(logp, targets, np.asarray(self.ref_logp[rows], dtype=np.float32), self.ref_top[rows])
            self.emit(JobProgress(t_ns=_now(), item_index=index, done=c + 1, total=len(self.chunks)))
        if is_ref:
            self.ref_logp.flush()
        return acc, eval_s

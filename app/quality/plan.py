"""What ``gguf-bench quality`` will score, checked before the worker starts: files, reference, text, budget.

The reference is the highest-precision file of the set that was not requantized (most bits per weight, the first
given on a tie, among the files without ``workbench.requantized_from`` in their header) unless one is named: a file
made from a quantized one carries its source's loss, however many bits it spends, so it is never the yardstick
while an original file is in the set. When every file was requantized the most bits win, and each row's
``reference_requantized_from`` says what the reference was made from. The default text is the documentation
that ships with every Python (``pydoc_data.topics``: the language reference's topics, sorted by name), so the
measurement runs offline and the same everywhere.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bounded_read import NotARegularFile, read_prefix_text
from app.model.facts import ModelFacts
from app.model.facts_cache import cached_facts
from app.model.gguf_facts import GGUFFileError
from app.model.lineage import UNQUANTIZED, requantized_from
from app.results.quality_store import model_key

DEFAULT_TEXT_SOURCE = "python-docs"
DEFAULT_N_TOKENS = 2048
DEFAULT_N_CTX = 512
MIN_N_CTX = 16
MAX_N_TOKENS = 1_048_576


class QualitySetupError(ValueError):
    """The quality command cannot start; str() is one line naming the file or value and the cause."""


def python_docs_text() -> str:
    """The built-in text: every topic of the Python language reference that ships with Python, sorted by name."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[name].strip() for name in sorted(topics))


@dataclass(frozen=True)
class QualityPlan:
    models: tuple[str, ...]
    facts: tuple[ModelFacts, ...]
    reference_index: int
    text_source: str  # DEFAULT_TEXT_SOURCE or the text file's path
    n_tokens: int
    n_ctx: int
    n_threads: int = 0

    @property
    def reference(self) -> str:
        return self.models[self.reference_index]

    def text(self) -> str:
        """The text the run scores: only as much of the file as ``n_tokens`` can use (a 1.5 GB corpus costs MiBs)."""
        if self.text_source == DEFAULT_TEXT_SOURCE:
            return python_docs_text()
        return read_prefix_text(self.text_source, text_bytes_needed(self.n_tokens))

    def file_columns(self, index: int) -> dict[str, Any]:
        """The columns of a row that come from the files' headers (identity, type, size, lineage, reference)."""
        facts, ref = self.facts[index], self.facts[self.reference_index]
        ref_origin = requantized_from(ref)
        return {
            "model_path": facts.path, "model_filename": Path(facts.path).name, "file_type": facts.file_type,
            "bits_per_weight": round(facts.bits_per_weight, 4), "model_size": facts.file_bytes,
            "model_key": model_key(facts.path), "reference_path": ref.path,
            "reference_filename": Path(ref.path).name,
            "reference_is_dequantized": bool(ref_origin) and ref.file_type in UNQUANTIZED,
            "reference_requantized_from": ref_origin,
            "requantized_from": requantized_from(facts),
            "text_source": self.text_source, "n_ctx": self.n_ctx, "is_reference": index == self.reference_index,
        }


def _facts(path: str) -> ModelFacts:
    try:
        return cached_facts(path)
    except GGUFFileError as e:
        raise QualitySetupError(str(e)) from None


#: Characters of text tokenized per token wanted (English prose and docs run at about 4 per token).
CHARS_PER_TOKEN_BOUND = 8


def text_bytes_needed(n_tokens: int) -> int:
    """Bytes of ``--text`` a run of ``n_tokens`` can use: CHARS_PER_TOKEN_BOUND characters a token, 4 bytes at most
    a character, and a margin."""
    return (n_tokens * CHARS_PER_TOKEN_BOUND + 4096) * 4


def _check_text(text: str, n_tokens: int) -> str:
    p = Path(text).expanduser()
    try:
        sample = read_prefix_text(p, text_bytes_needed(n_tokens))  # all the run will read, checked as UTF-8
    except NotARegularFile as e:  # the prefix read has no size to refuse
        raise QualitySetupError(f"--text {text}: {str(e).split(': ', 1)[-1]}") from None
    except (OSError, UnicodeDecodeError) as e:
        cause = e.strerror if isinstance(e, OSError) and e.strerror else e.__class__.__name__
        raise QualitySetupError(f"--text {text}: cannot read it as UTF-8 text ({cause})") from None
    if not sample.strip():
        raise QualitySetupError(f"--text {text}: the file holds no text")
    return str(p.resolve())


def reference_scratch_bytes(n_tokens: int, n_ctx: int, n_vocab: int) -> int:
    """Bytes of the reference's float16 log-probabilities on disk: every scored token × the vocabulary × 2."""
    n_chunks = max(1, n_tokens // n_ctx)
    return n_chunks * (n_ctx - 1 - n_ctx // 2) * n_vocab * 2


def _check_scratch_space(n_tokens: int, n_ctx: int, n_vocab: int) -> None:
    need = reference_scratch_bytes(n_tokens, n_ctx, n_vocab)
    tmp = tempfile.gettempdir()
    free = shutil.disk_usage(tmp).free
    if need > free:
        raise QualitySetupError(f"--tokens {n_tokens}: the reference's log-probabilities need {need / 2**30:.1f} GiB "
                                f"in {tmp} ({free / 2**30:.1f} GiB free); lower --tokens or set TMPDIR")


def default_reference(facts: tuple[ModelFacts, ...]) -> int:
    """Index of the default reference: the most bits per weight among the files not requantized (first on a tie);
    among all files when every one was requantized."""
    original = [i for i, f in enumerate(facts) if not requantized_from(f)]
    pool = original or list(range(len(facts)))
    best = max(facts[i].bits_per_weight for i in pool)
    return next(i for i in pool if facts[i].bits_per_weight == best)


def plan_quality(models: list[str], *, ref: str | None = None, text: str | None = None,
                 n_tokens: int = DEFAULT_N_TOKENS, n_ctx: int = DEFAULT_N_CTX, n_threads: int = 0) -> QualityPlan:
    """The files, the reference and the budget, after every check; QualitySetupError (one line) when one fails."""
    paths = [str(Path(m).expanduser().resolve()) for m in models]
    if ref is not None:
        ref_path = str(Path(ref).expanduser().resolve())
        if ref_path not in paths:
            paths.insert(0, ref_path)
    if not paths:
        raise QualitySetupError("no model given (-m FILE, repeated: the reference and the files to compare)")
    facts = tuple(_facts(p) for p in paths)
    if ref is not None:
        ref_index = paths.index(ref_path)
    else:
        ref_index = default_reference(facts)
    n_train = facts[ref_index].n_ctx_train
    if not MIN_N_CTX <= n_ctx <= max(n_train, MIN_N_CTX):
        raise QualitySetupError(f"--ctx {n_ctx}: must be between {MIN_N_CTX} and the reference's trained context "
                                f"({n_train})")
    if not n_ctx <= n_tokens <= MAX_N_TOKENS:
        raise QualitySetupError(f"--tokens {n_tokens}: must be between --ctx ({n_ctx}) and {MAX_N_TOKENS}")
    source = _check_text(text, n_tokens) if text else DEFAULT_TEXT_SOURCE
    _check_scratch_space(n_tokens, n_ctx, facts[ref_index].n_vocab)
    return QualityPlan(tuple(paths), facts, ref_index, source, n_tokens, n_ctx, n_threads)

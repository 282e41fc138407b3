"""What a GGUF header claims, checked before llama.cpp's dry run sees it, and the memory limit of the dry run's child.

Under ``no_alloc`` llama.cpp allocates no weight and no KV cache, but it does allocate, for real: the recurrent state
of every recurrent layer (``failed to allocate buffer for rs cache`` is what a limit makes it say), its vocabulary
(one entry per token, ``vocab_size`` dummy entries for a ``none`` tokenizer), a metadata entry per tensor, and a
cell table per context. A crafted header costs nothing on disk (a sparse hole where the weights would be) yet can
claim any of these: a 24 KB file with ``ssm.state_size`` 4,194,304 made the child allocate 2 GiB per context. So:

- each claim is held to the file (a vocabulary larger than the embedding's rows is not the file's) and to a
  limit far above every published model (:func:`claims_problem`, one line naming the claim);
- the child runs under a data-segment limit sized from what the checked claims need
  (:func:`child_memory_limit_bytes`): whatever a check missed, llama.cpp's allocation fails inside the child and
  the parent reports it in one line.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.model.facts import ModelFacts

MIB = 1 << 20
#: Tensors in one file: the largest published models have a few thousand (Llama 3.1 405B: 1,138).
MAX_TENSORS = 1 << 16
#: Vocabulary entries: the largest published vocabularies have 262,144 (Gemma 3).
MAX_VOCAB = 1 << 21
#: A trained context: the longest published is 10,485,760 tokens (Llama 4 Scout); the dry run sizes at most this.
MAX_CONTEXT_TOKENS = 1 << 24
#: The recurrent state of one sequence: the largest published, Falcon-H1-34B (72 layers of 32 Mamba-2 heads of 128
#: values by a state of 256, Hugging Face's FalconH1 model table), holds 288 MiB of f32.
MAX_STATE_BYTES = 512 * MIB
#: The child's own share: the interpreter, llama.cpp, the vocabulary, the tensor metadata and each context's graph
#: (most of it reserved, never written). The 19 shapes of tests/arch_ggufs.py peak at 131 to 360 MiB of data at
#: 131,072 tokens, qwen3-next at 744 MiB.
CHILD_BASE_BYTES = 1024 * MIB
#: Data llama.cpp keeps per context cell under no_alloc (a 16M-token context took 882 MiB: about 52 bytes a cell).
CELL_BYTES = 64


def claims_problem(facts: ModelFacts) -> str:
    """Why llama.cpp's dry run must not be started on this header (one line naming the claim), or ""."""
    arch = facts.architecture
    n_tensors = sum(s.n_tensors for s in facts.tensor_types.values())
    if n_tensors > MAX_TENSORS:
        return f"the header lists {n_tensors:,} tensors (more than {MAX_TENSORS:,}, far above any published model)"
    if facts.n_vocab > MAX_VOCAB:
        return (f"the header claims a vocabulary of {facts.n_vocab:,} tokens (more than {MAX_VOCAB:,}, far above any "
                f"published model)")
    embd = facts.tensor_shapes.get("token_embd.weight")
    if embd is not None and len(embd[1]) >= 2 and facts.n_vocab > embd[1][1]:  # more than the file's embedding backs
        return (f"the header claims a vocabulary of {facts.n_vocab:,} tokens but token_embd.weight has "
                f"{embd[1][1]:,} rows")
    if facts.n_ctx_train > MAX_CONTEXT_TOKENS:
        return (f"{arch}.context_length claims {facts.n_ctx_train:,} tokens (more than {MAX_CONTEXT_TOKENS:,}, far "
                f"above any published model)")
    if facts.state_bytes > MAX_STATE_BYTES:
        return (f"the header claims a recurrent state of {facts.state_bytes / MIB:,.0f} MiB per sequence "
                f"({facts.state_r:,} + {facts.state_s:,} f32 values on each of {len(facts.recurrent_layers):,} "
                f"layers), more than {MAX_STATE_BYTES // MIB:,} MiB (published models hold at most about 300 MiB)")
    return ""


def child_memory_limit_bytes(facts: ModelFacts | None, contexts: Iterable[int]) -> int:
    """The data-segment limit of a dry run of ``facts``' file at contexts of ``contexts`` tokens: the child's own
    share, the recurrent state the header claims (checked by :func:`claims_problem`) and the largest context's cells.
    Contexts are sized one after the other, so only the largest counts."""
    state = min(facts.state_bytes, MAX_STATE_BYTES) if facts is not None else MAX_STATE_BYTES
    return CHILD_BASE_BYTES + state + CELL_BYTES * max(contexts, default=0)

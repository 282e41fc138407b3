"""The row a test starts from: the columns known before anything runs."""

from __future__ import annotations

import os
from typing import Any

from app.results.store import now_iso
from app.run.plan import TestSpec


def base_row(test: TestSpec, test_index: int, run_id: str = "") -> dict[str, Any]:
    """The columns known before anything runs; a failed test keeps exactly these plus the error."""
    return {
        "run_id": run_id,
        "test_index": test_index,
        "status": "pending",
        "error": "",
        "model_path": test.model_path,
        "model_filename": os.path.basename(test.model_path),
        "n_prompt": test.n_prompt,
        "n_gen": test.n_gen,
        "n_depth": test.n_depth,
        "n_batch": test.n_batch,
        "n_ubatch": test.n_ubatch,
        "n_threads": test.n_threads,
        "type_k": test.type_k,
        "type_v": test.type_v,
        "n_gpu_layers": test.n_gpu_layers,
        "flash_attn": int(test.flash_attn),
        "use_mmap": 1,
        "n_parallel": test.n_parallel,
        "n_repetitions": test.repetitions,
        "prompt_file": os.path.basename(test.prompt_file) if test.prompt_file else "",
        "n_ctx": test.n_ctx,
        "test_time": now_iso(),
    }

"""The row a test starts from: the columns known before anything runs."""

from __future__ import annotations

import os

from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.results.store import now_iso
from app.run.params import PARAMS
from app.run.plan import TestSpec


def base_row(test: TestSpec, test_index: int, run_id: str = "") -> ResultRow:
    """The columns known before anything runs; a failed test keeps exactly these plus the error.

    Every parameter of params.PARAMS is copied under its row column (``flash_attn``: -1 auto, 0 off, 1 on).
    """
    settings = {p.row_column: getattr(test, p.name) for p in PARAMS}
    row = ResultRow(run_id=run_id, test_index=test_index, status=RowStatus.PENDING, error="",
                    model_path=test.model_path, model_filename=os.path.basename(test.model_path), **settings,
                    use_mmap=1, n_ctx=test.n_ctx, test_time=now_iso())
    return row.replace(prompt_file=os.path.basename(test.prompt_file) if test.prompt_file else "")  # its name only

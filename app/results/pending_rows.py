"""Store writes that could not be committed (store locked too long, disk full), kept in a JSONL side file.

Each line is one write (``begin``, ``software``, ``result``, ``finish`` or ``quality``) as a JSON object. The
store appends a write here when its retries are spent and replays the file, in order, the next time it opens (or
before its next write), so a finished test is never lost to a store that was briefly unwritable. Replaying is
idempotent: a run is inserted only if missing, a result (or quality row) replaces the same (run, test) row.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from app.atomic import write_text_atomic
from app.results.row_types import QualityRow, ResultRow

Write = dict[str, Any]


def apply_write(db: sqlite3.Connection, w: Write) -> None:
    """Execute one write on ``db`` (inside the caller's transaction)."""
    op = w["op"]
    if op == "begin":
        db.execute(
            "INSERT OR IGNORE INTO runs (run_id, created_at, status, sweep_name, command, n_tests, machine_json, "
            "software_json, tests_json, writer_pid, writer_scope) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
            (w["run_id"], w["created_at"], w["sweep_name"], w["command"], len(w["tests"]), json.dumps(w["machine"]),
             json.dumps(w["software"]), json.dumps(w["tests"]), w["writer_pid"], w["writer_scope"]))
    elif op == "software":
        db.execute("UPDATE runs SET software_json = ? WHERE run_id = ?", (json.dumps(w["software"]), w["run_id"]))
    elif op == "result":
        row = ResultRow.from_mapping(w["row"])  # a side file's line is read back like a stored row
        db.execute(
            "INSERT OR REPLACE INTO results (run_id, test_index, status, model_filename, created_at, row_json) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (w["run_id"], -1 if row.test_index is None else row.test_index, row.status or "", row.model_filename,
             w["created_at"], json.dumps(row.to_mapping(), ensure_ascii=False)))
    elif op == "finish":
        db.execute("UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?",
                   (w["finished_at"], w["status"], w["run_id"]))
    elif op == "quality":  # one file's measured quality (``quality_store``), replacing the same run and index
        quality = QualityRow.from_mapping(w["row"])
        if quality.run_id is None or quality.model_index is None:
            raise ValueError("a quality row needs run_id and model_index")
        db.execute("INSERT OR REPLACE INTO quality (run_id, model_index, created_at, model_path, model_filename, "
                   "model_key, status, row_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (quality.run_id, quality.model_index, w["created_at"], quality.model_path or "",
                    quality.model_filename or "", quality.model_key or "", quality.status or "",
                    json.dumps(quality.to_mapping(), ensure_ascii=False)))
    else:
        raise ValueError(f"unknown store write {op!r}")


class PendingRows:
    """The side file of one store: ``<store file name>.pending-rows.jsonl`` beside it."""

    def __init__(self, store_path: Path) -> None:
        self.path = store_path.with_name(store_path.name + ".pending-rows.jsonl")

    def exists(self) -> bool:
        return self.path.is_file()

    def append(self, write: Write) -> None:
        """Add one write; raises OSError if even the side file cannot be written (the disk is full)."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(write, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def take(self) -> tuple[list[Write], int]:
        """Claim every kept write (the file is moved away first, so two openers never replay the same lines).

        Returns the writes in order and how many lines were unreadable (skipped).
        """
        claimed = self.path.with_name(f"{self.path.name}.{os.getpid()}.replaying")
        try:
            os.replace(self.path, claimed)
            text = claimed.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return [], 0
        writes: list[Write] = []
        bad = 0
        for line in text.splitlines():
            try:
                w = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, or nested too deeply to read: a line hand-edited
                bad += 1
                continue
            if isinstance(w, dict) and isinstance(w.get("op"), str):
                writes.append(w)
            elif line.strip():
                bad += 1
        claimed.unlink(missing_ok=True)
        return writes, bad

    def put_back(self, writes: list[Write]) -> None:
        """Writes claimed by ``take`` that could not be replayed go back, ahead of any appended since."""
        later = self.path.read_text(encoding="utf-8") if self.path.is_file() else ""
        text = "".join(json.dumps(w, ensure_ascii=False) + "\n" for w in writes) + later
        write_text_atomic(self.path, text, own_file=True)

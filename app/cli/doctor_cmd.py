"""``gguf-bench doctor [--json]``: which backends and devices llama.cpp has, which GPUs the machine has, the fix.

Exit 0 when llama.cpp can use what the machine has (or the machine has no GPU); 1 when there is a fix to make
(a GPU the build cannot use) or llama.cpp could not be asked.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.errors import EXIT_OK, EXIT_TESTS_FAILED
from app.cli.json_docs import SCHEMA_VERSIONS, json_text
from app.doctor.report import Level, report_text, run_doctor

HELP = "which llama.cpp backends/devices and which GPUs this machine has, and the command that fixes a mismatch"


def cmd_doctor(args: argparse.Namespace) -> int:
    report = run_doctor()
    if args.json:
        print(json_text(report.to_json(), SCHEMA_VERSIONS["doctor"], indent=2, ensure_ascii=False))
    else:
        print(report_text(report))
    needs_fix = any(a.level in (Level.FIX, Level.ERROR) for a in report.advice)
    return EXIT_TESTS_FAILED if needs_fix else EXIT_OK


def add_doctor_parser(sub: Any) -> None:
    """Register ``doctor`` on the subcommand parsers of ``gguf-bench``."""
    p = sub.add_parser("doctor", help=HELP, description=__doc__)
    p.add_argument("--json", action="store_true", help="one JSON object: llama_cpp, machine_gpus, advice")
    p.set_defaults(func=cmd_doctor)

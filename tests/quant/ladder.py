"""A quantization ladder of SmolLM2 built once per test session: an F16 reference and six variants made from it.

SmolLM2's packaged file is Q4_1, so the reference is an F16 *dequantized* from it (``--allow-requantize``): the
ladder's files all record ``requantized_from=Q4_1`` and quality rows say ``reference_is_dequantized``. Against
that F16, quality falls with bits per weight as it would against a true F16 (the variants lose precision on
top of the Q4_1 values the reference holds exactly, up to F16 rounding).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: The variants, highest precision first (their bits per weight fall in this order).
LADDER_TYPES = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k")


def _quantize(data_dir: Path, *args: str) -> None:
    """``gguf-bench quantize ARGS`` with its own data dir (a session fixture runs before any test's isolation)."""
    env = {**os.environ, "GGUF_WORKBENCH_DATA_DIR": str(data_dir)}
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "quantize", *args, "-q"], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr


def build_ladder(src: Path, out: Path) -> dict[str, Path]:
    """``{"f16": reference, "q8_0": ..., ...}``: the reference from ``src``, then the variants from the reference."""
    data = out / "data"
    _quantize(data, "-m", str(src), "--types", "f16", "--out", str(out), "--allow-requantize")
    ref = next(out.glob("*.F16.gguf"))
    _quantize(data, "-m", str(ref), "--types", ",".join(LADDER_TYPES), "--out", str(out))
    files = {"f16": ref}
    for name in LADDER_TYPES:
        files[name] = next(out.glob(f"*.{name.upper()}.gguf"))
    return files

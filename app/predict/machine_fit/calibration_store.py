"""Where a machine's fit lives: one JSON file per (CPU, GPU, llama.cpp build) in the data dir.

Saving writes a temporary file and renames it, keeping the file it replaces as ``.prev``; a file that cannot be
read (damaged, another version) counts as no fit. Nothing here imports llama.cpp: the build is named from the
installed llama-cpp-python's version and the backend libraries beside it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from app.atomic import write_text_atomic
from app.bounded_read import read_bounded_text
from app.paths import data_dir
from app.predict.machine_fit.calibration_fit import FIT_VERSION, MachineFit
from app.telemetry.llama_build import engine_version, llama_build

__all__ = ["engine_version", "fit_path", "llama_build", "load_fit", "read_fit", "save_fit", "saved_fit_problem"]


def fit_path(cpu_info: str, gpu_info: str, build: str) -> Path:
    """``<data dir>/calibration/fit-<hash of machine and build>.json``."""
    digest = hashlib.sha256("\n".join((cpu_info, gpu_info, build)).encode("utf-8")).hexdigest()[:16]
    return data_dir() / "calibration" / f"fit-{digest}.json"


def save_fit(fit: MachineFit) -> Path:
    """Write ``fit`` whole (temporary file, rename); the fit it replaces is kept as ``.prev``."""
    path = fit_path(fit.cpu_info, fit.gpu_info, fit.build)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file():  # copied, not moved: readers always find a whole fit at ``path``
        shutil.copy2(path, path.with_name(path.name + ".prev"))
    return write_text_atomic(path, json.dumps(fit.to_json_dict(), indent=1), own_file=True)


def load_fit(cpu_info: str, gpu_info: str, build: str | None = None) -> MachineFit | None:
    """The saved fit of this machine and build (default: the installed one), or None."""
    return read_fit(cpu_info, gpu_info, build)[0]


def saved_fit_problem(cpu_info: str, gpu_info: str, build: str | None = None) -> str | None:
    """One line saying why a saved fit of this machine and build is not used (another version, damaged), or None
    when there is none or it is read."""
    return read_fit(cpu_info, gpu_info, build)[1]


def read_fit(cpu_info: str, gpu_info: str, build: str | None = None) -> tuple[MachineFit | None, str | None]:
    """(the saved fit or None, why a saved file is not used or None), from one read of the file."""
    path = fit_path(cpu_info, gpu_info, build if build is not None else llama_build())
    try:
        doc = json.loads(read_bounded_text(path))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, RecursionError) as e:
        return None, f"{path}: the saved fit cannot be read ({e}); run gguf-bench calibrate again"
    version = doc.get("version") if isinstance(doc, dict) else None
    if version != FIT_VERSION:
        return None, (f"{path}: a fit of an older form (version {version!r}, this program reads {FIT_VERSION}); "
                      "run gguf-bench calibrate again")
    try:
        fit = MachineFit.from_json_dict(doc)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        return None, f"{path}: the saved fit is damaged ({type(e).__name__}: {e}); run gguf-bench calibrate again"
    return (fit, None) if (fit.cpu_info, fit.gpu_info) == (cpu_info, gpu_info) else (None, None)

"""The repack crash guard: is llama.cpp's weight repacking safe on this CPU and build? Probed once, remembered.

On Intel CPUs with AMX, llama.cpp puts the weights of every type with AMX kernels (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K,
Q6_K, IQ4_XS) into its ``AMX`` extra buffer type when repacking is on (``use_extra_bufts``, llama-bench's
``--repack 1``, the default), and the first prefill of more than one token dies by SIGSEGV (llama.cpp issue
#20824). A benchmark must not be the thing that crashes, so before the first model load on a machine and
llama.cpp build not checked yet, a child process (``python -m app.worker.repack_probe``) loads a tiny Q4_0 model
with repacking on and prefills 32 tokens. If the child dies by a signal, this machine's default becomes repack 0;
the verdict is kept in the data dir per (llama.cpp build, CPU model and flags) and a user's explicit
``--repack 1`` is still obeyed.

This module only reads and writes the verdict and starts the child; it never loads llama.cpp itself.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from app.atomic import write_text_atomic
from app.bounded_read import read_bounded_text
from app.paths import REPO_ROOT, absolute_path_env, data_dir
from app.telemetry.cpu_features import cpuinfo_flags
from app.telemetry.cpu_identity import cpuinfo_path, read_cpuinfo
from app.telemetry.host import cpu_model
from engines.ggml_devices import find_lib_dir

VERDICT_FILE = "repack-guard.json"
FORMAT_VERSION = 1
#: The child's limit: it loads a 2-layer model and prefills 32 tokens (well under a second where it works; the
#: first start after an install also imports llama_cpp, a few seconds on a busy 2-core machine).
PROBE_TIMEOUT_S = 120.0
ISSUE = "llama.cpp issue #20824"
#: The worker's test-double switch (app.worker.engines.TEST_DOUBLE_ENV; named here, the telemetry layer is below it).
TEST_DOUBLE_ENV = "GGUF_WORKBENCH_TEST_DOUBLE"
#: Weight types with kernels in ggml's AMX buffer (ggml-cpu/amx/common.h, qtype_has_amx_kernels).
AMX_WEIGHT_TYPES = frozenset({"Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"})


@dataclass(frozen=True)
class RepackVerdict:
    """What the probe found for one (llama.cpp build, CPU) pair."""

    key: str
    safe: bool | None  # True: the probe ran with repacking on; False: it died by a signal; None: not checked
    default_repack: int  # the machine's default for ``--repack auto``: 1, or 0 when not safe
    extra_buffers: tuple[str, ...] = ()  # the CPU backend's extra buffer types (llama.cpp would use them)
    used_buffers: tuple[str, ...] = ()  # the extra buffer types the probe's weights went into
    detail: str = ""  # one line: how it was found
    cpu_model: str = ""
    build: str = ""
    checked_at: str = ""
    probe_s: float | None = None

    def to_json_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["extra_buffers"], d["used_buffers"] = list(self.extra_buffers), list(self.used_buffers)
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, object]) -> RepackVerdict:
        safe = d.get("safe")
        return cls(key=str(d.get("key", "")), safe=safe if isinstance(safe, bool) else None,
                   default_repack=0 if d.get("default_repack") == 0 else 1,
                   extra_buffers=_strings(d.get("extra_buffers")), used_buffers=_strings(d.get("used_buffers")),
                   detail=str(d.get("detail", "")), cpu_model=str(d.get("cpu_model", "")),
                   build=str(d.get("build", "")), checked_at=str(d.get("checked_at", "")),
                   probe_s=float(probe_s) if isinstance(probe_s := d.get("probe_s"), int | float) else None)

    @property
    def notice(self) -> str:
        """The one line that says why runs here default to repack 0 ("" when they do not)."""
        if self.default_repack:
            return ""
        where = ", ".join(self.used_buffers or self.extra_buffers) or "extra"
        return (f"repack 0 on this machine: with weight repacking on, llama.cpp crashed here ({self.detail}; "
                f"weights in its {where} buffer; {ISSUE}); rows record repack=0; --repack 1 forces it")

    def amx_in_use(self, repack: int) -> bool:
        """Whether weights of AMX types go to the AMX buffer in a run with ``repack`` (0 or 1) on this build."""
        return bool(repack) and "AMX" in self.extra_buffers


@dataclass
class _Probed:
    rc: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    seconds: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)


def _build_fingerprint(lib_dir: Path | None) -> str:
    """llama-cpp-python's version and its libraries' names, sizes and times: a rebuild or reinstall changes it."""
    try:
        version = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        version = "not installed"
    parts = [version, os.environ.get("LLAMA_CPP_LIB_PATH", "")]
    if lib_dir is not None:
        try:
            for f in sorted(lib_dir.iterdir()):
                if f.is_file():
                    st = f.stat()
                    parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime)}")
        except OSError:
            pass
    return "|".join(parts)


def machine_key(cpuinfo: Path | None = None) -> tuple[str, str, str]:
    """(key, CPU model, build) of this machine and llama.cpp build: the key is a short hash of all three facts."""
    return _machine_key(str(cpuinfo or cpuinfo_path()), os.environ.get("LLAMA_CPP_LIB_PATH", ""),
                        os.environ.get(TEST_DOUBLE_ENV, ""))


@functools.lru_cache(maxsize=8)
def _machine_key(cpuinfo_path: str, lib_path_env: str, test_double: str) -> tuple[str, str, str]:
    cpuinfo = Path(cpuinfo_path)
    model = cpu_model()
    flags = " ".join(cpuinfo_flags(read_cpuinfo(cpuinfo) or ""))
    lib_dir = Path(lib_path_env) if lib_path_env else find_lib_dir()
    build = _build_fingerprint(lib_dir)
    # a test double's verdict (app.worker.engines) is kept apart from the real engine's
    digest = hashlib.sha256(f"{model}\n{flags}\n{build}\n{test_double}".encode()).hexdigest()[:16]
    try:
        short_build = f"llama-cpp-python {importlib.metadata.version('llama_cpp_python')}"
    except importlib.metadata.PackageNotFoundError:
        short_build = "llama-cpp-python not installed"
    return digest, model, short_build


def verdict_path() -> Path:
    return data_dir() / VERDICT_FILE


def _read_all(path: Path) -> dict[str, dict[str, object]]:
    try:
        d = json.loads(read_bounded_text(path))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(d, dict) or d.get("version") != FORMAT_VERSION or not isinstance(d.get("verdicts"), dict):
        return {}
    return {str(k): v for k, v in d["verdicts"].items() if isinstance(v, dict)}


def remembered(path: Path | None = None, key: str | None = None) -> RepackVerdict | None:
    """This machine's remembered verdict (no probe runs); None when it was never checked or cannot be read."""
    try:
        p = path or verdict_path()
    except OSError:
        return None
    k = key or machine_key()[0]
    d = _read_all(p).get(k)
    return RepackVerdict.from_json_dict(d) if d is not None else None


def default_repack(path: Path | None = None) -> int:
    """The machine's default for ``--repack auto`` as remembered: 1 unless the guard found repacking crashes.

    Cheap enough per prediction: the file is read again only when it changes."""
    try:
        p = path or verdict_path()
        st = p.stat()
    except OSError:
        return 1
    return _default_repack(str(p), st.st_mtime_ns, st.st_size, machine_key()[0])


@functools.lru_cache(maxsize=32)
def _default_repack(path: str, _mtime_ns: int, _size: int, key: str) -> int:
    v = remembered(Path(path), key)
    return v.default_repack if v is not None else 1


def _save(path: Path, verdict: RepackVerdict) -> None:
    """Add ``verdict`` to the file (other machines' and builds' verdicts kept), atomically; unwritable: skipped."""
    verdicts = _read_all(path)
    verdicts[verdict.key] = verdict.to_json_dict()
    try:
        write_text_atomic(path, json.dumps({"version": FORMAT_VERSION, "verdicts": verdicts}, indent=1), own_file=True)
    except OSError:
        pass


def probe_command(python: str | None = None) -> list[str]:
    """The probe child's command line (a frozen app has no python: its executable takes ``--repack-probe``)."""
    if getattr(sys, "frozen", False) and python is None:
        return [sys.executable, "--repack-probe", "--json"]
    return [python or sys.executable, "-m", "app.worker.repack_probe", "--json"]


def _run_probe(timeout_s: float, python: str | None) -> _Probed:
    env = {**absolute_path_env(dict(os.environ)),
           "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH"))))}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(probe_command(python), capture_output=True, text=True,
                              timeout=timeout_s, env=env, stdin=subprocess.DEVNULL, cwd=str(REPO_ROOT))
    except subprocess.TimeoutExpired:
        return _Probed(rc=None, timed_out=True, seconds=time.monotonic() - t0)
    except OSError as e:
        return _Probed(rc=None, stderr=str(e), seconds=time.monotonic() - t0)
    out = _Probed(rc=proc.returncode, stdout=proc.stdout[-65536:], stderr=proc.stderr[-65536:],
                  seconds=time.monotonic() - t0)
    for line in proc.stdout.splitlines():  # what it said before it ended (or died), later lines over earlier ones
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.extra.update(d)
    return out


def _strings(value: object) -> tuple[str, ...]:
    """A JSON list's items as text (anything else: none)."""
    return tuple(str(x) for x in value) if isinstance(value, list | tuple) else ()


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def judge(probed: _Probed, key: str, model: str, build: str) -> RepackVerdict:
    """The verdict a probe's outcome gives: died by a signal -> not safe; ran -> safe; anything else -> unknown."""
    extra, used = _strings(probed.extra.get("extra_buffers")), _strings(probed.extra.get("used_buffers"))
    unknown = RepackVerdict(key=key, safe=None, default_repack=1, extra_buffers=extra, used_buffers=used,
                            cpu_model=model, build=build, checked_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                            probe_s=round(probed.seconds, 2))
    if probed.rc is not None and probed.rc < 0:
        return replace(unknown, safe=False, default_repack=0, detail=(
            f"a 32-token prefill of a Q4_0 model with repacking on died by {_signal_name(probed.rc)}"))
    if probed.rc == 0 and probed.extra.get("ok") is True:
        what = f"weights in {', '.join(used)}" if used else "no weights repacked"
        return replace(unknown, safe=True, detail=f"a 32-token prefill with repacking on ran ({what})")
    why = ("the probe timed out" if probed.timed_out else
           (probed.stderr.strip().splitlines() or [f"exit {probed.rc}"])[-1][:200])
    return replace(unknown, detail=f"not checked: {why}")


def ensure_verdict(path: Path | None = None, timeout_s: float = PROBE_TIMEOUT_S,
                   python: str | None = None) -> tuple[RepackVerdict, bool]:
    """This machine's verdict, probing first when it was never checked: (verdict, whether it was probed now).

    A probe that could not decide (timed out, llama.cpp missing) is not remembered, so the next run tries again.
    """
    key, model, build = machine_key()
    try:
        p = path or verdict_path()
    except OSError:
        p = None
    if p is not None and (known := remembered(p, key)) is not None:
        return known, False
    verdict = judge(_run_probe(timeout_s, python), key, model, build)
    if p is not None and verdict.safe is not None:
        _save(p, verdict)
    return verdict, True

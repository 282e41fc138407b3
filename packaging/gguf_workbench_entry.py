"""The frozen app's entry point: ``--worker`` runs the worker process, anything else the window (or --self-test).

A PyInstaller bundle has no ``python`` to run ``python -m app.worker.main`` with, so the client starts the
bundle's own executable with ``--worker --event-fd N`` (see app.run.client.worker_command). Lives outside
``app`` because the window (app.gui) and the worker (app.worker) are layers that never import each other.
"""

from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        from app.worker.main import main as worker_main

        return worker_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "--ggml-devices":  # gguf-bench doctor's child (app.telemetry.llama_devices)
        from engines.ggml_devices import main as devices_main

        return devices_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "--repack-probe":  # the repack crash guard's child (app.telemetry)
        from app.worker.repack_probe import main as probe_main

        return probe_main(sys.argv[2:])
    from app.gui.main import main as window_main

    return window_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

"""``python -m tests.remote.llama_server_launcher --repack 0|1 [llama_cpp.server options]``: llama-cpp-python's own
server, with llama.cpp's weight repacking as asked.

llama-cpp-python's ``Llama`` has no setting for ``use_extra_bufts`` (llama-server's ``--no-repack``), and where the
repack crash guard found that repacked weights crash llama.cpp (AMX, llama.cpp issue #20824) the server dies on its
first request. So every model this server loads starts from the public ``llama_model_default_params`` with
``use_extra_bufts`` set to ``--repack``'s value; everything else is ``python -m llama_cpp.server``, unchanged.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--repack", type=int, choices=(0, 1), required=True)
    args, rest = ap.parse_known_args(sys.argv[1:] if argv is None else argv)

    import llama_cpp.llama_cpp as low  # Llama reads llama_model_default_params from this module when it loads

    defaults = low.llama_model_default_params

    def with_repack() -> object:
        params = defaults()
        params.use_extra_bufts = bool(args.repack)
        return params

    low.llama_model_default_params = with_repack
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = ["llama_cpp.server", *rest]
    server_main()


if __name__ == "__main__":
    main()

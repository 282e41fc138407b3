"""The URL options of ``inspect``, ``predict`` and ``choose``: how much of a remote file may be read for its header."""

from __future__ import annotations

import argparse

from app.cli.arg_types import between
from app.model.gguf_http import DEFAULT_MAX_HEADER_BYTES, MIB, RemoteOptions

#: The largest header cap a flag may set: far above any published model's header (a 256k vocabulary is tens of MiB).
MAX_HEADER_MIB = 4096.0


def add_url_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-header-mib", type=between(0.0, MAX_HEADER_MIB, "MiB"), default=DEFAULT_MAX_HEADER_BYTES / MIB,
                   help="for a URL: read at most this many MiB looking for the end of the GGUF header (default 64, "
                        f"at most {MAX_HEADER_MIB:g}); the whole read of a URL ends within "
                        f"{RemoteOptions.deadline_s:g} s, whatever the server sends")


def max_header_bytes(args: argparse.Namespace) -> int:
    """The cap in bytes (the default when the command has no such option)."""
    mib = getattr(args, "max_header_mib", None)
    return max(1, int(mib * MIB)) if mib and mib > 0 else DEFAULT_MAX_HEADER_BYTES


def remote_options(args: argparse.Namespace) -> RemoteOptions:
    return RemoteOptions(max_header_bytes=max_header_bytes(args))

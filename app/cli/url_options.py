"""The URL options of ``inspect``, ``predict`` and ``choose``: how much of a remote file may be read for its header."""

from __future__ import annotations

import argparse

from app.model.gguf_http import DEFAULT_MAX_HEADER_BYTES, MIB, RemoteOptions


def add_url_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-header-mib", type=float, default=DEFAULT_MAX_HEADER_BYTES / MIB,
                   help="for a URL: read at most this many MiB looking for the end of the GGUF header (default 64)")


def max_header_bytes(args: argparse.Namespace) -> int:
    """The cap in bytes (the default when the command has no such option)."""
    mib = getattr(args, "max_header_mib", None)
    return int(mib * MIB) if mib and mib > 0 else DEFAULT_MAX_HEADER_BYTES


def remote_options(args: argparse.Namespace) -> RemoteOptions:
    return RemoteOptions(max_header_bytes=max_header_bytes(args))

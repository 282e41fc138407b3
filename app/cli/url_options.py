"""The URL options of ``inspect``, ``predict`` and ``choose``: how much of a remote file may be read for its header,
and how long the whole read may take."""

from __future__ import annotations

import argparse

from app.cli.arg_types import between
from app.model.gguf_http import DEFAULT_DEADLINE_S, DEFAULT_MAX_HEADER_BYTES, MIB, RemoteOptions

#: The largest header cap a flag may set: far above any published model's header (a 256k vocabulary is tens of MiB).
MAX_HEADER_MIB = 4096.0
#: The longest deadline a flag may set for the read of one URL (a day).
MAX_URL_TIMEOUT_S = 86_400.0


def add_url_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-header-mib", type=between(0.0, MAX_HEADER_MIB, "MiB"), default=DEFAULT_MAX_HEADER_BYTES / MIB,
                   help="for a URL: read at most this many MiB looking for the end of the GGUF header (default 64, "
                        f"at most {MAX_HEADER_MIB:g})")
    p.add_argument("--url-timeout", type=between(0.0, MAX_URL_TIMEOUT_S, "s"), default=DEFAULT_DEADLINE_S,
                   metavar="S", help=f"for a URL: the whole read (every request, retry and shard) ends within this "
                                     f"many seconds, whatever the server sends (default {DEFAULT_DEADLINE_S:g})")


def max_header_bytes(args: argparse.Namespace) -> int:
    """The cap in bytes (the default when the command has no such option)."""
    mib = getattr(args, "max_header_mib", None)
    return max(1, int(mib * MIB)) if mib and mib > 0 else DEFAULT_MAX_HEADER_BYTES


def url_deadline_s(args: argparse.Namespace) -> float:
    """The deadline of one URL's read in seconds (the default when the command has no such option)."""
    value = getattr(args, "url_timeout", None)
    return float(value) if value and value > 0 else DEFAULT_DEADLINE_S


def remote_options(args: argparse.Namespace) -> RemoteOptions:
    return RemoteOptions(max_header_bytes=max_header_bytes(args), deadline_s=url_deadline_s(args))

"""``gguf-bench run --url``: the remote-server options and the session they describe."""

from __future__ import annotations

import argparse
import sys

from app.cli.errors import UserError
from app.remote.rows import Objective
from app.remote.session import (
    MAX_CONCURRENCY,
    MAX_RATE_RPS,
    MIN_RATE_RPS,
    RemoteSession,
    RemoteSpec,
    build_remote_spec,
)
from app.results.store import ResultStore
from app.run.params import PARAM, PARAMS
from engines.openai_http import (
    API_KEY_ENVS,
    DEFAULT_REQUEST_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    MAX_TIMEOUT_S,
    SIDE_REQUEST_S,
)

#: Options of a local run that mean nothing for a remote server (refused with --url rather than ignored).
_LOCAL_ONLY = ("model", "sweep", "telemetry", "hw", "prompt_file", "repetitions")


def add_remote_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote server (OpenAI-compatible; the API key is read from "
                             + " or ".join(API_KEY_ENVS) + ")")
    g.add_argument("--url", help="benchmark this server instead of a local model, e.g. http://HOST:PORT/v1")
    g.add_argument("--served-model", help="model name the server knows (the request's 'model')")
    g.add_argument("--concurrency", help=f"requests in flight, e.g. 1,2,4,8 (1-{MAX_CONCURRENCY}; default 1)")
    g.add_argument("--rate", type=float, help=f"Poisson arrivals at R requests/s, {MIN_RATE_RPS:g} to {MAX_RATE_RPS:g} "
                   "(seeded; default: all at once)")
    g.add_argument("--requests", type=int, help="requests per test (default max(8, 4 × concurrency))")
    g.add_argument("--slo-ttft-ms", type=float, help="goodput objective: TTFT at most this")
    g.add_argument("--slo-tpot-ms", type=float, help="goodput objective: TPOT at most this")
    g.add_argument("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT_S,
                   help=f"the deadline of one request in seconds, whatever the server sends: connect, headers and the "
                        f"whole streamed answer (default {DEFAULT_REQUEST_TIMEOUT_S:g}, at most {MAX_TIMEOUT_S:g}); a "
                        f"read waits at most {IDLE_TIMEOUT_S:g} s for data, and /models and tokenize requests get at "
                        f"most {SIDE_REQUEST_S:g} s each")
    g.add_argument("--seed", type=int, default=0, help="seed of the prompts' words and the arrival times")
    g.add_argument("--prefix-cache", action="store_true",
                   help="with -d: send each request's context alone first, then time the prompt over the cached "
                   "context (llama-benchy's --enable-prefix-caching)")
    g.add_argument("--chat", action="store_true", help="use /chat/completions instead of /completions")
    g.add_argument("--no-ignore-eos", action="store_true",
                   help="do not send ignore_eos/min_tokens (for servers that reject them)")


#: Options that mean something only for a server (refused without --url rather than ignored).
_REMOTE_ONLY = ("served_model", "concurrency", "rate", "requests", "slo_ttft_ms", "slo_tpot_ms", "prefix_cache",
                "chat", "no_ignore_eos")


def check_remote_flags_need_url(args: argparse.Namespace) -> None:
    """UserError naming the server-only flags given to a local run."""
    given = [name for name in _REMOTE_ONLY if getattr(args, name, None) not in (None, False)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UserError(f"{flags}: only apply to a remote server (--url)")


def _check_local_flags(args: argparse.Namespace) -> None:
    local = [name for name in _LOCAL_ONLY if getattr(args, name, None)]
    shared = ("n_prompt", "n_gen", "n_depth")
    local += [p.name for p in PARAMS if p.is_list and p.name not in shared and getattr(args, p.name)]
    if local:
        flags = ", ".join(PARAM[n].flags[-1] if n in PARAM else "--" + n.replace("_", "-") for n in local)
        raise UserError(f"--url: {flags} only apply to a local model")


def remote_spec(args: argparse.Namespace) -> RemoteSpec:
    """The sweep ``--url`` describes; UserError or PlanError (one line) for flags that do not fit."""
    _check_local_flags(args)
    return build_remote_spec(args.url, args.served_model or "", n_prompt=args.n_prompt, n_gen=args.n_gen,
                             concurrency=args.concurrency, n_requests=args.requests, rate_rps=args.rate,
                             objective=Objective(args.slo_ttft_ms, args.slo_tpot_ms), timeout_s=args.request_timeout,
                             chat=args.chat, ignore_eos=not args.no_ignore_eos, seed=args.seed,
                             n_depth=args.n_depth, prefix_cache=args.prefix_cache)


def remote_session(args: argparse.Namespace) -> RemoteSession:
    spec = remote_spec(args)
    store = None if args.no_store else ResultStore.recover(args.store)
    command = " ".join(sys.argv).replace(args.url, spec.endpoint.display)  # no credentials in the store
    return RemoteSession(spec, store=store, command=command)

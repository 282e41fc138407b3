"""Remote sweeps: prompt length × output length × concurrency against an OpenAI-compatible server.

No worker process: there is no model to load here. The requests run on threads of this process
(``engines.openai_http.LoadRun``) and the session emits the same events as a local sweep, so the CLI's
progress line, the results store and the window read a remote run like any other. Rows carry
``backends = remote``, the endpoint, and the concurrency in ``n_parallel``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import overload

from app.remote.rows import NO_OBJECTIVE, Objective, summarise_requests
from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.results.store import ResultStore, now_iso
from app.run.events import (
    FailureKind,
    SweepFinished,
    SweepStarted,
    TestFailed,
    TestFinished,
    TestStarted,
)
from app.run.params import INT, PlanError, parse_list
from app.run.plan import RemoteTest
from app.run.session import EventHandler, SweepOutcome, SweepSession
from engines.openai_http import (
    DEFAULT_REQUEST_TIMEOUT_S,
    MAX_TIMEOUT_S,
    Endpoint,
    EndpointError,
    LoadRun,
    RequestResult,
    count_tokens,
    poisson_arrivals_s,
    served_models,
    stream_request,
)

MAX_CONCURRENCY = 256
MAX_REQUESTS = 100_000
#: Arrival rates a test may ask (requests/s): a request every 1,000 s at the slowest (a test of 8 then takes hours),
#: a million a second at the fastest (far past what one client sends).
MIN_RATE_RPS, MAX_RATE_RPS = 1e-3, 1e6
#: The longest model name a server is asked for (Hugging Face repo ids with a file name are under 200).
MAX_MODEL_NAME_CHARS = 1000
#: The longest objective (ms) a goodput test may set: an hour per token.
MAX_OBJECTIVE_MS = 3.6e6
#: Common English words that are one token (with their leading space) for most BPE vocabularies.
_WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an "
          "had they you were their one all we can her has there been if more when will would who so no time way "
          "day man new year work life hand part place case week point number group fact home water room mother "
          "area money story month night study book eye job word side kind head house service friend father power "
          "hour game line end member law car city name team minute idea kid body back face level office door").split()


@dataclass
class RemoteSpec:
    """A remote sweep: lists are crossed; ``n_requests`` None means max(8, 4 × concurrency) per test.

    ``n_depth`` are llama-benchy's context depths: each request carries that many tokens of its own text before
    the prompt. ``prefix_cache`` (llama-benchy's ``--enable-prefix-caching``) loads each context in a request of
    its own first, so the timed request measures the prompt over a cached context; depth 0 runs plain."""

    endpoint: Endpoint
    n_prompt: list[int] = field(default_factory=lambda: [512])
    n_gen: list[int] = field(default_factory=lambda: [128])
    concurrency: list[int] = field(default_factory=lambda: [1])
    n_requests: int | None = None
    rate_rps: float | None = None
    objective: Objective = Objective()
    seed: int = 0
    n_depth: list[int] = field(default_factory=lambda: [0])
    prefix_cache: bool = False

    def tests(self) -> list[RemoteTest]:
        return [RemoteTest(self.endpoint.display, self.endpoint.model, p, n, c,
                           self.n_requests or max(8, 4 * c), self.rate_rps, d, self.prefix_cache and d > 0)
                for p in self.n_prompt for n in self.n_gen for d in self.n_depth for c in self.concurrency]


#: A common English word is one to three tokens in any tokenizer: a server count outside ×/÷ this many per word is
#: not believed, and a prompt never has more than this many words per token asked (nor fewer than 1 / this).
WORDS_PER_TOKEN_BOUND = 4


class PromptMaker:
    """Prompts of a given token count: seeded random common words, a different text for every request (so no
    server-side prefix cache can fake a fast TTFT), sized with the server's tokenizer where it offers one."""

    def __init__(self, endpoint: Endpoint, seed: int = 0) -> None:
        self.endpoint = endpoint
        self.seed = seed
        self._sized: dict[int, tuple[int, str]] = {}

    def text(self, n_words: int, request_index: int) -> str:
        rng = random.Random(self.seed * 1_000_003 + request_index)
        return " ".join(rng.choice(_WORDS) for _ in range(n_words))

    def size(self, n_tokens: int) -> tuple[int, str]:
        """(words for ``n_tokens`` tokens, how the count was checked: ``tokenize`` or ``approximate``)."""
        if n_tokens not in self._sized:
            words, how = n_tokens, "approximate"
            low, high = max(1, n_tokens // WORDS_PER_TOKEN_BOUND), n_tokens * WORDS_PER_TOKEN_BOUND
            for _ in range(3):
                counted = count_tokens(self.endpoint, self.text(words, -1))
                if counted is None or not words / WORDS_PER_TOKEN_BOUND <= counted <= words * WORDS_PER_TOKEN_BOUND:
                    break  # no count, or one no tokenizer gives for common words: the server is not believed
                how = "tokenize"
                if counted == n_tokens:
                    break
                words = min(high, max(low, round(words * n_tokens / counted)))
            self._sized[n_tokens] = (words, how)
        return self._sized[n_tokens]


class Texts(Sequence[str]):
    """``n`` texts of ``words`` words each, made when asked (request ``i``'s from its own seed): a test's prompts
    without holding them all (100,000 requests of a million words would not fit in memory)."""

    def __init__(self, maker: PromptMaker, words: int, n: int, seed_of: Callable[[int], int]) -> None:
        self.maker, self.words, self.n, self.seed_of = maker, words, n, seed_of

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.n))]
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self.maker.text(self.words, self.seed_of(i % self.n))


class RemoteSession(SweepSession):
    """Runs a :class:`RemoteSpec` with the session's store, event log and rows (see SweepSession)."""

    def __init__(self, spec: RemoteSpec, *, store: ResultStore | None = None, sweep_name: str = "remote",
                 command: str = "") -> None:
        self.spec = spec
        machine = {"remote_endpoint": spec.endpoint.display, "served_model": spec.endpoint.model}
        super().__init__(spec.tests(), store=store, sweep_name=sweep_name, command=command,  # type: ignore[arg-type]
                         machine=machine, token_ticks=False)
        self.prompts = PromptMaker(spec.endpoint, spec.seed)
        self._no_tokenize_route = False
        self._load: LoadRun | None = None
        self._load_lock = threading.Lock()

    def cancel(self) -> None:
        super().cancel()
        with self._load_lock:
            if self._load is not None:
                self._load.cancel()

    def _run_workers(self, outcome: SweepOutcome, on_event: EventHandler | None) -> None:
        emit = on_event or (lambda ev: None)
        tests: list[RemoteTest] = self.tests  # type: ignore[assignment]
        software = {"engine": "openai_http", "endpoint": self.spec.endpoint.display}
        if self.store is not None:
            self.store.update_software(self.run_id, software)
        emit(SweepStarted(t_ns=time.perf_counter_ns(), n_tests=len(tests), tests=list(tests),
                          software=software))
        self._warm_up()
        n_ok = 0
        for index, test in enumerate(tests):
            if self._cancel.is_set():
                break
            emit(TestStarted(t_ns=time.perf_counter_ns(), test_index=index, test=test))
            row = self._record(self._measure(index, test))
            if self._cancel.is_set() and row.status != RowStatus.OK:
                self.rows.pop(index, None)  # a test cut by cancel is not a failure of the server
                break
            if row.status == RowStatus.OK:
                n_ok += 1
                emit(TestFinished(t_ns=time.perf_counter_ns(), test_index=index, row=row))
            else:
                emit(TestFailed(t_ns=time.perf_counter_ns(), test_index=index, reason=row.error or "", row=row,
                                kind=FailureKind.ENGINE_ERROR))
        emit(SweepFinished(t_ns=time.perf_counter_ns(), n_ok=n_ok, n_failed=len(self.rows) - n_ok,
                           cancelled=self._cancel.is_set()))

    def _warm_up(self) -> None:
        """One short request before the first test, kept apart (a cold server's first answer is slow)."""
        if self.tests and not self._cancel.is_set():
            first: RemoteTest = self.tests[0]  # type: ignore[assignment]
            words, _ = self.prompts.size(first.n_prompt)
            stream_request(self.spec.endpoint, self.prompts.text(words, -2), min(first.n_gen, 4), cancel=self._cancel)

    def _recount(self, results: list[RequestResult]) -> None:
        """Requests whose server reported no usage: their output counted with the server's tokenizer, where it has a
        tokenize route (stream chunks can carry more than one token: counting chunks read about 20 % high)."""
        for r in results:
            if self._cancel.is_set() or self._no_tokenize_route:
                return
            if r.ok and r.completion_tokens is None and r.text:
                counted = count_tokens(self.spec.endpoint, r.text)
                if counted is None:
                    self._no_tokenize_route = True  # asked once: the server has none
                elif counted >= len(r.chunk_ns) > 0 or counted > 0 and not r.chunk_ns:
                    r.completion_tokens, r.retokenized = counted, True

    def _measure(self, index: int, test: RemoteTest) -> ResultRow:
        row = remote_base_row(test, index, self.run_id, self.spec.objective)
        words, how = self.prompts.size(test.n_prompt)
        prompts = Texts(self.prompts, words, test.n_requests, lambda i: index * MAX_REQUESTS + i)
        contexts = None
        if test.n_depth:  # every request its own context: only a prefix-cache test may find one cached
            depth_words, _ = self.prompts.size(test.n_depth)
            contexts = Texts(self.prompts, depth_words, test.n_requests, lambda i: -3 - index * MAX_REQUESTS - i)
        load = LoadRun(self.spec.endpoint, prompts, test.n_gen, test.concurrency,
                       poisson_arrivals_s(test.n_requests, test.rate_rps, self.spec.seed + index),
                       contexts=contexts, prime_contexts=test.prefix_cache)
        with self._load_lock:
            self._load = load
        if self._cancel.is_set():
            load.cancel()
        results = load.run()
        with self._load_lock:
            self._load = None
        self._recount(results)
        end_ns = max((r.end_ns for r in results), default=load.start_ns)
        estimate = test.n_prompt if test.prefix_cache else test.n_prompt + test.n_depth
        loads = [c for c, r in zip(load.context_results, load.results, strict=True) if r is not None]
        row = row.replace(**summarise_requests(results, end_ns - load.start_ns, estimate, self.spec.objective,
                                               loads if test.prefix_cache else None))
        reported = any(r.prompt_tokens is not None for r in results if r.ok)
        row = row.replace(prompt_tokens_by="usage" if reported else how)
        if row.status != RowStatus.OK:
            row = row.replace(error_kind=FailureKind.ENGINE_ERROR.value)
        return row


def remote_base_row(test: RemoteTest, index: int, run_id: str, objective: Objective) -> ResultRow:
    """The columns a remote test knows before it runs (a failed test keeps these plus the error)."""
    return ResultRow(
        run_id=run_id, test_index=index, status=RowStatus.PENDING, error="", error_kind="",
        model_path=test.endpoint, model_filename=test.served_model, backends="remote",
        endpoint=test.endpoint, cpu_info="", gpu_info="",
        n_prompt=test.n_prompt, n_gen=test.n_gen, n_depth=test.n_depth, n_parallel=test.concurrency,
        prefix_cache=int(test.prefix_cache),
        n_requests=test.n_requests, request_rate_rps=test.rate_rps,
        slo_ttft_ms=objective.ttft_ms, slo_tpot_ms=objective.tpot_ms, test_time=now_iso())


def parse_counts(flag: str, text: str | None, default: list[int], lo: int, hi: int) -> list[int]:
    """A list of counts in llama-bench syntax (``1,2,4,8``, ``1-64*2``), each within lo..hi."""
    values = parse_list(flag, text, INT) if text is not None and text.strip() else default
    bad = [v for v in values if not lo <= v <= hi]
    if bad:
        raise PlanError(f"{flag}: {bad[0]} is outside {lo}-{hi}")
    return values


def _the_one_served_model(url: str, timeout_s: float) -> str:
    """The model a server lists when it lists exactly one; PlanError saying what to pass otherwise."""
    try:
        listed = served_models(Endpoint(url.strip(), "", timeout_s=min(timeout_s, 10.0)))
    except EndpointError as e:
        raise PlanError(f"--url {e}") from None
    if listed is not None and len(listed) == 1:
        return listed[0]
    if listed:
        shown = ", ".join(listed[:5]) + (", …" if len(listed) > 5 else "")
        raise PlanError(f"--url serves {len(listed)} models ({shown}): choose one with --served-model NAME")
    raise PlanError("--url needs --served-model NAME (the server did not list its models at GET /models)")


def build_remote_spec(url: str, model: str, *, n_prompt: str | None = None, n_gen: str | None = None,
                      concurrency: str | None = None, n_requests: int | None = None, rate_rps: float | None = None,
                      objective: Objective = NO_OBJECTIVE, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                      chat: bool = False,
                      ignore_eos: bool = True, seed: int = 0, ask_server: bool = True, n_depth: str | None = None,
                      prefix_cache: bool = False) -> RemoteSpec:
    """A remote sweep from what a user typed (CLI flags or the window's fields); PlanError names what is wrong.

    Without ``model`` the server is asked which it serves (``GET /models``, when ``ask_server``: not from the
    window's thread): the one it lists is used."""
    if not model.strip() and not ask_server:
        raise PlanError("--url needs --served-model NAME (the model name the server knows)")
    if n_requests is not None and not 1 <= n_requests <= MAX_REQUESTS:
        raise PlanError(f"--requests must be between 1 and {MAX_REQUESTS}")
    if rate_rps is not None and not (isinstance(rate_rps, int | float) and MIN_RATE_RPS <= rate_rps <= MAX_RATE_RPS):
        raise PlanError(f"--rate must be between {MIN_RATE_RPS:g} and {MAX_RATE_RPS:g} requests per second")
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s <= MAX_TIMEOUT_S):
        raise PlanError(f"--request-timeout must be above 0 and at most {MAX_TIMEOUT_S:g} s")
    for flag, value in (("--slo-ttft-ms", objective.ttft_ms), ("--slo-tpot-ms", objective.tpot_ms)):
        if value is not None and not (isinstance(value, int | float) and 0 < value <= MAX_OBJECTIVE_MS):
            raise PlanError(f"{flag} must be above 0 and at most {MAX_OBJECTIVE_MS:g} ms")
    if len(model) > MAX_MODEL_NAME_CHARS or any(ord(c) < 0x20 or ord(c) == 0x7F for c in model):
        raise PlanError(f"--served-model must be a name of at most {MAX_MODEL_NAME_CHARS} characters without control "
                        "characters")
    if not model.strip():  # asked only once every value given is known good
        model = _the_one_served_model(url, timeout_s)
    depths = parse_counts("-d", n_depth, [0], 0, 1 << 20)
    if prefix_cache and not any(depths):
        raise PlanError("--prefix-cache needs a context to cache: give -d a depth above 0")
    try:
        endpoint = Endpoint(url.strip(), model.strip(), timeout_s=timeout_s, chat=chat, ignore_eos=ignore_eos)
    except EndpointError as e:
        raise PlanError(f"--url {e}") from None
    return RemoteSpec(endpoint, n_prompt=parse_counts("-p", n_prompt, [512], 1, 1 << 20),
                      n_gen=parse_counts("-n", n_gen, [128], 1, 1 << 20),
                      concurrency=parse_counts("--concurrency", concurrency, [1], 1, MAX_CONCURRENCY),
                      n_requests=n_requests, rate_rps=rate_rps, objective=objective, seed=seed,
                      n_depth=depths, prefix_cache=prefix_cache)

"""Property-based fuzz of ``gguf-bench run``'s numeric flags (issue #13), in-process through the real parser and
plan validation: each draw is a valid plan inside the bounds, or one PlanError/UserError line (argparse's own
usage exit for a non-integer -r); never another exception, never a huge allocation."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli.errors import UserError
from app.cli.main import build_parser
from app.cli.run_cmd import build_sweep
from app.run.params import MAX_TESTS, PARAM
from app.run.plan import PlanError

FLAGS = {"-p": "n_prompt", "-n": "n_gen", "-d": "n_depth", "-t": "n_threads", "-b": "n_batch", "-ub": "n_ubatch",
         "-r": "repetitions", "--parallel": "n_parallel"}
_ODD_INTS = st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**63, 2**64, 5_000_000_000, 10**40])
_INT = st.one_of(st.integers(-(2**70), 2**70), _ODD_INTS)
_ITEM = st.one_of(
    _INT.map(str),
    st.tuples(_INT, _INT).map(lambda ab: f"{ab[0]}-{ab[1]}"),
    st.tuples(_INT, _INT, st.sampled_from("+*"), _INT).map(lambda t: f"{t[0]}-{t[1]}{t[2]}{t[3]}"),
    st.text(alphabet="0123456789-+*,x. ", max_size=12),
)
_VALUE = st.lists(_ITEM, min_size=1, max_size=4).map(",".join)


@pytest.mark.heavy  # hypothesis examples: more than a second
@settings(max_examples=150, deadline=1000, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.dictionaries(st.sampled_from(sorted(FLAGS)), _VALUE, min_size=1, max_size=4))
def test_numeric_flags_give_a_bounded_plan_or_one_line(values: dict[str, str]) -> None:
    argv = ["run", "-m", "model.gguf"]
    for flag, value in values.items():
        argv += [flag, value] if not value.startswith("-") else [f"{flag}={value}"]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: -r takes one integer; its usage line, exit 2
        assert e.code == 2 and "-r" in values
        return
    t0 = time.perf_counter()
    try:
        spec = build_sweep(args)
    except (PlanError, UserError) as e:
        assert "\n" not in str(e) and len(str(e)) < 600, str(e)
        return
    finally:
        assert time.perf_counter() - t0 < 0.5
    assert spec.n_tests() <= MAX_TESTS
    for name in set(FLAGS.values()):
        prm = PARAM[name]
        for v in getattr(spec, name) if prm.is_list else [getattr(spec, name)]:
            assert prm.min is not None and prm.max is not None and prm.min <= v <= prm.max


@pytest.mark.parametrize("argv", [["-p", "5000000000"], ["-p", "1-100000000"], ["-t", "9999"], ["-r", "10001"],
                                  ["--parallel", "257"], ["-b", "0"], ["-d=-1"]])
def test_the_issue_cases_are_one_line(argv: list[str]) -> None:
    args = build_parser().parse_args(["run", "-m", "model.gguf", *argv])
    with pytest.raises(PlanError) as info:
        build_sweep(args)
    assert "\n" not in str(info.value)

"""Issue #29: a fuzz test per entry point where values from outside come in. Each input either gives a value of the
documented shape or the entry point's own one-line error; anything else (a traceback-worthy exception, a hang, a
huge allocation) is a bug. Every case is bounded in time by hypothesis' deadline and in memory by the input sizes.
"""

from __future__ import annotations

import io
import json
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.model.gguf_facts import GGUFFileError, facts_from_scan
from app.model.gguf_scan import CorruptHeader, ShortRead, scan_gguf_stream
from app.predict.profiles import ProfileError, load_profile_file
from app.run.events import EVENT_TYPES, SCHEMA_VERSION, Event, EventDecodeError, event_from_dict, event_from_json
from app.run.params import LIST_PARAMS, PlanError, parse_list
from app.run.plan import load_sweep_preset
from engines.openai_http import RequestResult, _Fail, _Stream

FUZZ = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)
JSON_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=4), max_leaves=12)


@FUZZ
@given(st.sampled_from(LIST_PARAMS), TEXT)
def test_cli_list_flags(param, text: str) -> None:  # noqa: ANN001 - a Param
    """Every sweep flag's text (``-p``, ``-ctk``, ``-fa``, ``--repack``…): values of its kind within its bounds, or
    one PlanError line."""
    try:
        values = param.parse_text(text)
        checked = param.check_list(values, "command line")
    except PlanError as e:
        assert "\n" not in str(e)
        return
    assert len(checked) <= 1000


@pytest.mark.heavy  # hypothesis examples: more than a second
@FUZZ
@given(st.text(max_size=60))
def test_list_ranges_never_build_more_than_their_bound(text: str) -> None:
    try:
        assert len(parse_list("-p", text, int)) <= 1000
    except PlanError:
        pass


@pytest.mark.heavy  # hypothesis examples: more than a second
@FUZZ
@given(st.dictionaries(st.sampled_from([p.name for p in LIST_PARAMS] + ["repetitions", "name", "bogus"]),
                       JSON_VALUE, max_size=6))
def test_toml_sweep_presets(tmp_path_factory: pytest.TempPathFactory, table: dict[str, object]) -> None:
    """A preset whose values are anything TOML can hold: a SweepSpec that validates, or one PlanError line."""
    path = tmp_path_factory.mktemp("preset") / "p.toml"
    path.write_text(_toml_table("[sweep]", table))
    try:
        spec = load_sweep_preset(path)
    except PlanError as e:
        assert "\n" not in str(e) and "p.toml" in str(e)
        return
    assert spec.n_tests() <= 10_000


@FUZZ
@given(st.binary(max_size=300))
def test_toml_that_is_not_toml(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("raw") / "r.toml"
    path.write_bytes(raw)
    try:
        load_sweep_preset(path)
    except PlanError as e:
        assert "\n" not in str(e)


@pytest.mark.heavy  # hypothesis examples: more than a second
@FUZZ
@given(st.dictionaries(st.sampled_from(["name", "vendor", "kind", "architecture", "vram_gib", "memory_type",
                                        "memory_bus_bits", "memory_data_rate_gbps", "peak_bandwidth_gbps",
                                        "fp16_tensor_tflops", "power_limit_w", "source", "other"]),
                       JSON_VALUE, max_size=12))
def test_hardware_profiles(tmp_path_factory: pytest.TempPathFactory, entry: dict[str, object]) -> None:
    """A user's ``[[gpu]]`` table: profiles with finite positive figures, or one ProfileError line."""
    path = tmp_path_factory.mktemp("hw") / "mine.toml"
    path.write_text(_toml_table("[[gpu]]", entry))
    try:
        profiles = load_profile_file(path)
    except ProfileError as e:
        assert "\n" not in str(e)
        return
    for p in profiles:
        assert all(math.isfinite(x) and x > 0 for x in (p.peak_bandwidth_gbps, p.fp16_tensor_tflops, p.vram_gib))


@pytest.mark.heavy  # hypothesis examples: more than a second
@FUZZ
@given(st.sampled_from(sorted(EVENT_TYPES)), st.dictionaries(st.text(max_size=12), JSON_VALUE, max_size=8),
       st.dictionaries(st.sampled_from(["t_ns", "test_index", "row", "test", "tests", "message", "rep", "phase",
                                        "n_tokens", "start_ns", "end_ns", "values", "n_ok", "kind", "reason"]),
                       JSON_VALUE, max_size=8))
def test_replayed_events(kind: str, noise: dict[str, object], fields: dict[str, object]) -> None:
    """A recording's line: an event whose fields have their declared types, or one EventDecodeError."""
    doc = {**noise, **fields, "v": SCHEMA_VERSION, "type": kind}
    try:
        ev = event_from_json(json.dumps(doc))
    except EventDecodeError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(ev, Event)
    for name in ("t_ns", "test_index", "rep", "n_tokens"):
        if hasattr(ev, name):
            assert isinstance(getattr(ev, name), int) and not isinstance(getattr(ev, name), bool)
    if hasattr(ev, "row"):
        assert isinstance(ev.row, dict)


def test_replayed_events_known_shapes_still_read() -> None:
    """Recordings written by this and earlier versions (the GUI tests' stream) still replay."""
    from tests.gui.conftest import RECORDED

    lines = [ln for ln in RECORDED.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert [event_from_json(ln).type for ln in lines][:1] == ["sweep_started"]
    with pytest.raises(EventDecodeError, match="not int"):
        event_from_dict({"v": SCHEMA_VERSION, "type": "test_finished", "t_ns": 0, "test_index": "0", "row": {}})


@FUZZ
@given(st.lists(st.text(max_size=120), max_size=12))
def test_the_sse_parser(lines: list[str]) -> None:
    """Server-sent lines of any shape: parsed into the result, or one _Fail line; never another exception."""
    stream = _Stream(RequestResult(start_ns=0), chat=False, clock=time.perf_counter_ns, deadline_ns=2**62)
    for line in lines:
        try:
            stream.line(line)
        except _Fail as e:
            assert "\n" not in str(e)
            return


@FUZZ
@given(st.binary(min_size=0, max_size=400))
def test_the_gguf_header_reader(raw: bytes) -> None:
    """Bytes that may or may not be a GGUF header (read as over HTTP: a prefix in memory): a scan, or ShortRead
    or CorruptHeader; never a huge allocation (the file size bounds every count)."""
    data = b"GGUF" + raw if raw[:1] != b"G" else raw
    try:
        scan = scan_gguf_stream(io.BytesIO(data), len(data))
    except (ShortRead, CorruptHeader):
        return
    assert scan.header_bytes <= len(data) or scan.header_bytes > 0


def _toml_table(header: str, table: dict[str, object]) -> str:
    """``table`` under ``header`` as TOML, keys whose value TOML cannot hold left out."""
    return header + "\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in table.items() if _toml(v))


def _toml(value: object) -> str:
    """``value`` as a TOML value ('' for what TOML cannot hold: None, NaN keys, nested nulls)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        items = [_toml(v) for v in value]
        return "" if any(not i for i in items) else "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        items = [f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()]
        return "" if any(i.endswith("= ") for i in items) else "{" + ", ".join(items) + "}"
    return ""



@pytest.fixture(scope="module")
def real_header(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from tests.gguf_synth import write_synthetic_gguf

    path = write_synthetic_gguf(tmp_path_factory.mktemp("g") / "m.gguf", n_vocab=64)
    data = path.read_bytes()
    return data[: scan_gguf_stream(io.BytesIO(data), len(data)).header_bytes]


@FUZZ
@given(st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1,
                max_size=6), st.integers(min_value=0, max_value=1 << 40))
def test_a_real_header_with_bytes_changed(real_header: bytes, changes: list[tuple[int, int]], size: int) -> None:
    """A real header with a few bytes changed (counts, lengths, types), claiming any file size: a scan whose
    tensors fit the claimed size, or ShortRead/CorruptHeader."""
    data = bytearray(real_header)
    for at, byte in changes:
        data[at % len(data)] = byte
    try:
        scan = scan_gguf_stream(io.BytesIO(bytes(data)), size)
    except (ShortRead, CorruptHeader):
        return
    assert len(scan.tensors) < 100_000
    try:  # and the facts the window, predict and choose read from it
        facts = facts_from_scan("m.gguf", size, scan)
    except GGUFFileError as e:
        assert "\n" not in str(e)
        return
    assert facts.n_layer >= 0 and facts.weight_bytes >= 0

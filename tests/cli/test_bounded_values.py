"""Issue #44 point 3: every value from outside is checked where it enters, with a bound. Each case of the red-team
round (a traceback, exit 0 on bad input, unbounded memory, thousands of lines) is one line and exit 2 now, or a
bounded read."""

from __future__ import annotations

import json
import resource
from collections.abc import Callable
from pathlib import Path

import pytest

from app.cli.main import main


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse refuses a flag's value itself
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", "  "))]
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in err, err


def test_a_rate_too_small_to_send_anything_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # 1e-300 requests/s: the second request was due in 1e300 s, a traceback in its thread, and the run said "1 ok"
    for rate in ("1e-300", "0", "-1", "nan", "inf", "1e300"):
        _one_line_error(capsys, ["run", "--url", "http://127.0.0.1:9/v1", "--served-model", "m", "--rate", rate,
                                 "--no-store"], "--rate must be between")


def test_objectives_and_a_request_timeout_out_of_range_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "--url", "http://127.0.0.1:9/v1", "--served-model", "m", "--no-store"]
    _one_line_error(capsys, [*base, "--slo-ttft-ms", "-5"], "--slo-ttft-ms must be above 0")
    _one_line_error(capsys, [*base, "--slo-tpot-ms", "nan"], "--slo-tpot-ms must be above 0")
    _one_line_error(capsys, [*base, "--request-timeout", "1e300"], "--request-timeout must be above 0")


def test_max_header_mib_must_be_finite_and_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("inf", "nan", "-1", "1e300"):
        _one_line_error(capsys, ["inspect", "--max-header-mib", value, "https://example.invalid/m.gguf"],
                        "--max-header-mib")


@pytest.mark.parametrize("url", ["http://[::1", "https://[zz::1]/m.gguf", "https://host:99999/m.gguf",
                                 "https://host:port/m.gguf", "https://h/" + "a" * 10_000 + ".gguf"])
def test_a_malformed_url_is_one_line(capsys: pytest.CaptureFixture[str], url: str) -> None:
    _one_line_error(capsys, ["inspect", url], "URL")


def _profile(folder: Path, **values: object) -> Path:
    entry = {"name": "Odd GPU", "vendor": "NVIDIA", "kind": "desktop", "vram_gib": 8, "memory_bus_bits": 128,
             "memory_data_rate_gbps": 17.0, "peak_bandwidth_gbps": 272.0, "fp16_tensor_tflops": 60.0,
             "source": "a test", **values}
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["[[gpu]]", *(f"{k} = {json.dumps(v)}" for k, v in entry.items())]
    path = folder / "odd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("values", [
    {"vram_gib": 1e308},  # a byte count past any integer: a traceback
    {"vram_gib": 1e30},
    {"peak_bandwidth_gbps": 1e-301, "memory_bus_bits": 1, "memory_data_rate_gbps": 1e-300},
    {"kind": "unified", "peak_bandwidth_gbps": 1e-301},  # unified memory: no bus check to catch it
    {"fp16_tensor_tflops": 1e30},
    {"tdp_w": 1e300},
    {"memory_bus_bits": 1 << 40},
    {"name": "x" * 10_000},
])
def test_absurd_profile_values_are_refused(capsys: pytest.CaptureFixture[str], isolated_data_dir: Path,
                                           make_gguf: Callable[..., Path], values: dict[str, object]) -> None:
    _profile(isolated_data_dir / "hardware", **values)
    model = make_gguf()
    _one_line_error(capsys, ["predict", "-m", str(model), "--hw", "Odd GPU"], "odd.toml")


def test_calibrate_threads_repetitions_and_passes_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["calibrate", "-t", "100000"], "-t 100000: must be between 0")
    _one_line_error(capsys, ["calibrate", "-t", "-3"], "-t -3: must be between 0")
    _one_line_error(capsys, ["calibrate", "-r", "1000000"], "-r must be between 1")
    _one_line_error(capsys, ["calibrate", "--passes", "1000000"], "--passes must be between 1")


@pytest.mark.parametrize("name", ["", "  ", "nosuch", "../no/such"])
def test_an_unknown_or_empty_sweep_preset_is_refused(capsys: pytest.CaptureFixture[str], name: str) -> None:
    _one_line_error(capsys, ["run", "--sweep", name, "--no-store"], "--sweep" if not name.strip() else name)


def test_an_ollama_manifest_of_2_gb_is_not_read(tmp_path: Path) -> None:
    from app.model.library import _ollama_names

    manifests = tmp_path / "manifests" / "registry.ollama.ai" / "library" / "big"
    manifests.mkdir(parents=True)
    with open(manifests / "latest", "wb") as f:
        f.truncate(2 << 30)  # sparse: 2 GB that take no disk
    good = manifests.parent / "small"
    good.mkdir()
    (good / "7b").write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                                      "digest": "sha256:abc"}]}))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    names = _ollama_names(tmp_path / "manifests")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert names == {"sha256:abc": "small:7b"}
    assert grown_kib < 64 * 1024, grown_kib  # read 2 GB whole once: 4.1 GB resident


def test_choose_on_a_folder_of_many_unreadable_files_summarises(tmp_path: Path, make_gguf: Callable[..., Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(300):
        (folder / f"f{i:04d}.gguf").write_bytes(b"nope")
    make_gguf("many/a.gguf")
    assert main(["choose", str(folder), "--hw", "RTX 4060 Laptop"]) == 0
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 6 and "295 more files" in skipped[-1], err


def test_choose_when_no_file_reads_is_one_bounded_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "none"
    folder.mkdir()
    for i in range(500):
        (folder / f"f{i:04d}.gguf").write_bytes(b"nope")
    _one_line_error(capsys, ["choose", str(folder), "--hw", "RTX 4060 Laptop"], "and 497 more")


def test_choose_passes_absolute_paths_on(make_gguf: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli import choose_cmd
    from app.cli.main import build_parser

    model = make_gguf("rel.gguf")
    monkeypatch.chdir(model.parent)
    args = build_parser().parse_args(["choose", "rel.gguf", "https://example.invalid/m.gguf"])
    request = choose_cmd._request(args, 4096)
    assert request.sources == (str(model), "https://example.invalid/m.gguf")


def test_a_url_with_a_password_is_refused_without_repeating_it(capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["inspect", "https://me:hunter2secret@example.invalid/m.gguf"], "user name or password")
    _one_line_error(capsys, ["inspect", "https://me:hunter2secret@example.invalid/m.gguf", "--json"], "password")
    assert "hunter2secret" not in capsys.readouterr().err


def test_a_redirect_is_checked_as_the_url_given_was() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from app.model.gguf_http import RemoteGGUFError, RemoteOptions, remote_facts

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(302)
            self.send_header("Location", "ftp://files.example.invalid/m.gguf")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RemoteGGUFError, match="only https URLs are read"):
            remote_facts(f"http://127.0.0.1:{server.server_address[1]}/m.gguf", RemoteOptions(use_cache=False))
    finally:
        server.shutdown()
        server.server_close()


def test_environment_values_are_bounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    from app.run.client import DEFAULT_STALL_TIMEOUT_S, default_stall_timeout_s
    from app.telemetry.cpu_identity import read_cpuinfo

    for value in ("inf", "1e400", "nan", "-5", "x"):
        monkeypatch.setenv("GGUF_WORKBENCH_STALL_S", value)
        assert default_stall_timeout_s() == DEFAULT_STALL_TIMEOUT_S  # inf overflowed select(): a traceback
    fifo = tmp_path / "cpuinfo"
    os.mkfifo(fifo)
    assert read_cpuinfo(fifo) is None  # opening a FIFO with no writer blocked for ever


def test_a_served_model_name_is_bounded() -> None:
    from app.remote.session import build_remote_spec
    from app.run.params import PlanError

    for name in ("m" * 5000, "a\x1b[2Jb"):
        with pytest.raises(PlanError, match="--served-model"):
            build_remote_spec("http://127.0.0.1:9/v1", name)

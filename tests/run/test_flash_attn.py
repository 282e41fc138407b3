"""Flash attention auto: llama.cpp decides at context creation, and every row records what it used."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.errors import EXIT_TESTS_FAILED
from app.results import export
from engines import llama_log
from engines.base import FLASH_ATTN_AUTO, FLASH_ATTN_OFF, FLASH_ATTN_ON
from tests.cli_helpers import gguf_bench

_INFO, _WARN = 2, 3  # GGML_LOG_LEVEL_*


@pytest.fixture
def log() -> Iterator[None]:
    llama_log.clear_lines()
    yield
    llama_log.clear_lines()


# lines as llama.cpp 0.3.36 logs them: the first, third and fifth captured from SmolLM2 contexts on the CPU; the
# others as src/llama-context.cpp writes them (a backend without flash attention; a Grok model)
@pytest.mark.parametrize(("lines", "requested", "used"), [
    ([(_INFO, "llama_context: flash_attn            = auto\n"),
      (_INFO, "resolve_fused_ops: Flash Attention enabled\n")], FLASH_ATTN_AUTO, True),
    ([(_WARN, "resolve_fused_ops: Flash Attention not supported, set to disabled\n")], FLASH_ATTN_AUTO, False),
    ([(_INFO, "llama_init_from_model: enabling flash_attn since it is required for quantized V cache\n"),
      (_INFO, "llama_context: flash_attn            = enabled\n")], FLASH_ATTN_AUTO, True),
    ([(_WARN, "llama_init_from_model: flash_attn is not compatible with Grok - forcing off\n")], FLASH_ATTN_ON,
     False),
    ([(_INFO, "llama_context: flash_attn            = disabled\n")], FLASH_ATTN_OFF, False),
    ([(_INFO, "llama_context: flash_attn            = enabled\n")], FLASH_ATTN_ON, True),
    ([(_INFO, "llama_context: n_ctx = 256\n")], FLASH_ATTN_AUTO, None),  # no decision logged: unknown
])
def test_flash_attn_used_reads_llama_cpp_decision(log: None, lines: list[tuple[int, str]], requested: int,
                                                  used: bool | None) -> None:
    for level, msg in lines:
        assert llama_log.keep_line(level, msg)
    assert llama_log.flash_attn_used(requested) is used


@pytest.mark.heavy  # the real model and the CLI in a subprocess
def test_auto_off_and_the_quantized_v_rule_on_the_real_model(smollm2_path: Path) -> None:
    proc = gguf_bench("run", "-m", str(smollm2_path), "-p", "8", "-n", "2", "-r", "1", "-fa", "auto,0",
                      "-ctv", "f16,q8_0", "-o", "csv", "-q", "--no-predict")
    assert proc.returncode == EXIT_TESTS_FAILED, proc.stderr
    rows = {(r["flash_attn"], r["type_v"]): r for r in export.read_csv(proc.stdout)}
    assert set(rows) == {("-1", "f16"), ("0", "f16"), ("-1", "q8_0"), ("0", "q8_0")}
    # auto on this CPU: llama.cpp's probe finds flash attention supported and turns it on
    assert rows["-1", "f16"]["status"] == "ok" and rows["-1", "f16"]["flash_attn_effective"] == "1"
    assert rows["0", "f16"]["status"] == "ok" and rows["0", "f16"]["flash_attn_effective"] == "0"
    # a quantized V cache needs flash attention: auto turns it on, off fails with llama.cpp's reason (row kept)
    assert rows["-1", "q8_0"]["status"] == "ok" and rows["-1", "q8_0"]["flash_attn_effective"] == "1"
    failed = rows["0", "q8_0"]
    assert failed["status"] == "failed" and failed["flash_attn_effective"] == ""
    assert "quantized V cache requires flash_attn" in failed["error"] and "flash_attn=0" in failed["error"]
    assert failed["error_kind"] == "unsupported_settings", "refused settings are not reported as out of memory"

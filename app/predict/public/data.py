"""The reference tables of published llama-bench results (``profiles/reference/llama_bench_public*.toml``).

The public fit learns from the TRAINING tables (``TRAINING_TABLE_PATHS``: ``llama_bench_public.toml``, May 2024
builds, ``llama_bench_public_2025.toml``, builds from June 2024 on, ``llama_bench_public_2026_*.toml``, the
tables of llama.cpp's own pull requests by backend, ``llama_bench_public_2026_community.toml``, rows of community
repositories' committed llama-bench output, in the held-out tables' schema, and
``llama_bench_public_2026_scoreboards.toml``, llama.cpp's community scoreboards and the gpt-oss guide); the held-out
tables (app/predict/public/held_out.py) are read with the same parser and never fitted. Rows are held out by source:
:func:`source_key` names the publication a ``source_url`` points at, so that a test can check that no repository or
thread gives rows to both sides.

Two kinds of tables, units in the key names:

``[[model]]`` — the shape of a model, for the bytes and FLOPs per token:
    name (str), n_layer, n_embd, n_vocab, n_head, n_head_kv, head_dim (int), tied_embeddings (bool), source (str).

``[[result]]`` — one model file on one GPU:
    gpu (str, a hardware profile name), model (str, a [[model]] name), weight_type (str, "Q4_K_M"),
    ggml_type (str, the type most weights have: "Q4_K"), file_size_gib, n_params_b (number, as llama-bench prints),
    backend (str), n_gpu_layers (int), n_prompt (int) with pp_tps / pp_sd_tps (prompt tokens/s), n_gen (int) with
    tg_tps / tg_sd_tps (generated tokens/s from an empty cache): a source that published one test only (a pp-only
    or tg-only table) has 0 for the other's count and leaves out its figures; build (str, "" unknown), source_url (str),
    source_section (str), and optionally exclude_pp / exclude_tg (str: why the fit leaves that figure out).

Optional keys, for rows taken at other settings (the held-out table, app/predict/public/held_out.py, has them):
``[[result]]`` date (str, YYYY-MM-DD), flash_attn (int: 1/0, -1 when the source has no fa column), n_depth (int: KV
tokens already cached, llama-bench ``-d``), n_ubatch / n_batch (int, 0: the default), expert_bits_per_weight (number:
a MoE file whose routed experts have another type than the rest, MXFP4's 4.25), publication (str: the post or row of a
thread or table of several contributors, each another machine: "row RTX 4090 (2241453)"); ``[[model]]`` n_expert,
n_expert_used, expert_ff (int, MoE models: experts, experts per token, the per-expert FFN width), swa_window and
n_swa_layers (int: the keys a sliding-window layer attends, and how many layers use it).

Pure reading and validation; a malformed file raises ``ReferenceTableError`` with a one-line message.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.paths import PROFILES_DIR
from app.toml_tables import check_table

PUBLIC_TABLE_PATH = PROFILES_DIR / "reference" / "llama_bench_public.toml"
PUBLIC_2025_TABLE_PATH = PROFILES_DIR / "reference" / "llama_bench_public_2025.toml"
#: Rows of llama.cpp's own pull requests, by backend (CUDA and ROCm; Vulkan; Metal and SYCL), builds 2024-2026.
PUBLIC_PR_TABLE_PATHS: tuple[Path, ...] = tuple(
    PROFILES_DIR / "reference" / f"llama_bench_public_2026_{part}.toml" for part in ("cuda", "vulkan", "metal_sycl"))
#: Rows of community repositories that commit their raw llama-bench output (laptop iGPUs, newer builds).
PUBLIC_COMMUNITY_TABLE_PATH = PROFILES_DIR / "reference" / "llama_bench_public_2026_community.toml"
#: Rows of llama.cpp's community scoreboards (#4167 Apple, #15013 CUDA, #15021 ROCm, #10879 Vulkan) and the gpt-oss
#: guide's desktop sections (#15396), one publication per scoreboard row or guide section.
PUBLIC_SCOREBOARD_TABLE_PATH = PROFILES_DIR / "reference" / "llama_bench_public_2026_scoreboards.toml"
#: The tables the shipped public fit learns from (each file has its own [[model]] tables).
TRAINING_TABLE_PATHS: tuple[Path, ...] = (PUBLIC_TABLE_PATH, PUBLIC_2025_TABLE_PATH, *PUBLIC_PR_TABLE_PATHS,
                                          PUBLIC_COMMUNITY_TABLE_PATH, PUBLIC_SCOREBOARD_TABLE_PATH)
#: Published figures of one GPU by several machines, never fitted: the floor under every band (bands.machine_spread).
MACHINE_SPREAD_TABLE_PATH = PROFILES_DIR / "spread" / "machine_spread_public.toml"
GIB = 1024**3

_MODEL_KEYS: dict[str, type] = {
    "name": str, "n_layer": int, "n_embd": int, "n_vocab": int, "n_head": int, "n_head_kv": int, "head_dim": int,
    "tied_embeddings": bool, "source": str,
}
_MODEL_OPTIONAL = {"n_expert": int, "n_expert_used": int, "expert_ff": int, "swa_window": int, "n_swa_layers": int}
_RESULT_KEYS: dict[str, type | tuple[type, ...]] = {
    "gpu": str, "model": str, "weight_type": str, "ggml_type": str, "file_size_gib": (int, float),
    "n_params_b": (int, float), "backend": str, "n_gpu_layers": int, "n_prompt": int, "n_gen": int, "build": str,
    "source_url": str, "source_section": str,
}
_RESULT_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "exclude_pp": str, "exclude_tg": str, "date": str, "flash_attn": int, "n_depth": int, "n_ubatch": int,
    "n_batch": int, "pp_tps": (int, float), "pp_sd_tps": (int, float), "tg_tps": (int, float),
    "tg_sd_tps": (int, float), "expert_bits_per_weight": (int, float), "publication": str,
}
#: A test a source did not publish (a pp-only or tg-only table): its count is 0 and its figures are absent.
_PHASE_KEYS = (("n_prompt", "pp_tps", "pp_sd_tps"), ("n_gen", "tg_tps", "tg_sd_tps"))
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_GITHUB_THREAD = re.compile(r"^/([^/]+)/([^/]+)/(?:issues|pull|discussions)/(\d+)")
_GITHUB_SHORT = re.compile(r"^github:([^/@:]+)/([^/@:]+)")
_BUILD_NUMBER = re.compile(r"\((\d+)\)\s*$|^b?(\d+)$")


class ReferenceTableError(ValueError):
    """The reference table is malformed; the message is one line."""


@dataclass(frozen=True)
class ReferenceModel:
    """A model's shape: enough to count the bytes a token reads and the FLOPs it costs."""

    name: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_head: int
    n_head_kv: int
    head_dim: int
    tied_embeddings: bool
    source: str
    n_expert: int = 0  # MoE: experts per layer (0: dense)
    n_expert_used: int = 0  # MoE: experts a token is routed through
    expert_ff: int = 0  # MoE: one expert's FFN width
    swa_window: int = 0  # sliding-window attention: keys a windowed layer attends (0: none)
    n_swa_layers: int = 0  # layers that use the window

    @property
    def expert_params(self) -> float:
        """Parameters of every routed expert: 3 matrices of n_embd × expert_ff per expert per layer (gate, up,
        down); 0 for a dense model."""
        return float(self.n_layer * self.n_expert * 3 * self.n_embd * self.expert_ff) if self.n_expert else 0.0

    @property
    def inactive_expert_params(self) -> float:
        """Parameters of the experts a token is not routed through: 3 matrices of n_embd × expert_ff per expert
        per layer (gate, up, down); 0 for a dense model."""
        if not (self.n_expert and self.expert_ff):
            return 0.0
        return float(self.n_layer * (self.n_expert - self.n_expert_used) * 3 * self.n_embd * self.expert_ff)


@dataclass(frozen=True)
class ReferenceResult:
    """One published llama-bench result: a model file on a GPU, prompt and generation rates with their source."""

    gpu: str
    model: ReferenceModel
    weight_type: str
    ggml_type: str
    file_size_gib: float
    n_params_b: float
    backend: str
    n_gpu_layers: int
    n_prompt: int
    pp_tps: float
    pp_sd_tps: float
    n_gen: int
    tg_tps: float
    tg_sd_tps: float
    build: str
    source_url: str
    source_section: str
    exclude_pp: str = ""
    exclude_tg: str = ""
    date: str = ""  # YYYY-MM-DD of the publication; "" unknown
    flash_attn: int = -1  # 1/0 as llama-bench printed it; -1 unknown
    n_depth: int = 0  # KV tokens cached before the test (llama-bench -d)
    n_ubatch: int = 0  # 0: llama-bench's default
    n_batch: int = 0  # 0: llama-bench's default
    held_out: bool = False  # from the held-out table: a fit must never learn from it (PublicGpuModel refuses it)
    expert_bits_per_weight: float = 0.0  # MoE: bits per routed-expert weight where they differ from the rest (MXFP4)
    publication: str = ""  # one post or one contributor's row within ``source_url``'s thread or table ("" the whole)

    @property
    def build_number(self) -> int | None:
        """llama.cpp's build number from ``build`` ("4426e298 (2824)" or "b2824" -> 2824); None when unknown."""
        m = _BUILD_NUMBER.search(self.build.strip())
        return int(m.group(1) or m.group(2)) if m else None

    @property
    def publication_key(self) -> str:
        """The publication a row belongs to: the thread or repository (:func:`source_key`), and within a thread or
        table of several contributors the post or row (``publication``). Each is another machine, driver and build:
        the unit a cross-validation leaves out."""
        key = source_key(self.source_url)
        return f"{key} {self.publication}" if self.publication else key

    @property
    def file_bytes(self) -> float:
        return self.file_size_gib * GIB

    @property
    def n_params(self) -> float:
        return self.n_params_b * 1e9

    @property
    def label(self) -> str:
        return f"{self.gpu} · {self.model.name} {self.weight_type}"


def _check(table: dict[str, object], keys: Mapping[str, type | tuple[type, ...]],
           optional: Mapping[str, type | tuple[type, ...]], where: str) -> dict[str, Any]:
    """``table`` when it holds ``keys`` and perhaps ``optional``, each of its type, no number negative (but
    flash_attn's -1) and no name empty; else ReferenceTableError."""
    table = check_table(table, keys, optional, where, ReferenceTableError)
    for key, value in table.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0 and key != "flash_attn":
            raise ReferenceTableError(f"{where}: {key} must not be negative, got {value!r}")
    for key in ("source_url", "source_section", "source", "gpu", "model", "name"):
        if key in keys and not str(table[key]).strip():
            raise ReferenceTableError(f"{where}: {key} must not be empty")
    return table


def parse_reference(doc: dict[str, object], where: str = "reference table", *,
                    held_out: bool = False) -> list[ReferenceResult]:
    """Validate a parsed reference document and join each result to its model; ``held_out`` marks every row as
    one of the held-out table's."""
    extra = sorted(set(doc) - {"model", "result"})
    if extra:
        raise ReferenceTableError(f"{where}: unknown top-level key {extra[0]!r}")
    models: dict[str, ReferenceModel] = {}
    for i, table in enumerate(_tables(doc, "model", where)):
        m = _check(table, _MODEL_KEYS, _MODEL_OPTIONAL, f"{where}: model #{i + 1}")
        if m.get("n_expert_used", 0) > m.get("n_expert", 0) or bool(m.get("n_expert")) != bool(m.get("expert_ff")):
            raise ReferenceTableError(f"{where}: model #{i + 1}: n_expert, n_expert_used (at most n_expert) and "
                                      "expert_ff go together")
        if bool(m.get("swa_window")) != bool(m.get("n_swa_layers")) or m.get("n_swa_layers", 0) > m["n_layer"]:
            raise ReferenceTableError(f"{where}: model #{i + 1}: swa_window and n_swa_layers (at most n_layer) go "
                                      "together")
        models[m["name"]] = ReferenceModel(**m)
    results = []
    for i, table in enumerate(_tables(doc, "result", where)):
        label = f"{where}: result #{i + 1}"
        r = _check(table, _RESULT_KEYS, _RESULT_OPTIONAL, label)
        if r["model"] not in models:
            raise ReferenceTableError(f"{label}: model {r['model']!r} has no [[model]] table")
        for count, rate, sd in _PHASE_KEYS:
            if (r[count] > 0) != (r.get(rate, 0) > 0):
                raise ReferenceTableError(f"{label}: {rate} must be positive with a positive {count}, and absent "
                                          f"(or 0) with {count} = 0 (a test the source did not publish)")
            r = {**r, rate: r.get(rate, 0.0), sd: r.get(sd, 0.0)}
        if r["n_prompt"] <= 0 and r["n_gen"] <= 0:
            raise ReferenceTableError(f"{label}: neither a pp (n_prompt, pp_tps) nor a tg (n_gen, tg_tps) figure")
        if "date" in r and not _DATE.match(r["date"]):
            raise ReferenceTableError(f"{label}: date must be YYYY-MM-DD, got {r['date']!r}")
        if r.get("flash_attn", -1) not in (-1, 0, 1):
            raise ReferenceTableError(f"{label}: flash_attn must be 1, 0 or -1 (unknown), got {r['flash_attn']!r}")
        results.append(ReferenceResult(**{**r, "model": models[r["model"]], "held_out": held_out}))
    return results


def _tables(doc: dict[str, object], key: str, where: str) -> list[dict[str, object]]:
    tables = doc.get(key, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ReferenceTableError(f"{where}: {key!r} must be an array of tables ([[{key}]])")
    return tables


def load_reference(path: Path = PUBLIC_TABLE_PATH, *, held_out: bool = False) -> list[ReferenceResult]:
    """Read and validate the reference table at ``path`` (``held_out``: see :func:`parse_reference`)."""
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ReferenceTableError(f"{path.name}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ReferenceTableError(f"{path.name}: cannot read: {exc.strerror}") from None
    return parse_reference(doc, path.name, held_out=held_out)


def load_training(paths: Sequence[Path] = TRAINING_TABLE_PATHS) -> list[ReferenceResult]:
    """Every row of the training tables, file by file; each file is validated on its own (``load_reference``), so an
    error names the file it is in."""
    return [r for path in paths for r in load_reference(path)]


def source_key(url: str) -> str:
    """The publication ``url`` cites, lower-cased: "owner/repo#N" for a GitHub issue, pull request or discussion
    (one thread), "owner/repo" for a file of a repository (``https://github.com/o/r/blob/...`` or
    ``github:o/r@commit:path``), else "host/path" without query and fragment."""
    text = url.strip()
    short = _GITHUB_SHORT.match(text)
    if short:
        return f"{short[1]}/{short[2]}".lower()
    parts = urlsplit(text)
    host = parts.netloc.lower().removeprefix("www.")
    if host == "github.com":
        thread = _GITHUB_THREAD.match(parts.path)
        if thread:
            return f"{thread[1]}/{thread[2]}#{thread[3]}".lower()
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) >= 2:
            return f"{segments[0]}/{segments[1]}".lower()
    return f"{host}{parts.path.rstrip('/')}".lower()


_SPREAD_KEYS: dict[str, type | tuple[type, ...]] = {
    "gpu": str, "publication": str, "phase": str, "tps": (int, float), "source_url": str, "source_section": str}


@dataclass(frozen=True)
class SpreadFigure:
    """One machine's published figure of a question several machines answered (one model on one GPU): what the
    between-machine spread is made of."""

    gpu: str
    publication: str
    phase: str  # "decode" or "prefill"
    tps: float
    source_url: str
    source_section: str


def load_machine_spread(path: Path = MACHINE_SPREAD_TABLE_PATH) -> list[SpreadFigure]:
    """The ``[[figure]]`` tables of ``path``, validated; a malformed file raises ``ReferenceTableError`` naming it."""
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ReferenceTableError(f"{path.name}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ReferenceTableError(f"{path.name}: cannot read: {exc.strerror}") from None
    extra = sorted(set(doc) - {"figure"})
    if extra:
        raise ReferenceTableError(f"{path.name}: unknown top-level key {extra[0]!r}")
    out = []
    for i, table in enumerate(_tables(doc, "figure", path.name)):
        where = f"{path.name}: figure #{i + 1}"
        t = _check(table, _SPREAD_KEYS, {}, where)
        if t["phase"] not in ("decode", "prefill") or not t["tps"] > 0:
            raise ReferenceTableError(f"{where}: phase must be decode or prefill and tps positive")
        out.append(SpreadFigure(**{**t, "tps": float(t["tps"])}))
    return out


"""What ``gguf-bench quantize`` will write, checked before the worker starts: types, source, outputs, lineage.

Every check that can fail is made here, before anything is written, and fails with one line (QuantizeSetupError).
Each output records where it came from in its own GGUF header (``workbench.*`` keys), so the record travels with
the file: ``workbench.quantized_from`` is the source's file type, ``workbench.requantized_from`` the quantized type
at the start of its lineage (set when the source was quantized, or was itself made from a quantized file).
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from app.model.facts_cache import cached_facts
from app.model.gguf_facts import GGUFFileError
from app.model.lineage import KEY_QUANTIZED_FROM, KEY_REQUANTIZED_FROM, UNQUANTIZED, header_strings
from app.output_guard import OutputRefused, check_output_folder, same_file
from app.paths import DataDirError, absolute_path, remove_leftovers

#: The target types ``--types`` accepts, llama.cpp's names (engines.llama_cpp_quantize.QUANT_TYPES maps them).
QUANT_TYPE_NAMES: tuple[str, ...] = (
    "f32", "f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_k_s", "q5_1", "q5_0", "q4_k_m", "q4_k_s", "q4_1", "q4_0",
    "q3_k_l", "q3_k_m", "q3_k_s", "q2_k", "q2_k_s",
)
DEFAULT_TYPES = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "q3_k_m", "q2_k")
#: Suffix of an output while llama.cpp writes it; renamed to the final name only once complete.
PART_SUFFIX = ".part"
#: A part's name: ``<output>.<pid of the run>-<8 hex>.part`` (:attr:`QuantizeItem.part`); before the run token, an
#: output's part was ``<output>.part``.
PART_NAME = re.compile(r"\.(\d+)-[0-9a-f]{8}\.part$")
OLD_PART_NAME = re.compile(r"\.gguf\.part$")


class QuantizeSetupError(ValueError):
    """The quantize command cannot start; str() is one line naming the file or value and the cause."""


@dataclass(frozen=True)
class QuantizeItem:
    """One output file: ``src`` quantized to ``type_name`` at ``dst``, written as ``dst.<run>.part`` first: a name
    of this run's own, so two runs into one folder never write, rename or remove each other's file."""

    src: str
    dst: str
    type_name: str
    allow_requantize: bool
    metadata: dict[str, str] = field(default_factory=dict)
    run_token: str = field(default_factory=lambda: f"{os.getpid()}-{secrets.token_hex(4)}")

    @property
    def part(self) -> str:
        return f"{self.dst}.{self.run_token}{PART_SUFFIX}"

    def to_dict(self) -> dict[str, object]:
        return {"src": self.src, "dst": self.dst, "part": self.part, "type": self.type_name,
                "allow_requantize": self.allow_requantize, "metadata": dict(self.metadata)}


def parse_types(text: str) -> list[str]:
    """``q8_0,Q4_K_M`` -> ["q8_0", "q4_k_m"]; an unknown name is one line listing the valid ones."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not names:
        raise QuantizeSetupError("--types: no type given")
    for name in names:
        if name not in QUANT_TYPE_NAMES:
            raise QuantizeSetupError(f"--types: unknown type {name!r} (valid: {', '.join(QUANT_TYPE_NAMES)})")
    return list(dict.fromkeys(names))


def lineage(src_file_type: str, src_header: dict[str, str]) -> dict[str, str]:
    """The ``workbench.*`` header keys for a file made from a source of ``src_file_type`` with ``src_header``."""
    meta = {KEY_QUANTIZED_FROM: src_file_type}
    origin = src_header.get(KEY_REQUANTIZED_FROM) or ("" if src_file_type in UNQUANTIZED else src_file_type)
    if origin:
        meta[KEY_REQUANTIZED_FROM] = origin
    return meta


def output_name(src: Path, src_file_type: str, type_name: str) -> str:
    """``SmolLM2-135M-Instruct.Q4_1.gguf`` quantized to q8_0 -> ``SmolLM2-135M-Instruct.Q8_0.gguf``."""
    stem = src.name.removesuffix(".gguf")
    for sep in (".", "-", "_"):
        if stem.upper().endswith(sep + src_file_type.upper()):
            stem = stem[: -len(src_file_type) - 1]
            break
    return f"{stem}.{type_name.upper()}.gguf"


def _absolute(path: str | Path, flag: str) -> Path:
    try:
        return absolute_path(path, flag)
    except DataDirError as e:
        raise QuantizeSetupError(str(e)) from None


def remove_stale_parts(folder: str | Path) -> list[Path]:
    """The ``.part`` files in ``folder`` that a quantize killed before it could clean up left behind (its process is
    gone), removed; what was removed. A run's own parts and those of a run still going are kept."""
    return remove_leftovers(Path(folder), PART_NAME, unowned=OLD_PART_NAME)


def plan_quantize(src: str | Path, types: list[str], out_dir: str | Path, *, allow_requantize: bool = False,
                  force: bool = False) -> list[QuantizeItem]:
    """The outputs to write, after every check; QuantizeSetupError (one line) when one fails."""
    src_path = _absolute(src, "-m")  # the worker runs in another folder: a relative path would not be found there
    try:
        facts = cached_facts(src_path)
    except GGUFFileError as e:
        raise QuantizeSetupError(str(e)) from None
    if facts.file_type not in UNQUANTIZED and not allow_requantize:
        raise QuantizeSetupError(
            f"{src_path}: already quantized ({facts.file_type}); quantizing it again loses quality on top of "
            "its own: pass --allow-requantize to do it anyway (the outputs then record requantized_from)")
    out = _absolute(out_dir, "--out")
    try:
        check_output_folder(out_dir, "--out")  # a model, a link to one, a FIFO: never a folder to fill
    except OutputRefused as e:
        raise QuantizeSetupError(str(e)) from None
    meta = lineage(facts.file_type, header_strings(src_path))
    items = []
    run_token = f"{os.getpid()}-{secrets.token_hex(4)}"  # one per run: its outputs' .part names
    for name in types:
        dst = out / output_name(src_path, facts.file_type, name)
        if same_file(dst, src_path):  # by path, link or inode
            raise QuantizeSetupError(f"{dst}: is the source file; choose another --out folder")
        if os.path.lexists(dst) and not force:
            raise QuantizeSetupError(f"{dst}: already exists (pass --force to overwrite it)")
        if os.path.lexists(dst) and (dst.is_symlink() or not dst.is_file()):
            raise QuantizeSetupError(f"{dst}: is not a regular file (a link, a FIFO, a device or a folder); "
                                     "--force replaces only an output file: remove it first")
        items.append(QuantizeItem(str(src_path), str(dst), name, allow_requantize, meta, run_token))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise QuantizeSetupError(f"--out {out_dir}: cannot create the folder ({e.strerror or e})") from None
    return items

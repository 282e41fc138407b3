"""Find GGUF models on disk: single files, folders, and the caches of Hugging Face, LM Studio and Ollama.

Qt-free; the GUI's library panel calls these functions off the GUI thread. Scanning never raises for a bad
file or a missing folder: a file that cannot be read becomes an entry with ``error`` set.

Where each tool keeps its models:

* Hugging Face hub cache: ``$HF_HUB_CACHE`` or ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``;
  ``models--<org>--<name>/snapshots/<revision>/<file>.gguf`` are symlinks into ``blobs/`` (resolved here, so a
  file shared by two revisions is listed once).
* LM Studio: ``~/.lmstudio/models/<publisher>/<repo>/<file>.gguf`` (and the older ``~/.cache/lm-studio/models``).
* Ollama: ``$OLLAMA_MODELS`` or ``~/.ollama/models``; weights are content-addressed blobs
  ``blobs/sha256-<hex>`` (recognised by the ``GGUF`` magic), named by the JSON manifests under
  ``manifests/<registry>/<namespace>/<model>/<tag>`` whose ``application/vnd.ollama.image.model`` layer has the
  blob's digest.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from app.bounded_read import read_bounded_text
from app.model.gguf_facts import GGUF_MAGIC_BYTES, GGUFFileError, read_model_facts

OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"
#: Shards after the first of a split model (``-00002-of-00003.gguf``): llama.cpp opens the first one.
_LATER_SHARD = re.compile(r"-0*([2-9]|[1-9]\d+)-of-\d+\.gguf$", re.IGNORECASE)
MAX_FILES_PER_FOLDER = 5000
#: An Ollama manifest is a few hundred bytes of JSON: a larger file is not one (a 2 GB one was read whole).
MAX_MANIFEST_BYTES = 1 << 20
#: Manifests read at most (a store with this many models is far past any real one).
MAX_OLLAMA_MANIFESTS = 10_000


@dataclass(frozen=True)
class ModelEntry:
    """One model file found on disk; facts are filled by :func:`describe` (``error`` when unreadable)."""

    path: str  # resolved real path
    name: str  # display name
    source: str  # "file", "folder", "Hugging Face", "LM Studio", "Ollama", "built-in"
    size_bytes: int = 0
    quantization: str = ""
    n_params: int | None = None
    architecture: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def is_gguf_file(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the ``GGUF`` magic (cheap: reads 4 bytes, never raises)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC_BYTES
    except OSError:
        return False


def _real(path: Path) -> Path:
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return path


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def entry_for_file(path: str | os.PathLike[str], source: str = "file", name: str | None = None) -> ModelEntry:
    """An entry for one file, without reading its facts yet."""
    p = Path(path).expanduser()
    real = _real(p)
    return ModelEntry(path=str(real), name=name or p.name, source=source, size_bytes=_size(real))


def describe(entry: ModelEntry) -> ModelEntry:
    """The entry with quantization, parameter count and architecture read from the file, or ``error`` set."""
    try:
        facts = read_model_facts(entry.path)
    except GGUFFileError as e:
        return replace(entry, error=e.cause)
    except Exception as e:  # noqa: BLE001 - one bad file never stops a scan
        return replace(entry, error=f"{type(e).__name__}: {e}")
    return replace(entry, size_bytes=facts.file_bytes, quantization=facts.file_type, n_params=facts.n_params,
                   architecture=facts.architecture, error="")


def walk_files(root: Path, *, follow_links: bool = False,
               skip_hidden: bool = False) -> Iterator[tuple[Path, list[str]]]:
    """(folder, its file names) under ``root`` in name order, each folder once: a directory reached twice (a link
    loop such as ``ln -s . again``, or two links to one folder) is not walked again, and with ``follow_links`` a link
    to a folder is followed only when it stays inside ``root`` (a link to ``/`` is not). Unreadable folders are
    skipped; ``skip_hidden`` leaves out folders whose names start with a dot."""
    try:
        top = root.resolve()
    except (OSError, RuntimeError):
        return
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda _e: None, followlinks=follow_links):
        here = Path(dirpath)
        try:
            st = here.stat()
            real = here.resolve()
        except (OSError, RuntimeError):
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen or (real != top and top not in real.parents):
            dirnames[:] = []  # walked already, or a link out of the root: neither it nor anything below it
            continue
        seen.add((st.st_dev, st.st_ino))
        dirnames[:] = sorted(d for d in dirnames if not (skip_hidden and d.startswith(".")))
        yield here, filenames


def _walk_gguf(root: Path, limit: int = MAX_FILES_PER_FOLDER) -> Iterator[Path]:
    """``*.gguf`` files under ``root`` (case-insensitive suffix, hidden folders skipped, later shards skipped)."""
    count = 0
    for dirpath, filenames in walk_files(root, skip_hidden=True):
        for fn in sorted(filenames):
            if fn.lower().endswith(".gguf") and not _LATER_SHARD.search(fn):
                yield dirpath / fn
                count += 1
                if count >= limit:
                    return


def scan_folder(folder: str | os.PathLike[str], source: str = "folder") -> list[ModelEntry]:
    """Every GGUF file under ``folder``, named by its path relative to the folder."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        return []
    return [entry_for_file(p, source, name=str(p.relative_to(root))) for p in _walk_gguf(root)]


# --------------------------------------------------------------------------------------------- Hugging Face


def hf_hub_dir(home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    return (home or Path.home()) / ".cache" / "huggingface" / "hub"


def scan_hf_cache(hub: Path) -> list[ModelEntry]:
    """GGUFs in a Hugging Face hub cache; snapshot symlinks resolved to their blobs, one entry per blob."""
    out: list[ModelEntry] = []
    if not hub.is_dir():
        return out
    for repo_dir in sorted(hub.glob("models--*")):
        repo = repo_dir.name.removeprefix("models--").replace("--", "/")
        snapshots = repo_dir / "snapshots"
        if not snapshots.is_dir():
            continue
        for rev in sorted(snapshots.iterdir()):
            if not rev.is_dir():
                continue
            for dirpath, files in walk_files(rev, follow_links=True):
                for fn in sorted(files):
                    if fn.lower().endswith(".gguf") and not _LATER_SHARD.search(fn):
                        link = dirpath / fn
                        rel = link.relative_to(rev)
                        out.append(entry_for_file(link, "Hugging Face", name=f"{repo}/{rel}"))
    return out


# --------------------------------------------------------------------------------------------- LM Studio


def lmstudio_dirs(home: Path | None = None) -> list[Path]:
    h = home or Path.home()
    return [h / ".lmstudio" / "models", h / ".cache" / "lm-studio" / "models"]


def scan_lmstudio(dirs: Iterable[Path]) -> list[ModelEntry]:
    out: list[ModelEntry] = []
    for d in dirs:
        out.extend(scan_folder(d, source="LM Studio"))
    return out


# --------------------------------------------------------------------------------------------- Ollama


def ollama_dir(home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("OLLAMA_MODELS"):
        return Path(env["OLLAMA_MODELS"])
    return (home or Path.home()) / ".ollama" / "models"


def _ollama_names(manifests: Path) -> dict[str, str]:
    """Blob digest (``sha256:<hex>``) → model name (``llama3.2:3b``, ``user/model:tag``) from the manifests."""
    names: dict[str, str] = {}
    if not manifests.is_dir():
        return names
    found: list[Path] = []
    for d, files in walk_files(manifests):
        found += [d / fn for fn in files]
        if len(found) >= MAX_OLLAMA_MANIFESTS:  # more manifests than any store holds: the first ones name blobs
            break
    for path in sorted(found[:MAX_OLLAMA_MANIFESTS]):
        try:  # a regular file of at most MAX_MANIFEST_BYTES (a manifest is a few hundred bytes): never read whole
            doc = json.loads(read_bounded_text(path, MAX_MANIFEST_BYTES))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            continue
        if not isinstance(doc, dict):
            continue
        parts = path.relative_to(manifests).parts  # registry, namespace, model, tag
        if len(parts) < 3:
            continue
        *prefix, model, tag = parts
        namespace = prefix[1] if len(prefix) >= 2 else ""
        registry = prefix[0] if prefix else ""
        label = f"{model}:{tag}" if namespace in ("", "library") else f"{namespace}/{model}:{tag}"
        if registry and registry != "registry.ollama.ai":
            label = f"{registry}/{label}"
        for layer in doc.get("layers") or []:
            if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_MEDIA_TYPE:
                digest = str(layer.get("digest", ""))
                names.setdefault(digest, label)
    return names


def scan_ollama(root: Path) -> list[ModelEntry]:
    """GGUF blobs in Ollama's store, named from its manifests (a blob no manifest names keeps its digest)."""
    blobs = root / "blobs"
    if not blobs.is_dir():
        return []
    names = _ollama_names(root / "manifests")
    out: list[ModelEntry] = []
    for blob in sorted(blobs.iterdir()):
        if not blob.is_file() or not is_gguf_file(blob):
            continue
        digest = blob.name.replace("-", ":", 1)  # sha256-abc → sha256:abc
        name = names.get(digest) or f"{blob.name[:19]}…"
        out.append(entry_for_file(blob, "Ollama", name=name))
    return out


# --------------------------------------------------------------------------------------------- all of them


def scan_known_locations(home: Path | None = None, env: dict[str, str] | None = None) -> list[ModelEntry]:
    """GGUFs in the Hugging Face cache, LM Studio's folders and Ollama's store (deduplicated by real path)."""
    found = [*scan_hf_cache(hf_hub_dir(home, env)), *scan_lmstudio(lmstudio_dirs(home)),
             *scan_ollama(ollama_dir(home, env))]
    return dedupe(found)


def dedupe(entries: Iterable[ModelEntry]) -> list[ModelEntry]:
    """First entry per real path, order kept."""
    seen: dict[str, ModelEntry] = {}
    for e in entries:
        seen.setdefault(e.path, e)
    return list(seen.values())

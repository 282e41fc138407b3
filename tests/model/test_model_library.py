"""Model library scanning on fake directory trees: HF cache symlinks, LM Studio folders, Ollama blobs + manifests."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.model import library as ml


def _hf_repo(hub: Path, repo: str, files: dict[str, Path], rev: str = "abc123") -> None:
    """A hub cache repo whose snapshot files are symlinks into blobs/ (as huggingface_hub writes them)."""
    repo_dir = hub / ("models--" + repo.replace("/", "--"))
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snap = repo_dir / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    for rel, src in files.items():
        blob = repo_dir / "blobs" / f"sha-{src.stem}"
        if not blob.exists():
            blob.write_bytes(src.read_bytes())
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))


def test_scan_folder_finds_gguf_and_skips_later_shards(tmp_path: Path, make_gguf: Callable[..., Path]) -> None:
    root = tmp_path / "models"
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    src = make_gguf("src.gguf")
    for rel in ("a.gguf", "sub/B.GGUF", "big-00001-of-00002.gguf", "big-00002-of-00002.gguf", ".hidden/x.gguf"):
        (root / rel).write_bytes(src.read_bytes())
    (root / "notes.txt").write_text("hi")
    names = sorted(e.name for e in ml.scan_folder(root))
    assert names == ["a.gguf", "big-00001-of-00002.gguf", "sub/B.GGUF"]
    assert ml.scan_folder(tmp_path / "missing") == []


def test_hf_cache_resolves_symlinks_and_dedupes(tmp_path: Path, make_gguf: Callable[..., Path]) -> None:
    hub = tmp_path / "hub"
    q4 = make_gguf("q4.gguf")
    _hf_repo(hub, "org/Tiny-GGUF", {"tiny.Q4.gguf": q4, "README.md": q4}, rev="r1")
    _hf_repo(hub, "org/Tiny-GGUF", {"tiny.Q4.gguf": q4}, rev="r2")  # same blob, second revision
    entries = ml.scan_hf_cache(hub)
    assert len(entries) == 2
    assert all(e.source == "Hugging Face" and e.name == "org/Tiny-GGUF/tiny.Q4.gguf" for e in entries)
    assert Path(entries[0].path).parent.name == "blobs"
    assert len(ml.dedupe(entries)) == 1


def test_hf_hub_dir_env_overrides(tmp_path: Path) -> None:
    assert ml.hf_hub_dir(tmp_path, {}) == tmp_path / ".cache" / "huggingface" / "hub"
    assert ml.hf_hub_dir(tmp_path, {"HF_HOME": "/x"}) == Path("/x/hub")
    assert ml.hf_hub_dir(tmp_path, {"HF_HOME": "/x", "HF_HUB_CACHE": "/y"}) == Path("/y")


def test_ollama_blobs_named_from_manifests(tmp_path: Path, make_gguf: Callable[..., Path]) -> None:
    root = tmp_path / ".ollama" / "models"
    blobs = root / "blobs"
    blobs.mkdir(parents=True)
    gguf_bytes = make_gguf("w.gguf").read_bytes()
    (blobs / "sha256-aaaa").write_bytes(gguf_bytes)
    (blobs / "sha256-bbbb").write_bytes(gguf_bytes + b"x")  # GGUF with no manifest
    (blobs / "sha256-cccc").write_text('{"template": "not a model"}')  # a template/params blob
    man = root / "manifests" / "registry.ollama.ai" / "library" / "llama3.2" / "3b"
    man.parent.mkdir(parents=True)
    man.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:cccc"},
        {"mediaType": ml.OLLAMA_MODEL_MEDIA_TYPE, "digest": "sha256:aaaa"},
    ]}))
    user = root / "manifests" / "registry.ollama.ai" / "someone" / "tiny" / "latest"
    user.parent.mkdir(parents=True)
    user.write_text("not json")
    entries = {e.path.rsplit("/", 1)[-1]: e for e in ml.scan_ollama(root)}
    assert set(entries) == {"sha256-aaaa", "sha256-bbbb"}
    assert entries["sha256-aaaa"].name == "llama3.2:3b"
    assert entries["sha256-bbbb"].name.startswith("sha256-bbbb")
    assert all(e.source == "Ollama" for e in entries.values())


def test_scan_known_locations_with_fake_home(tmp_path: Path, make_gguf: Callable[..., Path]) -> None:
    home = tmp_path / "home"
    src = make_gguf("m.gguf")
    for d in (home / ".lmstudio" / "models" / "pub" / "repo", home / ".cache" / "lm-studio" / "models" / "p" / "r"):
        d.mkdir(parents=True)
        (d / "m.gguf").write_bytes(src.read_bytes())
    _hf_repo(home / ".cache" / "huggingface" / "hub", "org/x", {"x.gguf": src})
    entries = ml.scan_known_locations(home=home, env={})
    assert sorted(e.source for e in entries) == ["Hugging Face", "LM Studio", "LM Studio"]
    assert "pub/repo/m.gguf" in {e.name for e in entries}
    assert ml.scan_known_locations(home=tmp_path / "nobody", env={}) == []


def test_describe_reads_facts_and_reports_errors(tmp_path: Path, make_gguf: Callable[..., Path]) -> None:
    good = ml.describe(ml.entry_for_file(make_gguf("g.gguf", tensor_dtype="Q8_0")))
    assert good.ok and good.quantization == "Q8_0" and good.n_params and good.size_bytes > 0
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00")
    entry = ml.describe(ml.entry_for_file(bad))
    assert not entry.ok and "truncated" in entry.error
    missing = ml.describe(ml.entry_for_file(tmp_path / "nope.gguf"))
    assert "not found" in missing.error
    assert ml.is_gguf_file(make_gguf("h.gguf")) and not ml.is_gguf_file(tmp_path / "nope.gguf")


@pytest.mark.parametrize("name,later", [("m-00001-of-00003.gguf", False), ("m-00002-of-00003.gguf", True),
                                        ("m-00010-of-00012.gguf", True), ("m.gguf", False)])
def test_later_shard_pattern(name: str, later: bool) -> None:
    assert bool(ml._LATER_SHARD.search(name)) is later

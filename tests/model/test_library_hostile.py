"""Library scans on hostile folders: link loops and links out of the root."""

from __future__ import annotations

from pathlib import Path


def test_scans_end_on_link_loops_and_never_leave_their_root(tmp_path: Path) -> None:
    """Issue #29 case 6: a Hugging Face cache with two ``ln -s .`` loops (or a link to ``/``) made the scan walk
    forever. Each folder is walked once, and links out of the cache are not followed."""
    import threading

    from app.model.library import scan_folder, scan_hf_cache, scan_ollama
    from tests.gguf_synth import write_synthetic_gguf

    hub = tmp_path / "hub"
    snap = hub / "models--u--r" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    write_synthetic_gguf(snap / "m.gguf")
    (snap / "again").symlink_to(".")
    (snap / "loop").symlink_to("..")
    (snap / "root").symlink_to("/")
    ollama = tmp_path / "ollama"
    (ollama / "manifests" / "registry.ollama.ai").mkdir(parents=True)
    (ollama / "manifests" / "registry.ollama.ai" / "self").symlink_to("..")
    found: dict[str, object] = {}

    def scan() -> None:
        found["hf"] = scan_hf_cache(hub)
        found["folder"] = scan_folder(tmp_path)
        found["ollama"] = scan_ollama(ollama)

    t = threading.Thread(target=scan, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "a scan did not end"
    assert [e.name for e in found["hf"]] == ["u/r/m.gguf"]  # type: ignore[union-attr]
    assert [e.name for e in found["folder"]] == ["hub/models--u--r/snapshots/abc/m.gguf"]  # type: ignore[union-attr]
    assert found["ollama"] == []

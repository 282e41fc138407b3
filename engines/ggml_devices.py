"""ggml's backend and device registry, asked from the installed llama.cpp's own libraries through ctypes.

llama-cpp-python does not bind the registry (``ggml_backend_reg_*``, ``ggml_backend_dev_*``; see
``ggml/include/ggml-backend.h``), so this module loads ``libggml`` from ``llama_cpp/lib`` and asks it: which
backends the build has (CPU, CUDA, Vulkan, Metal…) and which devices each can see, with their type and memory.
It never imports ``llama_cpp`` and never loads a model.

Run it in a child process, ``python -m engines.ggml_devices --json``: a GPU driver that crashes while its
backend enumerates devices then takes only the child down (the caller turns that into a reason, not a crash).
llama.cpp's Vulkan backend skips CPU-type Vulkan devices (Mesa's llvmpipe) unless ``GGML_VK_VISIBLE_DEVICES``
is set; the caller sets it when the user has not.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: enum ggml_backend_dev_type, in its order in ggml-backend.h.
DEVICE_TYPES = ("CPU", "GPU", "IGPU", "ACCEL", "META")
#: The libraries that hold the registry: libggml (enumeration), libggml-base (names, memory, types).
_LIBS = {"linux": ("libggml.so", "libggml-base.so"), "darwin": ("libggml.dylib", "libggml-base.dylib"),
         "win32": ("ggml.dll", "ggml-base.dll")}


def ggml_libraries(lib_dir: Path) -> tuple[Path, Path]:
    """(libggml, libggml-base) in ``lib_dir``: the very files libllama loads, so calls here reach its registry.

    A wheel cannot hold symlinks, so ``libggml.so``, ``libggml.so.0`` and ``libggml.so.0.25.3`` are three copies of
    one library, and opening another name than libllama's (its soname, ``libggml.so.0``) maps a second copy with a
    registry and devices of its own. The soname is the name with one version number, where there is one.
    """
    out = []
    for name in _LIBS.get(sys.platform, _LIBS["linux"]):
        path = lib_dir / name
        if name.endswith(".so"):
            sonames = sorted(p for p in lib_dir.glob(f"{name}.*") if p.suffix[1:].isdigit())
            path = sonames[0] if sonames else path
        out.append(path)
    return out[0], out[1]


@dataclass(frozen=True)
class GgmlDevice:
    """One device a backend sees; memory in bytes as the backend reports it (0 when it does not know)."""

    name: str
    description: str
    type: str  # one of DEVICE_TYPES
    backend: str
    memory_free_bytes: int
    memory_total_bytes: int


@dataclass(frozen=True)
class GgmlRegistry:
    """What the registry holds: backend names in registration order, and every device."""

    lib_dir: str
    backends: list[str] = field(default_factory=list)
    devices: list[GgmlDevice] = field(default_factory=list)
    #: The CPU backend's extra buffer types, in the order llama.cpp tries them for weights when repacking is on
    #: (``use_extra_bufts``; llama-bench ``--repack 1``): "AMX", "CPU_REPACK", "CPU_KLEIDIAI"…; [] if none
    cpu_extra_buffers: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def find_lib_dir() -> Path | None:
    """The folder llama_cpp loads its libraries from: ``LLAMA_CPP_LIB_PATH`` when set (llama_cpp's own override,
    even when it names no folder: then runs fail, and so must this), else ``site-packages/llama_cpp/lib`` (in a
    frozen app: the bundle's copy), found without importing llama_cpp; None when it is not installed."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override)
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return lib if lib.is_dir() else None


def open_ggml(lib_dir: Path) -> tuple[ctypes.CDLL, ctypes.CDLL]:
    """(libggml, libggml-base) from ``lib_dir``, libllama's own copies (:func:`ggml_libraries`), with the C
    signatures of the registry calls the workbench makes declared."""
    ggml_path, base_path = ggml_libraries(lib_dir)
    mode = getattr(ctypes, "RTLD_GLOBAL", 0)
    base = ctypes.CDLL(str(base_path), mode=mode)
    ggml = ctypes.CDLL(str(ggml_path), mode=mode)
    _bind(ggml, base)
    return ggml, base


def _bind(ggml: ctypes.CDLL, base: ctypes.CDLL) -> None:
    """Declare the C signatures used (pointers are opaque ``void *``)."""
    vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    for lib, name, res, args in (
        (ggml, "ggml_backend_reg_count", sz, []),
        (ggml, "ggml_backend_reg_get", vp, [sz]),
        (ggml, "ggml_backend_dev_count", sz, []),
        (ggml, "ggml_backend_dev_get", vp, [sz]),
        (base, "ggml_backend_reg_name", cp, [vp]),
        (base, "ggml_backend_dev_name", cp, [vp]),
        (base, "ggml_backend_dev_description", cp, [vp]),
        (base, "ggml_backend_dev_type", ctypes.c_int, [vp]),
        (base, "ggml_backend_dev_backend_reg", vp, [vp]),
        (base, "ggml_backend_dev_memory", None, [vp, ctypes.POINTER(sz), ctypes.POINTER(sz)]),
        (base, "ggml_backend_reg_get_proc_address", vp, [vp, cp]),
        (base, "ggml_backend_buft_name", cp, [vp]),
        (base, "ggml_backend_dev_buffer_type", vp, [vp]),
        (base, "ggml_backend_cpu_buffer_type", vp, []),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", errors="replace") if raw else ""


#: ggml-backend.h's ``ggml_backend_dev_get_extra_bufts_t``: a device -> a NULL-terminated array of buffer types.
_GET_EXTRA_BUFTS = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
_MAX_EXTRA_BUFTS = 16


def _extra_buffer_names(base: ctypes.CDLL, reg: int, dev: int) -> list[str]:
    """The names of a device's extra buffer types, asked through the backend's ``get_proc_address`` (CPU only has
    them); [] when the backend does not offer the function."""
    addr = base.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
    if not addr:
        return []
    bufts = _GET_EXTRA_BUFTS(addr)(dev)
    names: list[str] = []
    for i in range(_MAX_EXTRA_BUFTS):
        if not bufts or not bufts[i]:
            break
        names.append(_text(base.ggml_backend_buft_name(bufts[i])))
    return names


def _load_all_if_dynamic(ggml: ctypes.CDLL, lib_dir: Path) -> None:
    """A ``GGML_BACKEND_DL`` build registers no backend until its libraries are loaded: load them from lib_dir."""
    if ggml.ggml_backend_reg_count() == 0:
        fn = ggml.ggml_backend_load_all_from_path
        fn.restype, fn.argtypes = None, [ctypes.c_char_p]
        fn(str(lib_dir).encode())


def query_registry(lib_dir: Path | None = None) -> GgmlRegistry:
    """Load libggml from ``lib_dir`` (default: the installed llama-cpp-python's) and list backends and devices.

    Raises OSError when the libraries are missing or cannot be loaded.
    """
    lib_dir = lib_dir if lib_dir is not None else find_lib_dir()
    if lib_dir is None:
        raise OSError("llama-cpp-python is not installed (no llama_cpp/lib folder)")
    ggml, base = open_ggml(lib_dir)
    _load_all_if_dynamic(ggml, lib_dir)
    backends = [_text(base.ggml_backend_reg_name(ggml.ggml_backend_reg_get(i)))
                for i in range(ggml.ggml_backend_reg_count())]
    devices: list[GgmlDevice] = []
    extra: list[str] = []
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        reg = base.ggml_backend_dev_backend_reg(dev)
        if _text(base.ggml_backend_reg_name(reg)) == "CPU" and not extra:
            extra = _extra_buffer_names(base, reg, dev)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        base.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        kind = base.ggml_backend_dev_type(dev)
        devices.append(GgmlDevice(
            name=_text(base.ggml_backend_dev_name(dev)),
            description=_text(base.ggml_backend_dev_description(dev)),
            type=DEVICE_TYPES[kind] if 0 <= kind < len(DEVICE_TYPES) else f"type {kind}",
            backend=_text(base.ggml_backend_reg_name(base.ggml_backend_dev_backend_reg(dev))),
            memory_free_bytes=int(free.value), memory_total_bytes=int(total.value)))
    return GgmlRegistry(lib_dir=str(lib_dir), backends=backends, devices=devices, cpu_extra_buffers=extra)


def main(argv: list[str] | None = None) -> int:
    """Print the registry (``--json``: one JSON object on stdout); exit 1 with the reason when it cannot load."""
    ap = argparse.ArgumentParser(prog="python -m engines.ggml_devices", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--lib-dir", type=Path, help="the folder of libggml (default: llama_cpp/lib)")
    args = ap.parse_args(argv)
    try:
        reg = query_registry(args.lib_dir)
    except (OSError, AttributeError) as e:  # AttributeError: a libggml without the registry symbols
        print(f"ggml registry unavailable: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(reg.to_json()))
    else:
        print(f"backends: {', '.join(reg.backends) or 'none'} ({reg.lib_dir})")
        print(f"CPU extra buffer types: {', '.join(reg.cpu_extra_buffers) or 'none'}")
        for d in reg.devices:
            print(f"  {d.name} [{d.backend}, {d.type}] {d.description} "
                  f"({d.memory_free_bytes / 2**30:.1f}/{d.memory_total_bytes / 2**30:.1f} GiB free)")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Build, on a machine WITHOUT a GPU or CUDA toolkit, the CUDA build of llama.cpp that benchmarks/gpu_check.sh
# carries to an NVIDIA machine that has no network and no CUDA toolkit.
#
#   packaging/build-cuda-carry.sh [--dry-run] [CARRY_DIR]        # default CARRY_DIR: ./gpu-carry
#
# The CUDA 13 compiler comes from PyPI, into a build venv (no system toolkit): nvidia-cuda-nvcc, nvidia-nvvm,
# nvidia-cuda-runtime, nvidia-cuda-cccl, nvidia-cublas. Then:
#   1. the pinned llama-cpp-python sdist is built into a wheel (no build isolation: the venv's cmake, ninja and
#      scikit-build-core, so the kept build folder can be built again) with
#      CMAKE_ARGS="-DGGML_CUDA=on -DGGML_CUDA_NO_VMM=ON -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH ..." (one GPU
#      architecture only: 90 = H100/H200, 89 = RTX 40xx, 86 = RTX 30xx, 120 = RTX 50xx), keeping its CMake build
#      folder; the pip packages' unversioned libcudart.so/libcublas.so symlinks are made first (CMake's
#      FindCUDAToolkit looks for them) and LD_LIBRARY_PATH points at them for the link step;
#   2. llama-bench from the same build folder (the tools reconfigured on, only that target built), for fidelity;
#   3. the carry: CARRY_DIR/llama_cpp/ (the package from the wheel, libraries stripped), CARRY_DIR/bin/llama-bench,
#      CARRY_DIR/lib/libcudart.so.13 (small) and MANIFEST.txt (flags, sizes). cuBLAS is NOT carried unless
#      CARRY_CUBLAS=1: libcublasLt alone is hundreds of MB, far over the ~60 MiB budget; gpu_check.sh looks for
#      the target's own (a CUDA runtime, a pip nvidia-cublas in any Python there, /usr/local/cuda).
# Only the flash-attention kernels for an f16 KV cache are compiled (GGML_CUDA_FA_QUANTS=f16-f16; gpu_check uses
# f16), to keep libggml-cuda small: the issue measured 66 MB for one architecture with the default set.
# Cost, as measured for issue #8: about 18 minutes of both cores of this 2-core machine for the wheel (not re-run).
#
# Environment: CUDA_ARCH (default 90), GGUF_CUDA_WORK (build folder, default ~/.cache/gguf-workbench/cuda-build),
# CARRY_CUBLAS=1, PYTHON3 (the python that makes the build venv, default python3), JOBS (default nproc).
# --dry-run prints every step, checks what the build needs, and changes nothing.
# Exit codes: 0 done (dry run: ready), 1 a step failed, 2 usage, 3 something the build needs is missing.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
usage="usage: packaging/build-cuda-carry.sh [--dry-run] [CARRY_DIR]"
dry=0 carry=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    -*) echo "build-cuda-carry.sh: unknown option '$arg'. $usage" >&2; exit 2 ;;
    *) carry="$arg" ;;
  esac
done
carry="${carry:-$root/gpu-carry}"
arch="${CUDA_ARCH:-90}"
work="${GGUF_CUDA_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/gguf-workbench/cuda-build}"
py3="${PYTHON3:-python3}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
venv="$work/venv"
vpy="$venv/bin/python"
say() { echo "build-cuda-carry: $*"; }
run() {  # print the step; run it unless this is a dry run; stop on failure
  if [ "$dry" = 1 ]; then say "would run: $*"; return 0; fi
  say "running: $*"
  "$@" || { say "failed after $((SECONDS - start_s)) s: $*" >&2; exit 1; }
}
start_s=$SECONDS

version="$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' "$root/pyproject.toml" | head -n 1)"
[ -n "$version" ] || { say "no llama-cpp-python==VERSION pin in $root/pyproject.toml" >&2; exit 2; }
case "$arch" in *[!0-9\;]*|"") say "CUDA_ARCH must be numbers like 90 or 89;90, not '$arch'" >&2; exit 2 ;; esac

missing=()
command -v "$py3" >/dev/null 2>&1 || missing+=("$py3 (a Python 3.10+ to make the build venv)")
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || missing+=("a C++ compiler (sudo apt install build-essential)")
command -v strip >/dev/null 2>&1 || missing+=("strip (binutils)")
avail_kib="$(df -Pk "$(dirname "$work")" 2>/dev/null | awk 'NR==2 {print $4}')"
[ -n "${avail_kib:-}" ] && [ "$avail_kib" -lt 8000000 ] && missing+=("8 GB free under $(dirname "$work") (the CUDA packages and the build; $((avail_kib / 1024)) MiB free)")

say "llama-cpp-python $version, CUDA architecture $arch, build folder $work, carry $carry"
if [ "${#missing[@]}" -gt 0 ]; then
  say "missing:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  exit 3
fi

cuda_pkgs=(nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-cccl nvidia-cublas)
run mkdir -p "$work"
[ -x "$vpy" ] || run "$py3" -m venv "$venv"
run "$vpy" -m pip install --quiet "${cuda_pkgs[@]}" cmake ninja "scikit-build-core[pyproject]>=0.9.2"
run "$vpy" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work/sdist"
src="$work/src/llama_cpp_python-$version"
run mkdir -p "$work/src"
run tar -xzf "$work/sdist/llama_cpp_python-$version.tar.gz" -C "$work/src"

# The CUDA root inside the pip packages (CUDA 13 wheels: site-packages/nvidia/cu13/{bin,include,lib,nvvm}).
if [ "$dry" = 1 ]; then cuda="<site-packages>/nvidia/cu13"
else
  nvcc="$(find "$venv" -path '*/nvidia/*' -name nvcc -type f | head -n 1)"
  [ -n "$nvcc" ] || { say "no nvcc in the pip packages under $venv" >&2; exit 1; }
  cuda="$(dirname "$(dirname "$nvcc")")"
fi
for lib in cudart cublas cublasLt; do  # FindCUDAToolkit wants the unversioned names
  if [ "$dry" = 1 ]; then say "would link $cuda/lib/lib$lib.so -> lib$lib.so.13"
  else
    real="$(ls "$cuda"/lib/lib$lib.so.[0-9]* 2>/dev/null | head -n 1)"
    [ -n "$real" ] && ln -sf "$(basename "$real")" "$cuda/lib/lib$lib.so"
  fi
done
flags="-DGGML_CUDA=on -DGGML_CUDA_NO_VMM=ON -DCMAKE_CUDA_ARCHITECTURES=$arch -DCUDAToolkit_ROOT=$cuda"
flags="$flags -DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc -DGGML_CUDA_FA_QUANTS=f16-f16"
say "CMAKE_ARGS=\"$flags\""
export CUDA_HOME="$cuda" PATH="$cuda/bin:$venv/bin:$PATH" LD_LIBRARY_PATH="$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$jobs"
build_s=$SECONDS
run "$vpy" -m pip wheel --no-deps --no-build-isolation "$src" -w "$work/wheel" -C build-dir="$work/build"
run cmake -S "$src" -B "$work/build" -DLLAMA_BUILD_TOOLS=ON
run cmake --build "$work/build" --target llama-bench -j "$jobs"
[ "$dry" = 1 ] || say "compiled in $((SECONDS - build_s)) s"

run rm -rf "$carry/llama_cpp" "$carry/bin" "$carry/lib"
run mkdir -p "$carry/bin" "$carry/lib"
wheel="$(ls "$work"/wheel/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1)"
run "$vpy" -m zipfile -e "${wheel:-$work/wheel/llama_cpp_python-$version-TAGS.whl}" "$carry"
run find "$carry" -maxdepth 1 -name '*.dist-info' -prune -exec rm -rf {} +
[ "$dry" = 1 ] || strip --strip-unneeded "$carry"/llama_cpp/lib/*.so* 2>/dev/null
bench="$(find "$work/build" -name llama-bench -type f -perm -u+x 2>/dev/null | head -n 1)"
run cp "${bench:-$work/build/bin/llama-bench}" "$carry/bin/"
run cp -L "$cuda/lib/libcudart.so.13" "$carry/lib/"
[ "${CARRY_CUBLAS:-0}" = 1 ] && run cp -L "$cuda/lib/libcublas.so.13" "$cuda/lib/libcublasLt.so.13" "$carry/lib/"
[ "$dry" = 1 ] && { say "dry run: ready to build (about 18 minutes on 2 cores for one architecture)"; exit 0; }

size_mib=$(( $(du -sk "$carry" | cut -f1) / 1024 ))
{
  echo "llama-cpp-python $version, CUDA build for architecture $arch, built $(date -u +%FT%TZ) on $(uname -m)"
  echo "CMAKE_ARGS=$flags"
  echo "CUDA packages: $("$vpy" -m pip list 2>/dev/null | grep -E '^nvidia-' | tr -s ' ' | tr '\n' ';')"
  echo "total: $size_mib MiB"
  (cd "$carry" && du -ah llama_cpp/lib bin lib | sort -k2)
} > "$carry/MANIFEST.txt"
say "carry ready: $carry ($size_mib MiB; MANIFEST.txt). Copy it beside the tree on the GPU machine and run benchmarks/gpu_check.sh"
[ "$size_mib" -le 60 ] || say "warning: $size_mib MiB is over the ~60 MiB budget (fewer architectures, CARRY_CUBLAS=0)"
exit 0

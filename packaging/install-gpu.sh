#!/usr/bin/env bash
# Rebuild the pinned llama-cpp-python with a GPU backend, into the current virtual environment.
#
#   packaging/install-gpu.sh cuda|vulkan|metal|rocm [--dry-run]
#
# It checks first for what the build needs (a C++ compiler, plus: cuda the CUDA toolkit's nvcc; vulkan the
# Vulkan headers and glslc; metal Xcode's command line tools; rocm ROCm's hipcc) and names exactly what is
# missing. Then it runs, with the route's CMake flag:
#   CMAKE_ARGS="-DGGML_CUDA=on" python -m pip install llama-cpp-python==<pinned> --force-reinstall --no-cache-dir --no-deps
# --dry-run prints the checks and the command, and changes nothing. The version is the one pyproject.toml pins.
# The Python is $PYTHON, else the active venv's ($VIRTUAL_ENV), else the repository's .venv.
# Exit codes: 0 done (dry run: ready), 1 the build failed, 2 usage, 3 something the build needs is missing.
# Extra CMake flags: GGUF_EXTRA_CMAKE_ARGS="..." (e.g. -DCMAKE_CUDA_ARCHITECTURES=89 builds for one GPU, faster);
# VULKAN_INCLUDE_DIR=/path/include uses other Vulkan headers than the system's (with the SPIR-V headers' CMake config
# found under /path/share/cmake too: an unpacked libvulkan-dev + spirv-headers; packaging/build-vulkan-venv.sh does it).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
usage="usage: packaging/install-gpu.sh cuda|vulkan|metal|rocm [--dry-run]"

route="" dry=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    cuda|vulkan|metal|rocm) route="$arg" ;;
    *) echo "install-gpu.sh: unknown argument '$arg'. $usage" >&2; exit 2 ;;
  esac
done
[ -n "$route" ] || { echo "install-gpu.sh: which GPU backend? $usage" >&2; exit 2; }

version="$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' "$root/pyproject.toml" | head -n 1)"
[ -n "$version" ] || { echo "install-gpu.sh: no llama-cpp-python==VERSION pin in $root/pyproject.toml" >&2; exit 2; }

if [ -n "${PYTHON:-}" ]; then py="$PYTHON"
elif [ -n "${VIRTUAL_ENV:-}" ]; then py="$VIRTUAL_ENV/bin/python"
else py="$root/.venv/bin/python"
fi

missing=()
need() { missing+=("$1"); }
have() { command -v "$1" >/dev/null 2>&1; }

[ -x "$py" ] || need "the Python of a virtual environment at $py (create it: python3 -m venv .venv && .venv/bin/pip install -e .; or set PYTHON=)"
if ! have c++ && ! have g++ && ! have clang++; then
  need "a C++ compiler (Debian/Ubuntu: sudo apt install build-essential; macOS: xcode-select --install)"
fi

find_tool() {  # NAME DIR...: the path of NAME on PATH, else in the first DIR that has it; nothing if none
  local name="$1" d
  shift
  command -v "$name" 2>/dev/null && return
  for d in "$@"; do
    [ -n "$d" ] && [ -x "$d/$name" ] && { echo "$d/$name"; return; }
  done
  return 0
}

spirv_config() {  # the folder holding SPIRV-HeadersConfig.cmake (ggml-vulkan's CMake wants it), or nothing
  local d
  for d in "$(dirname "$1")/share/cmake/SPIRV-Headers" "${VULKAN_SDK:+$VULKAN_SDK/share/cmake/SPIRV-Headers}" \
      /usr/share/cmake/SPIRV-Headers /usr/local/share/cmake/SPIRV-Headers /usr/lib/cmake/SPIRV-Headers; do
    [ -n "$d" ] && [ -f "$d/SPIRV-HeadersConfig.cmake" ] && { echo "$d"; return; }
  done
}

vulkan_headers() {  # the folder holding vulkan/vulkan.hpp, or nothing
  local d
  for d in "${VULKAN_INCLUDE_DIR:-}" "${VULKAN_SDK:+$VULKAN_SDK/include}" /usr/include /usr/local/include; do
    [ -n "$d" ] && [ -f "$d/vulkan/vulkan.hpp" ] && { echo "$d"; return; }
  done
}

flags=""
case "$route" in
  cuda)
    flags="-DGGML_CUDA=on"
    nvcc="$(find_tool nvcc "${CUDA_HOME:+$CUDA_HOME/bin}" "${CUDA_PATH:+$CUDA_PATH/bin}")"
    if [ -z "$nvcc" ]; then
      need "the CUDA toolkit's compiler nvcc (not on PATH, nor in \$CUDA_HOME/bin): install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads; Debian/Ubuntu: sudo apt install nvidia-cuda-toolkit) and put its bin/ on PATH"
    else
      echo "found nvcc: $nvcc"
      have nvcc || export PATH="$(dirname "$nvcc"):$PATH"
    fi ;;
  vulkan)
    flags="-DGGML_VULKAN=on"
    inc="$(vulkan_headers)"
    if [ -z "$inc" ]; then
      need "the Vulkan headers (vulkan/vulkan.hpp; Debian/Ubuntu: sudo apt install libvulkan-dev; or the LunarG Vulkan SDK with VULKAN_SDK set)"
    elif ! grep -rqs "LayerSettingEXT" "$inc/vulkan/"; then
      need "newer Vulkan headers: $inc/vulkan is too old for this llama.cpp (no vk::LayerSettingEXT; Debian 12 ships 1.3.239). Use 1.4 headers, e.g. from Debian 13's libvulkan-dev and spirv-headers (apt-get download libvulkan-dev spirv-headers; dpkg-deb -x each) with VULKAN_INCLUDE_DIR=<unpacked>/usr/include; packaging/build-vulkan-venv.sh does this"
    else
      echo "found Vulkan headers: $inc/vulkan"
      [ "$inc" = /usr/include ] || flags="$flags -DVulkan_INCLUDE_DIR=$inc -DCMAKE_PREFIX_PATH=$(dirname "$inc")"
    fi
    if [ -n "$inc" ] && [ -z "$(spirv_config "$inc")" ]; then
      need "the SPIR-V headers' CMake config (SPIRV-HeadersConfig.cmake; Debian/Ubuntu: sudo apt install spirv-headers)"
    fi
    if have glslc; then echo "found glslc: $(command -v glslc)"
    else need "the GLSL compiler glslc (Debian/Ubuntu: sudo apt install glslc; or the Vulkan SDK's bin/ on PATH)"
    fi ;;
  metal)
    flags="-DGGML_METAL=on"
    if [ "$(uname -s)" != Darwin ]; then
      need "macOS: Metal exists only on Apple machines (this is $(uname -s))"
    elif ! xcode-select -p >/dev/null 2>&1; then
      need "Xcode's command line tools (xcode-select --install)"
    fi ;;
  rocm)
    flags="-DGGML_HIP=on"
    hipcc="$(find_tool hipcc "${ROCM_PATH:+$ROCM_PATH/bin}" /opt/rocm/bin)"
    if [ -z "$hipcc" ]; then
      need "ROCm's compiler hipcc (not on PATH, nor in \$ROCM_PATH/bin or /opt/rocm/bin): install ROCm (https://rocm.docs.amd.com)"
    else
      echo "found hipcc: $hipcc"
      hipconfig="$(dirname "$hipcc")/hipconfig"  # llama.cpp's HIP build wants ROCm's clang as HIPCXX
      [ -x "$hipconfig" ] && export HIPCXX="$("$hipconfig" -l)/clang" HIP_PATH="$("$hipconfig" -R)"
    fi ;;
esac
flags="$flags${GGUF_EXTRA_CMAKE_ARGS:+ $GGUF_EXTRA_CMAKE_ARGS}"

cmd=("$py" -m pip install "llama-cpp-python==$version" --force-reinstall --no-cache-dir --no-deps)
echo "would run: CMAKE_ARGS=\"$flags\" ${cmd[*]}" | { [ "$dry" = 1 ] && cat || sed 's/^would run/running/'; }

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-gpu.sh: cannot build the $route backend; missing:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  exit 3
fi
if [ "$dry" = 1 ]; then
  echo "dry run: the $route build of llama-cpp-python $version is ready to start (it compiles llama.cpp: minutes to tens of minutes)"
  exit 0
fi

CMAKE_ARGS="$flags" "${cmd[@]}" || { echo "install-gpu.sh: the $route build failed (see pip's output above)" >&2; exit 1; }
echo "installed llama-cpp-python $version with $route. Check: 'gguf-bench hw' and the 'backends' column of any run"
echo "(e.g. gguf-bench run -p 16 -n 8 -r 1 -o md) say which backend a model really ran on."
[ "$route" = vulkan ] && echo "note: llama.cpp skips CPU-type Vulkan devices (e.g. Mesa's llvmpipe) unless GGML_VK_VISIBLE_DEVICES=0 is set."
exit 0

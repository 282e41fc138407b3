#!/usr/bin/env bash
# The prepared check for a machine with an NVIDIA GPU and its driver, but no network and no CUDA toolkit.
#
#   benchmarks/gpu_check.sh [--dry-run] [OUT_DIR]          # GPU_CHECK_DRY=1 is the same as --dry-run
#
# It uses the CUDA build of llama.cpp carried beside the tree (packaging/build-cuda-carry.sh makes it), in
# $GPU_CARRY (default ./gpu-carry): llama_cpp/ (the package, lib/libggml-cuda.so…) or a llama_cpp_python-*.whl,
# bin/llama-bench (optional) and lib/ (libcudart; cuBLAS when carried). Nothing is installed: the package goes in
# front of the venv's own through PYTHONPATH (a wheel is unpacked into OUT_DIR/overlay first, offline), and
# LD_LIBRARY_PATH finds the CUDA runtime libraries (the carry's lib/, else the machine's: $CUDA_LIB_DIR,
# pip nvidia-* packages in any Python, /usr/local/cuda*). The venv is $PYTHON, else ./.venv (the workbench and
# its dependencies installed, any llama.cpp build). Steps, each under `timeout`, each recorded in status.tsv with
# its log in logs/, the next step run whatever the last one did:
#   cuda-libs   the CUDA build's libraries resolve (ldd: no "not found")
#   doctor      gguf-bench doctor --json: the CUDA backend and device, as llama.cpp sees them
#   nvidia-smi  the GPU, its memory, driver and power limit
#   gpu-tests   the `gpu`-marked tests (NVML for real)
#   ngl-sweep   -ngl 0,1,16,31,99 on the default model (SmolLM2-135M: 30 layers + output), p512 n128 r3
#   ctx-sweep   -d 0,2048,6144 at -ngl 99, without a device-memory limit and with one (GPU_CHECK_LIMIT_MIB,
#               default 200): the deepest tests cross it, a failed row with the predicted boundary beside it
#   fidelity    benchmarks/fidelity.py at -ngl 99 against the carried CUDA llama-bench (only the llama.cpp
#               counters without one)
#   report      summary.md: steps, doctor, both sweeps with VRAM delta vs predicted, decode power and J/token
# Everything lands in OUT_DIR (default ./gpu-check-<UTC time>): plan.txt, status.tsv, logs/, results/, summary.md.
# The whole run stays inside GPU_CHECK_BUDGET_S (default 570 s): a step gets what its limit allows of the time left.
# GPU_CHECK_TINY=1 shrinks every run (p16 n8 r1 t1) to check the script itself on a CPU machine.
# --dry-run runs this script's own logic without a GPU: each step prints what it would run, the files it needs are
# checked (a missing one is listed in missing.txt), and OUT_DIR gets its skeleton (plan.txt, status.tsv with every
# step "planned", logs/, results/). Exit codes: 0 every step ok (dry run: nothing missing), 1 a step failed or
# timed out, 2 usage, 3 (dry run) something the real run needs is missing.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
usage="usage: benchmarks/gpu_check.sh [--dry-run] [OUT_DIR]"
dry="${GPU_CHECK_DRY:-0}" out=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    -*) echo "gpu_check.sh: unknown option '$arg'. $usage" >&2; exit 2 ;;
    *) out="$arg" ;;
  esac
done
carry="${GPU_CARRY:-$root/gpu-carry}"
out="${out:-$root/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}"
py="${PYTHON:-$root/.venv/bin/python}"
budget_s="${GPU_CHECK_BUDGET_S:-570}"
limit_mib="${GPU_CHECK_LIMIT_MIB:-200}"
start_s=$SECONDS
failed=0

mkdir -p "$out/logs" "$out/results" || { echo "gpu_check.sh: cannot create $out" >&2; exit 2; }
out="$(cd "$out" && pwd)"
: > "$out/plan.txt"; : > "$out/status.tsv"; : > "$out/missing.txt"
say() { echo "gpu_check: $*"; }
need() {  # PATH WHAT: a file the real run needs; listed in missing.txt when absent
  [ -e "$1" ] && return 0
  echo "$2: $1" >> "$out/missing.txt"; say "missing $2: $1"; return 1
}
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$out/status.tsv"; }

step() {  # NAME LIMIT_S [--to FILE] CMD...: run under timeout (stdout to FILE, else the log); never stops the script
  local name="$1" limit="$2" to="" t0 rc result
  shift 2
  if [ "${1:-}" = --to ]; then to="$2"; shift 2; fi
  local left=$((budget_s - (SECONDS - start_s) - 15))  # 15 s kept for the report
  [ "$limit" -gt "$left" ] && limit=$left
  printf '%s\t%s s\t%s%s\n' "$name" "$limit" "$*" "${to:+ > $to}" >> "$out/plan.txt"
  if [ "$dry" = 1 ]; then
    say "[dry run] $name (timeout ${limit} s): $*${to:+ > $to}"; record "$name" planned 0 "dry run"; return 0
  fi
  if [ "$limit" -lt 5 ]; then record "$name" skipped 0 "out of time"; failed=1; return 0; fi
  say "$name (timeout ${limit} s): $*"
  t0=$SECONDS
  if [ -n "$to" ]; then timeout -k 5 "$limit" "$@" > "$to" 2> "$out/logs/$name.log"
  else timeout -k 5 "$limit" "$@" > "$out/logs/$name.log" 2>&1
  fi
  rc=$?
  case "$rc" in 0) result=ok ;; 124|137) result=timeout; failed=1 ;; *) result="failed (exit $rc)"; failed=1 ;; esac
  record "$name" "$result" $((SECONDS - t0)) "logs/$name.log"
  say "$name: $result after $((SECONDS - t0)) s"
}

# --- the CUDA build: an unpacked package, or a wheel unpacked here (offline) ------------------------------------
overlay="$carry"
wheel="$(ls "$carry"/llama_cpp_python-*.whl 2>/dev/null | head -n 1)"
if [ ! -d "$carry/llama_cpp" ] && [ -n "$wheel" ]; then
  overlay="$out/overlay"  # unpacked in the dry run too: it is offline and only writes OUT_DIR
  "$py" -m zipfile -e "$wheel" "$overlay" || say "could not unpack $wheel"
fi
need "$py" "the venv's Python (PYTHON=)"
need "$overlay/llama_cpp/__init__.py" "the CUDA llama_cpp package (GPU_CARRY=; packaging/build-cuda-carry.sh)"
cuda_lib="$overlay/llama_cpp/lib/libggml-cuda.so"
need "$cuda_lib" "the CUDA backend library"
need "$root/benchmarks/fidelity.py" "the fidelity benchmark"
need "$root/benchmarks/gpu_check_report.py" "the report script"
bench="$carry/bin/llama-bench"
[ -x "$bench" ] || { say "no CUDA llama-bench at $bench: fidelity compares with llama.cpp's own counters only"; bench=""; }

cuda_dirs() {  # the folders that may hold libcudart/libcublas on this machine, carry first
  echo "$carry/lib"
  [ -n "${CUDA_LIB_DIR:-}" ] && echo "$CUDA_LIB_DIR"
  for p in "$py" python3; do
    "$p" -c 'import site, sys; print("\n".join(site.getsitepackages()))' 2>/dev/null | while read -r sp; do
      ls -d "$sp"/nvidia/cu*/lib "$sp"/nvidia/cublas/lib "$sp"/nvidia/cuda_runtime/lib 2>/dev/null
    done
  done
  ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib 2>/dev/null
}
libpath="$overlay/llama_cpp/lib"
while read -r d; do [ -d "$d" ] && libpath="$libpath:$d"; done < <(cuda_dirs | awk '!seen[$0]++')
export PYTHONPATH="$overlay${PYTHONPATH:+:$PYTHONPATH}" LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GGUF_WORKBENCH_DATA_DIR="$out/data"  # its own results store and probe cache
printf 'PYTHONPATH=%s\nLD_LIBRARY_PATH=%s\n' "$PYTHONPATH" "$LD_LIBRARY_PATH" > "$out/env.txt"

# --- the steps ------------------------------------------------------------------------------------------------
res="$out/results"
if [ "${GPU_CHECK_TINY:-0}" = 1 ]; then  # a check of this script on a CPU machine, not figures
  p=16 n=8 d=0,64 ngl=0,1,31 fid=(-p 16 -n 8 -r 1 --rounds 1 -t 1) run_args=(-r 1 -t 1 -o json --no-store -q)
else
  p=512 n=128 d=0,2048,6144 ngl=0,1,16,31,99 fid=(-r 3 --rounds 2) run_args=(-r 3 -o json --no-store -q)
fi
step cuda-libs 20 bash -c 'ldd "$1" && ! ldd "$1" | grep -q "not found"' ldd "$cuda_lib"
step doctor 45 --to "$res/doctor.json" "$py" -m app.cli.main doctor --json
step nvidia-smi 15 --to "$res/nvidia-smi.csv" nvidia-smi \
  --query-gpu=name,memory.total,memory.used,driver_version,power.limit,clocks.max.memory --format=csv
step gpu-tests 90 "$py" -m pytest -q -m gpu -p no:cacheprovider "$root/tests" --junitxml="$res/gpu-tests.xml"
step ngl-sweep 120 "$py" -m app.cli.main run -p "$p" -n "$n" -ngl "$ngl" "${run_args[@]}" \
  --out "$res/ngl_sweep.json" --telemetry "$res/ngl_telemetry.csv"
step ctx-sweep 120 "$py" -m app.cli.main run -p "$p" -n "$((n / 2))" -d "$d" -ngl 99 --device-mem-limit "0,$limit_mib" \
  "${run_args[@]}" --out "$res/ctx_sweep.json" --telemetry "$res/ctx_telemetry.csv"
step fidelity 120 "$py" "$root/benchmarks/fidelity.py" -ngl 99 "${fid[@]}" ${bench:+--llama-bench "$bench"}
cp "$out/logs/fidelity.log" "$res/fidelity.txt" 2>/dev/null
step report 15 "$py" "$root/benchmarks/gpu_check_report.py" "$out"  # writes summary.md

if [ "$dry" = 1 ]; then
  if [ -s "$out/missing.txt" ]; then
    say "dry run: plan in $out/plan.txt; the real run needs what missing.txt lists"; exit 3
  fi
  say "dry run: plan in $out/plan.txt; everything the real run needs is here"; exit 0
fi
say "done in $((SECONDS - start_s)) s: $out (summary.md, status.tsv)"
exit "$failed"

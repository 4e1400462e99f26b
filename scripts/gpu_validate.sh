#!/usr/bin/env bash
# gpu_validate.sh: the one-command GPU validation, run from the repository root on a GPU machine.
#
#   1. preflight: a GPU must be visible and its driver must support this CUDA toolkit, else one FAIL line, exit 1
#      (never a false green);
#   2. configures build-gpu/ with only the _cuda targets (LLMK_BUILD_SIM=OFF) for the device's own architecture
#      (read with nvidia-smi: compute capability 9.0 -> 90a), RelWithDebInfo like CI (the same SASS the static
#      gates check), against the Debian packages unpacked in .gpu-deps/ by scripts/gpu_prepare.sh; builds with all
#      cores;
#   3. runs every GPU test (ctest -L gpu, LLMK_REQUIRE_GPU=1: a test that would skip fails) and the _cuda examples;
#   4. runs every benchmark binary with JSON output and a short min time, and the anchors in the same run: the
#      device copy (BM_DeviceCopy), cuBLAS fp16/bf16 and cuBLASLt int8/fp8 GEMMs (inside the benchmark binaries)
#      and PyTorch's scaled_dot_product_attention (flash backend) on the prefill and decode shapes
#      (bench/anchors/torch_sdpa.py);
#   5. writes bench/results/<date>-<gpu>-<sha>/: raw JSON, nvidia-smi -L / -q, driver, clocks as read, git sha, the
#      exact command, logs, the static gate report of this build (static/), summary.md and plots/;
#   6. prints, last, the summary table (scripts/perf/summarize.py): kernel, shape, llmk time, anchor time, ratio,
#      % of roofline, predicted time.
# Exit status: 0 only if the build, every GPU test (none skipped) and every benchmark binary succeeded.
#
# Usage (on the GPU machine; prepare .gpu-deps here first: scripts/gpu_prepare.sh, then carry it):
#   scripts/gpu_validate.sh [--out DIR] [--min-time SECONDS] [--bench-filter REGEX] [--skip-tests]
#                           [--budget SECONDS] [--archive FILE.tgz]
#   scripts/gpu_validate.sh --summary DIR     only the summary and plots of an existing results folder (no GPU)
# --budget (default 510): wall-clock seconds for the whole run; benchmarks that would start after it are listed
# as not run in the summary rather than overrunning the 9-minute window.
# --archive: also pack the results folder into FILE.tgz when the script ends, whatever the outcome (the device
# tool brings back files written under $OUT: `scripts/gpu_validate.sh --archive $OUT/results.tgz`, with
# .gpu-deps in the call's carry; docs/performance.md shows the whole call).
# The git sha comes from git, or, where the working tree travelled without .git, from .gpu-deps/source-sha
# (written by scripts/gpu_prepare.sh).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$LLMK_ROOT"

t0=$SECONDS
out=""
min_time="0.05"
bench_filter=""
skip_tests=0
budget=510
summary_only=""
archive=""
command_line="scripts/gpu_validate.sh $*"
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --min-time) min_time="$2"; shift 2 ;;
    --bench-filter) bench_filter="$2"; shift 2 ;;
    --skip-tests) skip_tests=1; shift ;;
    --budget) budget="$2"; shift 2 ;;
    --summary) summary_only="$2"; shift 2 ;;
    --archive) archive="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "gpu_validate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

summarize() {  # summarize <results dir>: plots first, the table last
  local dir="$1"
  python3 scripts/plot_results.py "$dir" >"$dir/plots.log" 2>&1 || echo "(plots failed: see $dir/plots.log)"
  python3 scripts/perf/summarize.py "$dir"
}

if [[ -n "$summary_only" ]]; then
  [[ -d "$summary_only" ]] || { echo "gpu_validate.sh: no results folder $summary_only" >&2; exit 2; }
  summarize "$summary_only"
  exit $?
fi

fail() { echo "FAIL: $*"; exit 1; }

# ---- 1. preflight ---------------------------------------------------------------------------------------------------
command -v nvidia-smi >/dev/null 2>&1 || fail "no GPU: nvidia-smi not found (scripts/gpu_validate.sh runs only on a GPU machine)"
gpus="$(nvidia-smi -L 2>/dev/null | grep '^GPU ' || true)"
[[ -n "$gpus" ]] || fail "no GPU visible (nvidia-smi -L lists none): scripts/gpu_validate.sh runs only on a GPU machine"
NVCC="$(llmk_find_nvcc)"
[[ -n "$NVCC" ]] || fail "nvcc not found (CUDA toolkit expected at /usr/local/cuda)"
toolkit="$("$NVCC" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
driver_cuda="$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)"
if [[ -n "$driver_cuda" && -n "$toolkit" ]]; then
  if [[ "$(printf '%s\n%s\n' "$toolkit" "$driver_cuda" | sort -V | head -n 1)" != "$toolkit" ]]; then
    fail "the driver supports CUDA $driver_cuda but the toolkit is CUDA $toolkit: every _cuda program would fail"
  fi
fi
scripts/gpu_prepare.sh --check >/dev/null || fail ".gpu-deps/ is missing or incomplete: run scripts/gpu_prepare.sh on the development machine and carry .gpu-deps"

cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')"
[[ "$cap" =~ ^([0-9]+)\.([0-9]+)$ ]] || fail "cannot read the GPU's compute capability (nvidia-smi said '$cap')"
arch="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
[[ "$arch" == 90 ]] && arch=90a  # Hopper: the arch-specific target (wgmma, setmaxnreg) runs only on sm_90 anyway
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
slug="$(tr '[:upper:]' '[:lower:]' <<<"$gpu_name" | sed 's/nvidia//; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')"
if sha="$(git rev-parse --short=7 HEAD 2>/dev/null)"; then
  git diff --quiet HEAD 2>/dev/null || sha="$sha-dirty"
elif [[ -s .gpu-deps/source-sha ]]; then
  sha="$(cat .gpu-deps/source-sha)"
else
  sha=nogit
fi
out="${out:-bench/results/$(date -u +%Y-%m-%d)-$slug-$sha}"
mkdir -p "$out/bench" "$out/anchors" "$out/logs"
if [[ -n "$archive" ]]; then
  trap 'tar czf "$archive" -C "$(dirname "$out")" "$(basename "$out")" && echo "== archived $out in $archive"' EXIT
fi
echo "== gpu_validate: $gpu_name (sm_$arch), driver CUDA $driver_cuda, toolkit $toolkit, results in $out"

# ---- 5 (first part). what the machine is ---------------------------------------------------------------------------
{
  nvidia-smi -L
  echo
  nvidia-smi -q
} >"$out/nvidia-smi.txt" 2>&1
IFS=',' read -r q_driver q_sm q_mem q_sm_max q_mem_max < <(nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem \
  --format=csv,noheader,nounits | head -n 1 | tr -d ' ')
torch_version="$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "")"
write_meta() {
  python3 - "$out/meta.json" <<EOF
import json, sys
num = lambda s: int(s) if s.strip().isdigit() else None
json.dump({
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "gpu": "$gpu_name", "gpu_count": $(grep -c '^GPU ' <<<"$gpus"),
  "driver": "$q_driver", "cuda_driver_version": "$driver_cuda", "nvcc_version": "$toolkit",
  "torch_version": "$torch_version" or None,
  "clocks": {"sm_mhz": num("$q_sm"), "mem_mhz": num("$q_mem"), "sm_max_mhz": num("$q_sm_max"),
             "mem_max_mhz": num("$q_mem_max")},
  "sha": "$sha", "command": "$command_line", "arch": "$arch", "min_time_s": "$min_time",
  "status": "$1", "wall_s": $((SECONDS - t0)),
}, open(sys.argv[1], "w"), indent=1)
EOF
}
write_meta running

# ---- 2. configure and build -----------------------------------------------------------------------------------------
BUILD="$LLMK_ROOT/build-gpu"
deps="$LLMK_ROOT/.gpu-deps/root/usr"
export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
echo "== configure (sm_$arch, _cuda targets only)"
if ! cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLLMK_BUILD_SIM=OFF -DLLMK_BUILD_CUDA=ON -DCMAKE_PREFIX_PATH="$deps" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$out/logs/configure.log" 2>&1; then
  tail -n 30 "$out/logs/configure.log"
  write_meta "configure failed"
  fail "cmake configure failed (log: $out/logs/configure.log)"
fi
echo "== build ($(nproc) jobs)"
if ! cmake --build "$BUILD" -j "$(nproc)" >"$out/logs/build.log" 2>&1; then
  grep -E 'error|Error' "$out/logs/build.log" | head -n 30
  write_meta "build failed"
  fail "build failed (log: $out/logs/build.log)"
fi
echo "   built in $((SECONDS - t0)) s"

status=0
problems=()

# ---- 3. GPU tests and examples ----------------------------------------------------------------------------------------
if ((skip_tests == 0)); then
  echo "== GPU tests (ctest -L gpu, LLMK_REQUIRE_GPU=1)"
  LLMK_REQUIRE_GPU=1 ctest --test-dir "$BUILD" -L gpu -j 4 --timeout 300 --output-on-failure \
    --output-junit "$LLMK_ROOT/$out/logs/ctest-junit.xml" >"$out/logs/ctest.log" 2>&1
  rc=$?
  tail -n 5 "$out/logs/ctest.log"
  n_tests="$(grep -c '<testcase' "$out/logs/ctest-junit.xml" 2>/dev/null || echo 0)"
  skipped="$(grep -c 'status="skipped"\|<skipped' "$out/logs/ctest-junit.xml" 2>/dev/null || echo 0)"
  ((n_tests > 0)) || { problems+=("no GPU test ran"); status=1; }
  ((skipped == 0)) || { problems+=("$skipped GPU test(s) skipped with a GPU present"); status=1; }
  ((rc == 0)) || { problems+=("GPU tests failed (logs/ctest.log)"); status=1; }
  for ex in "$BUILD"/examples/*_cuda; do
    [[ -x "$ex" ]] || continue
    name="$(basename "$ex")"
    if timeout 120 "$ex" >"$out/logs/$name.log" 2>&1; then echo "   ok  $name"; else
      problems+=("example $name failed (logs/$name.log)"); status=1; echo "   FAILED  $name"; fi
  done
fi

# ---- 4. benchmarks and anchors ----------------------------------------------------------------------------------------
echo "== benchmarks (min time ${min_time} s each)"
not_run=()
run_bench() {  # run_bench <binary> <timeout>
  local b="$1" limit="$2" name
  name="$(basename "$b")"
  local filter=()
  [[ -n "$bench_filter" ]] && filter=(--benchmark_filter="$bench_filter")
  if ((SECONDS - t0 > budget)); then not_run+=("$name"); return; fi
  local t1=$SECONDS
  timeout "$limit" "$b" --benchmark_format=json --benchmark_out="$out/bench/$name.json" --benchmark_out_format=json \
    --benchmark_min_time="$min_time" "${filter[@]+"${filter[@]}"}" >"$out/logs/$name.log" 2>&1
  local rc=$?
  if ((rc == 0)); then echo "   ok  $name ($((SECONDS - t1)) s)"; else
    echo "   FAILED  $name (exit $rc, $((SECONDS - t1)) s: logs/$name.log)"; problems+=("benchmark $name exit $rc"); status=1; fi
}
# The attention and GEMM benchmarks first: they carry the anchors the summary compares against.
for b in "$BUILD"/bench/bench_attention_prefill_cuda "$BUILD"/bench/bench_attention_decode_cuda \
  "$BUILD"/bench/bench_quant_gemm_cuda "$BUILD"/bench/bench_tile_gemm_cuda; do
  [[ -x "$b" ]] && run_bench "$b" 150
done
if ((SECONDS - t0 <= budget)); then
  echo "== anchor: PyTorch SDPA (flash backend)"
  if timeout 150 python3 bench/anchors/torch_sdpa.py --out "$out/anchors/torch_sdpa.json" --min-time "$min_time" \
    >"$out/logs/torch_sdpa.log" 2>&1; then echo "   ok  torch_sdpa"; else
    echo "   FAILED  torch_sdpa (logs/torch_sdpa.log)"; problems+=("torch SDPA anchor failed"); status=1; fi
else
  not_run+=("torch_sdpa")
fi
for b in "$BUILD"/bench/bench_*_cuda; do
  case "$(basename "$b")" in
    bench_attention_prefill_cuda | bench_attention_decode_cuda | bench_quant_gemm_cuda | bench_tile_gemm_cuda) continue ;;
  esac
  [[ -x "$b" ]] && run_bench "$b" 120
done
if ((${#not_run[@]})); then
  printf '%s\n' "${not_run[@]}" >"$out/not_run.txt"
  problems+=("not run (time budget ${budget} s): ${not_run[*]}")
  status=1
fi

# ---- static report of this build (the SASS that ran) ----------------------------------------------------------------
if command -v cuobjdump >/dev/null 2>&1 || llmk_perf_tools >/dev/null 2>&1; then
  python3 scripts/perf/static_gates.py --build-dir "$BUILD" --report "$out/static" --no-budget-ok \
    >"$out/logs/static_gates.log" 2>&1 || true
fi

# ---- 5/6. meta, summary, table --------------------------------------------------------------------------------------
((${#problems[@]})) && printf '%s\n' "${problems[@]}" >"$out/problems.txt"
write_meta "$( ((status == 0)) && echo passed || echo failed)"
echo "== results: $out ($((SECONDS - t0)) s)"
summarize "$out"
if ((status != 0)); then
  echo "FAIL: ${problems[*]}"
  exit 1
fi
echo "gpu_validate: PASSED ($((SECONDS - t0)) s)"

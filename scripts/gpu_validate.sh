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
#   4. runs every benchmark binary with JSON output, one pass per benchmark (LLMK_BENCH_ONE_PASS_S = --min-time:
#      the data built once, samples until that much measured time, bench/support/gpu_timer.hpp), and the
#      anchors in the same run: the
#      device copy (BM_DeviceCopy), cuBLAS fp16/bf16 and cuBLASLt int8/fp8 GEMMs (inside the benchmark binaries)
#      and PyTorch's scaled_dot_product_attention (flash backend) on the prefill and decode shapes
#      (bench/anchors/torch_sdpa.py);
#   5. writes bench/results/<date>-<gpu>-<sha>/: raw JSON, nvidia-smi -L / -q, driver, clocks as read, git sha, the
#      exact command, logs, the static gate report of this build (static/), summary.md and plots/;
#   6. prints, last, the summary table (scripts/perf/summarize.py): kernel, shape, llmk time, anchor time, ratio,
#      % of roofline, predicted time.
# Exit status: 0 only if the build, every GPU test (none skipped) and every benchmark binary succeeded, and the
# results check found nothing (scripts/perf/summarize.py --check: no errored or skipped row outside the allowlist of
# bench/model/checks.py, every binary's and the anchor's JSON present, every llmk row's anchor measured; with
# --bench-filter, anchors the filter excluded and binaries it left empty are warnings).
#
# Usage (on the GPU machine; prepare .gpu-deps here first: scripts/gpu_prepare.sh, then carry it):
#   scripts/gpu_validate.sh [--out DIR] [--min-time SECONDS] [--bench-filter REGEX] [--skip-tests]
#                           [--budget SECONDS] [--archive FILE.tgz]
#   scripts/gpu_validate.sh --summary DIR     only the summary and plots of an existing results folder (no GPU)
# --budget (default 510): wall-clock seconds for the whole run; benchmarks that would start after it are listed
# as not run in the summary rather than overrunning the 9-minute window, and every step's own time limit (build,
# tests, examples, each benchmark, the anchor, the static report) is cut to end by budget + 30 s, so that the
# summary and the archive are still written inside the device's 10-minute limit.
# --archive: also pack the results folder into FILE.tgz when the script ends, whatever the outcome (the device
# tool brings back files written under $OUT: `scripts/gpu_validate.sh --archive $OUT/results.tgz`, with
# .gpu-deps in the call's carry; docs/performance.md shows the whole call).
# The git sha comes from .gpu-deps/source-sha (written by scripts/gpu_prepare.sh: run it after the last
# commit), or from git where that file is missing.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$LLMK_ROOT" || exit 2

t0=$SECONDS
out=""
min_time="0.05"
bench_filter=""
skip_tests=0
budget=510
summary_only=""
archive=""
command_line="scripts/gpu_validate.sh${*:+ $*}"
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --min-time) min_time="$2"; shift 2 ;;
    --bench-filter) bench_filter="$2"; shift 2 ;;
    --skip-tests) skip_tests=1; shift ;;
    --budget) budget="$2"; shift 2 ;;
    --summary) summary_only="$2"; shift 2 ;;
    --archive) archive="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "${BASH_SOURCE[0]}"; exit 0 ;;  # the header comment
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

archive_ready=0
archive_results() {  # --archive: pack the results folder, once; before the verdict, so that the verdict is the last line
  ((archive_ready)) && [[ -n "$archive" ]] || return 0
  archive_ready=0
  if tar czf "$archive" -C "$(dirname "$out")" "$(basename "$out")"; then echo "== archived $out in $archive"
  else echo "== could not write the archive $archive"; fi
}
fail() { archive_results; echo "FAIL: $*"; exit 1; }
# left <seconds>: a step's time limit, cut to what is left before the hard stop (budget + 30 s); at least 1, since
# `timeout 0` would mean no limit at all.
left() {
  local l=$((budget + 30 - (SECONDS - t0)))
  ((l < 1)) && l=1
  echo $(($1 < l ? $1 : l))
}

# ---- 1. preflight ---------------------------------------------------------------------------------------------------
command -v nvidia-smi >/dev/null 2>&1 || fail "no GPU: nvidia-smi not found (scripts/gpu_validate.sh runs only on a GPU machine)"
gpus="$(nvidia-smi -L 2>/dev/null | grep '^GPU ' || true)"
[[ -n "$gpus" ]] || fail "no GPU visible (nvidia-smi -L lists none): scripts/gpu_validate.sh runs only on a GPU machine"
NVCC="$(llmk_find_nvcc)"
[[ -n "$NVCC" ]] || fail "nvcc not found (CUDA toolkit expected at /usr/local/cuda)"
PATH="$(dirname "$NVCC"):$PATH"  # the toolkit's cuobjdump and cu++filt for the static report
toolkit="$("$NVCC" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
driver_cuda="$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)"
if [[ -n "$driver_cuda" && -n "$toolkit" ]]; then
  if [[ "$(printf '%s\n%s\n' "$toolkit" "$driver_cuda" | sort -V | head -n 1)" != "$toolkit" ]]; then
    fail "the driver supports CUDA $driver_cuda but the toolkit is CUDA $toolkit: every _cuda program would fail"
  fi
fi
[[ -d .gpu-deps ]] || fail ".gpu-deps/ is missing: run scripts/gpu_prepare.sh on the development machine and name .gpu-deps in the call's carry"
# One FAIL line: the first thing the check misses goes into it.
deps_missing="$(scripts/gpu_prepare.sh --check 2>&1 >/dev/null)" ||
  fail ".gpu-deps/ is incomplete ($(head -n 1 <<<"$deps_missing" | sed 's/^gpu_prepare: //')): run scripts/gpu_prepare.sh again and carry .gpu-deps"

cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')"
[[ "$cap" =~ ^([0-9]+)\.([0-9]+)$ ]] || fail "cannot read the GPU's compute capability (nvidia-smi said '$cap')"
arch="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
[[ "$arch" == 90 ]] && arch=90a  # Hopper: the arch-specific target (wgmma, setmaxnreg) runs only on sm_90 anyway
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
slug="$(tr '[:upper:]' '[:lower:]' <<<"$gpu_name" | sed 's/nvidia//; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')"
# The sha scripts/gpu_prepare.sh recorded first: the device tool sent a .git that was older than the tree
# (the second H100 run's git said 8db8aab-dirty for a tree at 2bcc0c2). Else this tree's own .git (only
# its own: a copy without one may sit inside another repository, whose sha is not ours).
if [[ -s .gpu-deps/source-sha ]]; then
  sha="$(tr -d '[:space:]' <.gpu-deps/source-sha)"
  sha_source=".gpu-deps/source-sha (the tree scripts/gpu_prepare.sh ran on)"
elif [[ -e .git ]] && sha="$(git rev-parse --short=7 HEAD 2>/dev/null)"; then
  git diff --quiet HEAD 2>/dev/null || sha="$sha-dirty"
  sha_source=git
else
  sha=nogit
  sha_source=none
fi
out="${out:-bench/results/$(date -u +%Y-%m-%d)-$slug-$sha}"
mkdir -p "$out/bench" "$out/anchors" "$out/logs" || fail "cannot create the results folder $out"
out_abs="$(cd "$out" && pwd)"  # for ctest, which resolves relative paths in the build folder; --out may be either
archive_ready=1
trap archive_results EXIT  # also when the script is stopped (a TERM from a time limit)
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
write_meta() {  # write_meta <status>: values go through the environment, so a quote or backslash in one (a
  # --bench-filter regex, a GPU name) cannot break the Python source
  M_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" M_GPU="$gpu_name" M_GPU_COUNT="$(grep -c '^GPU ' <<<"$gpus")" \
    M_DRIVER="$q_driver" M_DRIVER_CUDA="$driver_cuda" M_NVCC="$toolkit" M_TORCH="$torch_version" M_SM="$q_sm" \
    M_MEM="$q_mem" M_SM_MAX="$q_sm_max" M_MEM_MAX="$q_mem_max" M_SHA="$sha" M_SHA_SOURCE="$sha_source" \
    M_COMMAND="$command_line" M_ARCH="$arch" M_MIN_TIME="$min_time" M_STATUS="$1" M_WALL="$((SECONDS - t0))" \
    python3 - "$out/meta.json" <<'EOF'
import json, os, sys
e = os.environ
num = lambda s: int(s) if s.strip().isdigit() else None
json.dump({
  "date": e["M_DATE"], "gpu": e["M_GPU"], "gpu_count": int(e["M_GPU_COUNT"]),
  "driver": e["M_DRIVER"], "cuda_driver_version": e["M_DRIVER_CUDA"], "nvcc_version": e["M_NVCC"],
  "torch_version": e["M_TORCH"] or None,
  "clocks": {"sm_mhz": num(e["M_SM"]), "mem_mhz": num(e["M_MEM"]), "sm_max_mhz": num(e["M_SM_MAX"]),
             "mem_max_mhz": num(e["M_MEM_MAX"])},
  "sha": e["M_SHA"], "sha_source": e["M_SHA_SOURCE"], "command": e["M_COMMAND"], "arch": e["M_ARCH"],
  "min_time_s": e["M_MIN_TIME"], "status": e["M_STATUS"], "wall_s": int(e["M_WALL"]),
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
if ! cmake -S . -B "$BUILD" ${generator[@]+"${generator[@]}"} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLLMK_BUILD_SIM=OFF -DLLMK_BUILD_CUDA=ON -DLLMK_BENCH_VARIANTS=ON -DCMAKE_PREFIX_PATH="$deps" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$out/logs/configure.log" 2>&1; then
  tail -n 30 "$out/logs/configure.log"
  write_meta "configure failed"
  fail "cmake configure failed (log: $out/logs/configure.log)"
fi
echo "== build ($(nproc) jobs)"
# Under a time limit: a build that would run past the device's window fails here, with its log in the archive.
# Keep going past a target that fails to compile (ninja -k 0, make -k): the device's window is rare, so every
# test and benchmark that did build still runs; the failed targets are listed and the run fails.
keep_going=(-k)
((${#generator[@]})) && keep_going=(-k 0)
timeout "$(left 100000)" cmake --build "$BUILD" -j "$(nproc)" -- "${keep_going[@]}" >"$out/logs/build.log" 2>&1
rc=$?
status=0
problems=()
if ((rc != 0)); then
  grep -E 'error|Error' "$out/logs/build.log" | head -n 30
  if ((rc == 124)); then
    write_meta "build timed out"
    fail "build stopped by the time budget after $((SECONDS - t0)) s (log: $out/logs/build.log)"
  fi
  built="$(find "$BUILD" -name '*_cuda' -type f -perm -u+x | wc -l)"
  ((built > 0)) || { write_meta "build failed"; fail "build failed, nothing built (log: $out/logs/build.log)"; }
  problems+=("build failed for some targets (logs/build.log); the $built that built ran")
  status=1
  echo "   build FAILED for some targets; going on with the $built that built"
fi
echo "   built in $((SECONDS - t0)) s"

# ---- 3. GPU tests and examples ----------------------------------------------------------------------------------------
if ((skip_tests == 0)); then
  echo "== GPU tests (ctest -L gpu, LLMK_REQUIRE_GPU=1)"
  # ctest's --timeout does not override the tests' own TIMEOUT (900 s): the outer timeout bounds a hung test.
  # The junit path is absolute: ctest resolves a relative one in the build folder.
  LLMK_REQUIRE_GPU=1 timeout "$(left 300)" ctest --test-dir "$BUILD" -L gpu -j 4 --timeout 300 --output-on-failure \
    --output-junit "$out_abs/logs/ctest-junit.xml" >"$out/logs/ctest.log" 2>&1
  rc=$?
  tail -n 5 "$out/logs/ctest.log"
  # ctest writes a skipped test (exit code 77) as <testcase ... status="notrun"> with a <skipped message=.../>
  # child. grep -o | wc -l, not grep -c || echo 0: that printed "0" twice when nothing matched.
  n_tests="$(grep -o '<testcase' "$out/logs/ctest-junit.xml" 2>/dev/null | wc -l)"
  skipped="$(grep -o '<skipped' "$out/logs/ctest-junit.xml" 2>/dev/null | wc -l)"
  ((n_tests > 0)) || { problems+=("no GPU test ran"); status=1; }
  ((skipped == 0)) || { problems+=("$skipped GPU test(s) skipped with a GPU present"); status=1; }
  if ((rc == 124)); then problems+=("GPU tests stopped by the time limit (logs/ctest.log)"); status=1
  elif ((rc != 0)); then problems+=("GPU tests failed (logs/ctest.log)"); status=1; fi
  for ex in "$BUILD"/examples/*_cuda; do
    [[ -x "$ex" ]] || continue
    name="$(basename "$ex")"
    if timeout "$(left 120)" "$ex" >"$out/logs/$name.log" 2>&1; then echo "   ok  $name"; else
      problems+=("example $name failed (logs/$name.log)"); status=1; echo "   FAILED  $name"; fi
  done
fi

# ---- static report of this build (the SASS that ran) ----------------------------------------------------------------
# Before the benchmarks: the first H100 run left it last, where the time budget had 3 s left for it.
# static_gates.py finds cuobjdump itself (PATH, the toolkit, the nvidia-* wheels); not llmk_perf_tools, whose pip
# install would only wait on the network this machine does not have. Informative only (exit 1 is a gate over its
# budget, which the report shows): the summary says when the report is missing.
echo "== static report (scripts/perf/static_gates.py)"
timeout "$(left 90)" python3 scripts/perf/static_gates.py --build-dir "$BUILD" --report "$out/static" --no-budget-ok \
  >"$out/logs/static_gates.log" 2>&1 || echo "   static_gates.py exit $? (logs/static_gates.log)"

# ---- 4. benchmarks and anchors ----------------------------------------------------------------------------------------
echo "== benchmarks (one pass each: ${min_time} s of measured time, 5 to 200 samples)"
not_run=()
run_bench() {  # run_bench <binary> <timeout>
  local b="$1" limit="$2" name
  name="$(basename "$b")"
  local filter=()
  [[ -n "$bench_filter" ]] && filter=(--benchmark_filter="$bench_filter")
  if ((SECONDS - t0 > budget)); then not_run+=("$name"); return; fi
  local t1=$SECONDS
  # One pass (gpu_timer.hpp): the samples are taken inside one framework iteration, which the tiny min time
  # makes the only one (Google Benchmark's own search would build each benchmark's data 3 to 5 times).
  LLMK_BENCH_ONE_PASS_S="$min_time" timeout "$(left "$limit")" "$b" --benchmark_format=json \
    --benchmark_out="$out/bench/$name.json" --benchmark_out_format=json --benchmark_min_time=1e-9 \
    "${filter[@]+"${filter[@]}"}" >"$out/logs/$name.log" 2>&1
  local rc=$?
  echo "$name exit $rc wall $((SECONDS - t1)) s" >>"$out/logs/bench_times.txt"  # where the budget goes
  if ((rc == 0)); then echo "   ok  $name ($((SECONDS - t1)) s)"; else
    echo "   FAILED  $name (exit $rc, $((SECONDS - t1)) s: logs/$name.log)"; problems+=("benchmark $name exit $rc"); status=1; fi
}
# The attention benchmarks and their anchor (PyTorch SDPA) first, then the GEMMs (whose cuBLAS / cuBLASLt anchors
# are in their own binaries): what a cut by the budget leaves out is then the least compared.
for b in "$BUILD"/bench/bench_attention_prefill_cuda "$BUILD"/bench/bench_attention_decode_cuda; do
  [[ -x "$b" ]] && run_bench "$b" 150
done
if ((SECONDS - t0 <= budget)); then
  echo "== anchor: PyTorch SDPA (flash backend)"
  t1=$SECONDS
  if timeout "$(left 150)" python3 bench/anchors/torch_sdpa.py --out "$out/anchors/torch_sdpa.json" --min-time "$min_time" \
    >"$out/logs/torch_sdpa.log" 2>&1; then echo "   ok  torch_sdpa ($((SECONDS - t1)) s)"; else
    echo "   FAILED  torch_sdpa (logs/torch_sdpa.log)"; problems+=("torch SDPA anchor failed"); status=1; fi
  echo "torch_sdpa wall $((SECONDS - t1)) s" >>"$out/logs/bench_times.txt"
else
  not_run+=("torch_sdpa")
fi
for b in "$BUILD"/bench/bench_quant_gemm_cuda "$BUILD"/bench/bench_tile_gemm_cuda; do
  # quant_gemm runs the weight-only grid (4 families x 50 shapes) besides the 8-bit GEMMs: a longer limit.
  case "$(basename "$b")" in bench_quant_gemm_cuda) lim=220 ;; *) lim=150 ;; esac
  [[ -x "$b" ]] && run_bench "$b" "$lim"
done
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

# ---- the results themselves (bench/model/checks.py) ----------------------------------------------------------------
# Exit codes are not enough: Google Benchmark exits 0 after SkipWithError and when a filter matches nothing, and a
# binary that was never built (LAPACK, cuBLASLt absent) leaves nothing to fail. The folder is checked: errored or
# skipped rows (outside checks.ALLOWED), missing or empty JSON, llmk rows without their anchor each fail the run.
echo "== checking the results (errored / skipped rows, missing outputs and anchors)"
check_args=(--check "$out")
[[ -n "$bench_filter" ]] && check_args+=(--bench-filter "$bench_filter")
timeout "$(left 60)" python3 scripts/perf/summarize.py "${check_args[@]}" >"$out/logs/check.log" 2>&1
rc=$?
sed 's/^/   /' "$out/logs/check.log"
if ((rc != 0)); then
  while IFS= read -r line; do problems+=("${line#FAIL: }"); done < <(grep '^FAIL: ' "$out/logs/check.log")
  grep -q '^FAIL: ' "$out/logs/check.log" || problems+=("the results check failed (exit $rc, logs/check.log)")
  status=1
fi

# ---- 5/6. meta, summary, table --------------------------------------------------------------------------------------
((${#problems[@]})) && printf '%s\n' "${problems[@]}" >"$out/problems.txt"
write_meta "$( ((status == 0)) && echo passed || echo failed)"
echo "== results: $out ($((SECONDS - t0)) s)"
summarize "$out"
archive_results
if ((status != 0)); then
  printf -v joined '%s; ' "${problems[@]}"
  echo "FAIL: ${joined%; }"
  exit 1
fi
echo "gpu_validate: PASSED ($((SECONDS - t0)) s)"

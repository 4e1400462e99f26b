#!/usr/bin/env bash
# static_gates.sh: the static performance gates (no GPU needed); .ci/run runs it after scripts/test.sh.
#
# Reads the objects the build already compiled (no second nvcc pass): every _cuda object's SASS (cuobjdump) and
# the ptxas report the compiler launcher kept next to it (scripts/perf/nvcc_resource_log.sh). For every kernel,
# architecture and build variant it reports registers, spills, H100 occupancy, the tensor-core instruction kind of
# the main loop, instructions per tensor-core instruction, plain global loads and local memory in the main loop,
# and checks them against bench/model/budgets.tsv (scripts/perf/static_gates.py says what fails; docs/performance.md).
#
# First it runs its own self-test on the planted kernels of tests/perf/planted_kernels.cu (built by the same build):
# the clean pipelined kernel must pass, the one with a plain global load in its pipelined main loop must fail with
# LDG, and the spilling one must fail with SPILL. A gate that cannot fail is not run.
#
# Usage:
#   scripts/perf/static_gates.sh [--build-dir DIR] [--update] [--only REGEX] [--report DIR] [--self-test-only]
# Environment: LLMK_BUILD_DIR. The report goes to <build dir>/perf-gates/ (report.tsv, report.json, table.txt).
# cuobjdump is not part of this CUDA install: the PyPI wheel nvidia-cuda-cuobjdump is installed into .perf-tools/
# (ignored by git) when no cuobjdump is found.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

update=0
self_test_only=0
only=()
report=""
while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --update) update=1; shift ;;
    --only) only=(--only "$2"); shift 2 ;;
    --report) report="$2"; shift 2 ;;
    --self-test-only) self_test_only=1; shift ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "static_gates.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
report="${report:-$BUILD_DIR/perf-gates}"
GATES="$LLMK_ROOT/scripts/perf/static_gates.py"

llmk_perf_tools  # cuobjdump on PATH (scripts/common.sh)

[[ -f "$BUILD_DIR/compile_commands.json" ]] || { echo "static_gates.sh: $BUILD_DIR is not configured" >&2; exit 2; }

# ---- self-test on the planted kernels ---------------------------------------------------------------------------
planted="$(find "$BUILD_DIR/tests/perf" -name 'planted_kernels.cu.o' 2>/dev/null | head -n 1 || true)"
if [[ -z "$planted" ]]; then
  echo "static_gates.sh: the planted kernels' object is missing (build target perf_planted_kernels_cuda)" >&2
  exit 1
fi
expect_gate() {  # expect_gate <pass|LDG|SPILL> <kernel regex>
  local want="$1" regex="$2" out rc=0
  out="$(python3 "$GATES" --objects "$planted" --all-kernels --exclude '^$' --no-budget-ok --only "$regex" 2>&1)" || rc=$?
  if [[ "$want" == pass ]]; then
    ((rc == 0)) && { echo "   ok  the gates pass the clean pipelined kernel"; return 0; }
  else
    ((rc == 1)) && grep -q "^!! $want " <<<"$out" && { echo "   ok  the gates fail the planted $want kernel"; return 0; }
  fi
  echo "!! static gates self-test: expected '$want' for /$regex/ (exit $rc):"
  echo "$out" | tail -n 20
  return 1
}
echo "== static gates self-test (tests/perf/planted_kernels.cu)"
expect_gate pass 'pipelined_mma<false>'
expect_gate LDG 'pipelined_mma<true>'
expect_gate SPILL 'llmk_planted::spilling'
((self_test_only)) && exit 0

# ---- the gates ----------------------------------------------------------------------------------------------------
args=(--build-dir "$BUILD_DIR" --report "$report" "${only[@]+"${only[@]}"}")
if ((update)); then
  python3 "$GATES" "${args[@]}" --update
  python3 "$GATES" --budgets-markdown "$LLMK_ROOT/docs/performance-budgets.md"
  exit 0
fi
# docs/performance-budgets.md is generated from the budget file: it must not drift.
generated="$(mktemp)"
trap 'rm -f "$generated"' EXIT
python3 "$GATES" --budgets-markdown "$generated" >/dev/null
if ! cmp -s "$generated" "$LLMK_ROOT/docs/performance-budgets.md"; then
  echo "!! docs/performance-budgets.md is out of date: python3 scripts/perf/static_gates.py --budgets-markdown docs/performance-budgets.md"
  exit 1
fi
python3 "$GATES" "${args[@]}"

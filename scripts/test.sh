#!/usr/bin/env bash
# test.sh: the whole llmk test suite (the README's test command; .ci/run calls it).
#   installs the Debian packages it needs (scripts/setup.sh), configures build/ (RelWithDebInfo), builds every
#   target (_sim and, with nvcc, _cuda; the benchmarks' _sim variants excepted) with -j2 and runs ctest. The _cuda tests run where a GPU exists and are
#   reported as skipped elsewhere.
# Usage: scripts/test.sh [ctest arguments...]     e.g. scripts/test.sh -L sim    scripts/test.sh -R numeric
# Environment: JOBS (default 2), LLMK_BUILD_DIR (default build/), LLMK_SIM_SEED (simulator shuffling seed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LLMK_ROOT/scripts/setup.sh"
# The benchmarks' _sim variants are not built here: nothing runs them (their _cuda variants are built, for the
# static gates and the GPU machine); configure with -DLLMK_BUILD_SIM_BENCHMARKS=ON to get them.
llmk_configure "$BUILD_DIR" -DLLMK_BUILD_SIM_BENCHMARKS=OFF
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"

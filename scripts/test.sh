#!/usr/bin/env bash
# test.sh: the whole llmk test suite (the README's test command; .ci/run calls it).
#   installs the Debian packages it needs (scripts/setup.sh), configures build/ (RelWithDebInfo), builds every
#   target (_sim and, with nvcc, _cuda) with -j2 and runs ctest. The _cuda tests run where a GPU exists and are
#   reported as skipped elsewhere.
# Usage: scripts/test.sh [ctest arguments...]     e.g. scripts/test.sh -L sim    scripts/test.sh -R numeric
# Environment: JOBS (default 2), LLMK_BUILD_DIR (default build/), LLMK_SIM_SEED (simulator shuffling seed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LLMK_ROOT/scripts/setup.sh"
llmk_configure "$BUILD_DIR"
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"

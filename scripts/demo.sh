#!/usr/bin/env bash
# demo.sh: build and run the tile GEMM demo (examples/tile_gemm_demo.cu): on the GPU when nvidia-smi finds one,
# in the CPU simulator otherwise. Installs the Debian packages it needs (scripts/setup.sh).
# Usage: scripts/demo.sh [demo arguments...]
# Environment: JOBS (default 2), LLMK_BUILD_DIR (default build/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LLMK_ROOT/scripts/setup.sh"
mkdir -p "$BUILD_DIR"
llmk_configure "$BUILD_DIR" >"$BUILD_DIR/demo-configure.log" 2>&1 || { cat "$BUILD_DIR/demo-configure.log"; exit 1; }

demo=tile_gemm_demo
if [[ ! -f "$LLMK_ROOT/examples/$demo.cu" ]]; then
  echo "demo.sh: examples/$demo.cu does not exist" >&2
  exit 1
fi
if llmk_have_gpu && [[ -n "$(llmk_find_nvcc)" ]]; then
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${demo}_sim" "${demo}_cuda"
  echo "== $demo: running on the GPU ($(nvidia-smi -L | head -n 1))"
  exec "$BUILD_DIR/examples/${demo}_cuda" "$@"
else
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${demo}_sim"
  echo "== $demo: no GPU here: running in the llmk CPU simulator"
  exec "$BUILD_DIR/examples/${demo}_sim" "$@"
fi

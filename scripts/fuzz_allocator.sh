#!/usr/bin/env bash
# fuzz_allocator.sh: builds the libFuzzer target of the KV block allocator (tests/kvcache/fuzz_allocator.cpp) with
# clang in its own build directory and runs it.
#
#   scripts/fuzz_allocator.sh            # 60 seconds
#   scripts/fuzz_allocator.sh 600 -jobs=2 -workers=2    # 10 minutes, extra libFuzzer flags after the seconds
#
# Environment: LLMK_FUZZ_BUILD_DIR (default build-fuzz/), CLANGXX (default clang++), JOBS (build jobs, default 2).
# The corpus is kept in $LLMK_FUZZ_BUILD_DIR/corpus/allocator (inputs that found new coverage); a crash leaves
# crash-<sha1> in the current directory: rerun it with  build-fuzz/tests/kvcache/kvcache_fuzz_allocator crash-<sha1>
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

seconds="${1:-60}"
[[ $# -gt 0 ]] && shift
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [seconds] [libFuzzer flags...]" >&2
  exit 2
fi
build="${LLMK_FUZZ_BUILD_DIR:-$LLMK_ROOT/build-fuzz}"
clangxx="${CLANGXX:-clang++}"
if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "fuzz_allocator.sh: $clangxx not found (libFuzzer needs clang; set CLANGXX)" >&2
  exit 1
fi

args=(-DCMAKE_CXX_COMPILER="$clangxx" -DLLMK_BUILD_FUZZERS=ON -DLLMK_BUILD_CUDA=OFF -DLLMK_BUILD_BENCHMARKS=OFF
      -DLLMK_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
command -v ccache >/dev/null 2>&1 && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$LLMK_ROOT" -B "$build" "${args[@]}" >/dev/null
cmake --build "$build" --target kvcache_fuzz_allocator -j"$JOBS"

fuzzer="$build/tests/kvcache/kvcache_fuzz_allocator"
if [[ ! -x "$fuzzer" ]]; then
  echo "fuzz_allocator.sh: $fuzzer was not built (does $clangxx support -fsanitize=fuzzer?)" >&2
  exit 1
fi
corpus="$build/corpus/allocator"
mkdir -p "$corpus"
echo "fuzzing the KV block allocator for ${seconds}s (corpus $corpus)"
"$fuzzer" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$@" "$corpus"

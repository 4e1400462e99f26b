#!/usr/bin/env bash
# check_consumers.sh: llmk is usable three ways; build and run a tiny consumer (tests/consumer/) each way.
#   (a) cmake --install to a temporary prefix, then find_package(llmk CONFIG) from tests/consumer
#   (b) add_subdirectory(<repo>) from a generated project
#   (c) plain compiler: g++ -std=c++20 -I include (host-only, and the simulator with -DLLMK_SIM -lboost_context)
# Usage: scripts/check_consumers.sh            (needs cmake, g++, libboost-context-dev: scripts/setup.sh)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CXX="${CXX:-g++}"
JOBS="${JOBS:-2}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/llmk-consumers.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

step() { printf '\n== check_consumers: %s\n' "$*"; }

# (a) install + find_package -------------------------------------------------------------------------------------
step "(a) cmake --install + find_package(llmk CONFIG)"
cmake -S "$ROOT" -B "$WORK/llmk-build" -DLLMK_BUILD_TESTS=OFF -DLLMK_BUILD_BENCHMARKS=OFF \
  -DLLMK_BUILD_EXAMPLES=OFF -DLLMK_BUILD_CUDA=OFF -DCMAKE_INSTALL_PREFIX="$WORK/prefix" >"$WORK/a-configure.log" \
  || { cat "$WORK/a-configure.log"; exit 1; }
cmake --install "$WORK/llmk-build" >"$WORK/a-install.log" || { cat "$WORK/a-install.log"; exit 1; }
test -f "$WORK/prefix/lib/cmake/llmk/llmkConfig.cmake" -o -f "$WORK/prefix/lib64/cmake/llmk/llmkConfig.cmake" \
  || { echo "llmkConfig.cmake was not installed"; find "$WORK/prefix" -name '*.cmake'; exit 1; }
cmake -S "$ROOT/tests/consumer" -B "$WORK/consumer-a" -DCMAKE_PREFIX_PATH="$WORK/prefix" "${launcher[@]}"
cmake --build "$WORK/consumer-a" -j "$JOBS"
(cd "$WORK/consumer-a" && ctest --output-on-failure)
# The installed package must not point back into the source tree.
if grep -rq "$ROOT" "$WORK/prefix/lib"*/cmake/llmk/; then
  echo "installed llmk package refers to the source tree $ROOT:"; grep -rn "$ROOT" "$WORK/prefix/lib"*/cmake/llmk/
  exit 1
fi

# (b) add_subdirectory -------------------------------------------------------------------------------------------
step "(b) add_subdirectory(llmk)"
mkdir -p "$WORK/sub"
cp "$ROOT/tests/consumer/host.cpp" "$ROOT/tests/consumer/sim.cpp" "$WORK/sub/"
cat >"$WORK/sub/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(llmk_subdir_consumer LANGUAGES CXX)
add_subdirectory("$ROOT" llmk)
if(TARGET llmk_test_main_sim OR NOT TARGET llmk::sim)
  message(FATAL_ERROR "llmk as a subproject must give llmk::sim and must not build its own tests")
endif()
add_executable(consumer_host host.cpp)
target_link_libraries(consumer_host PRIVATE llmk::llmk)
add_executable(consumer_sim sim.cpp)
target_link_libraries(consumer_sim PRIVATE llmk::sim)
CMAKE
cmake -S "$WORK/sub" -B "$WORK/sub/build" "${launcher[@]}"
cmake --build "$WORK/sub/build" -j "$JOBS"
"$WORK/sub/build/consumer_host"
"$WORK/sub/build/consumer_sim"

# (c) plain -I include -------------------------------------------------------------------------------------------
step "(c) $CXX -std=c++20 -I include"
"$CXX" -std=c++20 -Wall -Wextra -I "$ROOT/include" "$ROOT/tests/consumer/host.cpp" -o "$WORK/plain_host"
"$WORK/plain_host"
"$CXX" -std=c++20 -Wall -Wextra -DLLMK_SIM -I "$ROOT/include" "$ROOT/tests/consumer/sim.cpp" -o "$WORK/plain_sim" \
  -lboost_context -pthread
"$WORK/plain_sim"

step "all three ways work"

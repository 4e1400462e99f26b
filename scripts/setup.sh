#!/usr/bin/env bash
# setup.sh: install the Debian packages llmk's build, tests and demo need (only those that are missing).
#   cmake g++ make        the build
#   libboost-context-dev  the simulator's fibers
#   doctest-dev           tests
#   libbenchmark-dev      benchmarks
#   clang-format          formatting checks
#   clang                 the libFuzzer target of the KV block allocator (scripts/fuzz_allocator.sh), and the
#                         TSan runtime the LLMK_SANITIZE=thread build links (LLMK_TSAN_RUNTIME, CMakeLists.txt)
#   liblapack-dev libblas-dev  the host linear-algebra backend of llmk/obs (linked to the obs tests only)
#   libthrust-dev         Thrust (CPP system) behind llmk/core/device_algorithms.cuh in the simulator
#   libopenblas-dev       an optimized BLAS/LAPACK for that backend (CMake prefers it; the reference BLAS is the
#                         fallback): host GPTQ on 4096 x 4096 in seconds instead of minutes (docs/obs.md)
# The CUDA toolkit (nvcc at /usr/local/cuda) is expected to be installed already; without it only the simulator
# (_sim) targets are built.
set -euo pipefail

packages=(cmake g++ make libboost-context-dev doctest-dev libbenchmark-dev clang-format clang liblapack-dev libblas-dev libopenblas-dev libthrust-dev)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup.sh: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup.sh: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

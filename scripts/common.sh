# common.sh: sourced by the llmk scripts. Finds nvcc, ccache and the build directory; configures a build.
# shellcheck shell=bash

LLMK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-2}"
BUILD_DIR="${LLMK_BUILD_DIR:-$LLMK_ROOT/build}"

# nvcc: on PATH, or the toolkit's default location.
llmk_find_nvcc() {
  if command -v nvcc >/dev/null 2>&1; then
    command -v nvcc
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    echo /usr/local/cuda/bin/nvcc
  fi
}

# True when nvidia-smi sees at least one GPU.
llmk_have_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}

# cmake arguments every configure gets: the CUDA compiler when there is one, ccache when installed.
llmk_cmake_args() {
  local nvcc
  nvcc="$(llmk_find_nvcc)"
  if [[ -n "$nvcc" ]]; then
    echo "-DCMAKE_CUDA_COMPILER=$nvcc"
  else
    echo "-DLLMK_BUILD_CUDA=OFF"
  fi
  if command -v ccache >/dev/null 2>&1; then
    echo "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    [[ -n "$nvcc" ]] && echo "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
  fi
  echo "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"
}

# llmk_configure <build dir> [extra cmake args...]
llmk_configure() {
  local dir="$1"
  shift
  local args
  mapfile -t args < <(llmk_cmake_args)
  cmake -S "$LLMK_ROOT" -B "$dir" "${args[@]}" "$@"
}

# Puts cuobjdump (and nvdisasm) on PATH for the static performance gates. This CUDA install has neither; the PyPI
# wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm carry them and are installed into .perf-tools/ (ignored).
llmk_perf_tools() {
  command -v cuobjdump >/dev/null 2>&1 && return 0
  local tools="$LLMK_ROOT/.perf-tools" bin
  bin="$(find "$tools" -name cuobjdump -type f 2>/dev/null | head -n 1 || true)"  # no .perf-tools/ yet: empty
  if [[ -z "$bin" ]]; then
    echo "== installing cuobjdump/nvdisasm from PyPI into .perf-tools/"
    python3 -m pip install --quiet --disable-pip-version-check --target "$tools" nvidia-cuda-cuobjdump \
      nvidia-cuda-nvdisasm >&2 || { echo "llmk: pip install nvidia-cuda-cuobjdump failed" >&2; return 1; }
    bin="$(find "$tools" -name cuobjdump -type f | head -n 1 || true)"
  fi
  [[ -n "$bin" ]] || { echo "llmk: cuobjdump not found after installing nvidia-cuda-cuobjdump" >&2; return 1; }
  chmod +x "$bin" "$(dirname "$bin")"/* 2>/dev/null || true
  export PATH="$(dirname "$bin"):$PATH"
}

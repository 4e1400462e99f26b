#!/usr/bin/env bash
# gpu_prepare.sh: the preparation step of scripts/gpu_validate.sh, run HERE (a machine with Debian's package
# registry), not on the GPU machine, which has CUDA, CMake, ninja and PyTorch but no network and none of these:
#   doctest-dev                      the _cuda tests' doctest headers
#   libbenchmark-dev libbenchmark1debian   Google Benchmark (headers, CMake config, shared library)
#   liblapack-dev liblapack3 libblas-dev libblas3 libgfortran5 libquadmath0
#                                    LAPACK/BLAS: the obs tests and bench_obs link the host backend
# It downloads the .deb files (apt-get download: no root, no install) and unpacks them with dpkg -x into
# .gpu-deps/root (ignored by git). Name `.gpu-deps` in the device call's `carry`; gpu_validate.sh points CMake
# (CMAKE_PREFIX_PATH) and the loader (LD_LIBRARY_PATH) at it.
#
# Usage: scripts/gpu_prepare.sh [--check]     --check: only verify an existing .gpu-deps (exit 1 if incomplete)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DEPS="$LLMK_ROOT/.gpu-deps"
PACKAGES=(doctest-dev libbenchmark-dev libbenchmark1debian liblapack-dev liblapack3 libblas-dev libblas3 libgfortran5
  libquadmath0)
# Files whose presence proves the unpacked tree is usable (relative to .gpu-deps/root).
REQUIRED=(usr/include/doctest/doctest.h usr/include/benchmark/benchmark.h
  "usr/lib/x86_64-linux-gnu/cmake/benchmark/benchmarkConfig.cmake")

check() {
  local f missing=0
  for f in "${REQUIRED[@]}"; do
    [[ -e "$DEPS/root/$f" ]] || { echo "gpu_prepare: missing .gpu-deps/root/$f" >&2; missing=1; }
  done
  compgen -G "$DEPS/root/usr/lib/x86_64-linux-gnu/liblapack.so*" >/dev/null || compgen -G \
    "$DEPS/root/usr/lib/x86_64-linux-gnu/lapack/liblapack.so*" >/dev/null || { echo "gpu_prepare: no liblapack.so" >&2; missing=1; }
  return "$missing"
}

if [[ "${1:-}" == "--check" ]]; then
  check && echo "gpu_prepare: .gpu-deps is complete ($(du -sh "$DEPS" | cut -f1))"
  exit $?
fi

command -v apt-get >/dev/null || { echo "gpu_prepare: apt-get not found (run this on the Debian development machine)" >&2; exit 1; }
rm -rf "$DEPS"
mkdir -p "$DEPS/debs" "$DEPS/root"
echo "== downloading ${PACKAGES[*]}"
if ! (cd "$DEPS/debs" && apt-get download -qq "${PACKAGES[@]}" 2>/dev/null); then
  # The package lists may be missing on a fresh machine: refresh them (needs root) and try once more.
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  (cd "$DEPS/debs" && apt-get download -qq "${PACKAGES[@]}")
fi
for deb in "$DEPS"/debs/*.deb; do
  dpkg -x "$deb" "$DEPS/root"
done
# The -dev packages' lib*.so links point into Debian's alternatives (/etc/alternatives) for BLAS/LAPACK, which
# do not travel: point them at the unpacked libraries directly.
libdir="$DEPS/root/usr/lib/x86_64-linux-gnu"
for lib in blas lapack; do
  real="$(find "$libdir/$lib" -name "lib$lib.so.3*" -type f 2>/dev/null | head -n 1)"
  [[ -n "$real" ]] || continue
  ln -sf "$lib/$(basename "$real")" "$libdir/lib$lib.so.3"
  ln -sf "lib$lib.so.3" "$libdir/lib$lib.so"
done
dpkg-deb -f "$DEPS"/debs/libbenchmark-dev_*.deb Version >"$DEPS/benchmark-version"
# Static archives are not used (only Google Benchmark's tiny benchmark_main): they would only weigh on the carry.
find "$DEPS/root" -name '*.a' ! -name 'libbenchmark_main.a' -delete
rm -rf "$DEPS/debs" "$DEPS/root/usr/share/doc" "$DEPS/root/usr/share/man"
# The sha of the tree this was prepared from: the device gets a copy of the working tree, possibly without .git.
sha="$(git -C "$LLMK_ROOT" rev-parse --short=7 HEAD 2>/dev/null || echo nogit)"
git -C "$LLMK_ROOT" diff --quiet HEAD 2>/dev/null || sha="$sha-dirty"
echo "$sha" >"$DEPS/source-sha"
check
echo "gpu_prepare: .gpu-deps ready ($(du -sh "$DEPS" | cut -f1)); name it in the device call's carry"

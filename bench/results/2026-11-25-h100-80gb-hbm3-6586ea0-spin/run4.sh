#!/usr/bin/env bash
# Fourth H100 call of 2026-11-25: is the small-M GEMMs' ~30 us floor host time? The same small-M cases with
# the default 20 us spin before each start event and with a 200 us one (LLMK_BENCH_SPIN_CYCLES).
set -uo pipefail
t0=$SECONDS
R="bench/results/2026-11-25-h100-80gb-hbm3-$(tr -d '[:space:]' < .gpu-deps/source-sha)-spin"
mkdir -p "$R/bench" "$R/logs"
pack() { tar czf "$OUT/r4.tgz" "$R"; }
trap pack EXIT
deps="$PWD/.gpu-deps/root/usr"
export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90a -DLLMK_BUILD_SIM=OFF \
  -DLLMK_BUILD_CUDA=ON -DCMAKE_PREFIX_PATH="$deps" > "$R/logs/configure.log" 2>&1 || { echo configure failed; exit 1; }
timeout 150 cmake --build build-gpu -j 16 --target bench_quant_gemm_cuda > "$R/logs/build.log" 2>&1 || { echo build failed; tail -20 "$R/logs/build.log"; exit 1; }
echo "built at $((SECONDS - t0)) s"
f='^BM_(W4A16|W8A8|FP8|CublasHgemm|CublasLtInt8|CublasLtFp8)/M:(1|16)/N:(4096|28672)/K:4096/'
for spin in 40000 400000; do
  LLMK_BENCH_SPIN_CYCLES=$spin timeout 60 build-gpu/bench/bench_quant_gemm_cuda --benchmark_format=json \
    --benchmark_out="$R/bench/bench_quant_gemm_cuda_spin$spin.json" --benchmark_out_format=json \
    --benchmark_min_time=0.05 --benchmark_filter="$f" > "$R/logs/spin$spin.log" 2>&1
  echo "spin $spin rc $? at $((SECONDS - t0)) s"
done
grep -h '"name"\|"real_time"' $R/bench/*.json | paste - - | awk '{print $2, $4}' | sed 's/"//g; s/,//g' | column -t

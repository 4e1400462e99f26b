#!/usr/bin/env bash
# Third H100 call of 2026-11-25: a subset with the spin-before-start timing: weight-only / 8-bit GEMMs with
# their cuBLAS(Lt) anchors, the mma.sync prefill (default and tile variants) with PyTorch SDPA, decode.
set -uo pipefail
t0=$SECONDS
R="bench/results/2026-11-25-h100-80gb-hbm3-$(tr -d '[:space:]' < .gpu-deps/source-sha)-subset"
mkdir -p "$R/bench" "$R/anchors" "$R/logs"
pack() { tar czf "$OUT/r3.tgz" "$R"; }
trap pack EXIT
deps="$PWD/.gpu-deps/root/usr"
export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu"
{ nvidia-smi -L; nvidia-smi -q; } > "$R/nvidia-smi.txt" 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90a -DLLMK_BUILD_SIM=OFF \
  -DLLMK_BUILD_CUDA=ON -DLLMK_BENCH_VARIANTS=ON -DCMAKE_PREFIX_PATH="$deps" > "$R/logs/configure.log" 2>&1 || { echo configure failed; exit 1; }
timeout 240 cmake --build build-gpu -j 16 --target bench_quant_gemm_cuda bench_attention_prefill_cuda bench_attention_decode_cuda \
  > "$R/logs/build.log" 2>&1 || { echo build failed; tail -20 "$R/logs/build.log"; exit 1; }
echo "built at $((SECONDS - t0)) s"
b() { local name=$1 lim=$2 filt=$3
  timeout "$lim" build-gpu/bench/$name --benchmark_format=json --benchmark_out="$R/bench/$name.json" \
    --benchmark_out_format=json --benchmark_min_time=0.05 --benchmark_filter="$filt" > "$R/logs/$name.log" 2>&1
  echo "$name rc $? at $((SECONDS - t0)) s"; pack; }
b bench_attention_prefill_cuda 60 'BM_PrefillMma'
timeout 60 python3 bench/anchors/torch_sdpa.py --out "$R/anchors/torch_sdpa.json" --min-time 0.05 > "$R/logs/torch_sdpa.log" 2>&1
echo "sdpa rc $? at $((SECONDS - t0)) s"; pack
b bench_attention_decode_cuda 40 '.'
b bench_quant_gemm_cuda 170 'BM_W4A16/|BM_CublasHgemm|BM_W8A8|BM_CublasLtInt8|BM_FP8/|BM_CublasLtFp8'
echo "{\"sha\": \"$(cat .gpu-deps/source-sha)\", \"gpu\": \"$(nvidia-smi --query-gpu=name --format=csv,noheader)\", \"command\": \".gpu-deps/run3.sh (a subset; the script is quoted in docs/performance.md)\", \"date\": \"$(date -u +%FT%TZ)\"}" > "$R/meta.json"
echo "done at $((SECONDS - t0)) s"

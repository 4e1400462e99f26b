// llmk/llmk.cuh: everything a kernel translation unit needs, in one include (nvcc, or the host compiler with
// LLMK_SIM). Host-only code that just wants the number types or Status can include llmk/core/*.cuh directly;
// the host references live in llmk/reference/.
#pragma once

#include "llmk/config.cuh"

#include "llmk/core/int4.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/core/vector.cuh"

#include "llmk/arch/arch.cuh"

#include "llmk/gemm/gemm_f16.cuh"
#include "llmk/gemm/tile_gemm.cuh"
#include "llmk/gemm/w8a8.cuh"
#include "llmk/gemm/weight_only.cuh"

#include "llmk/quant/quant.cuh"

#include "llmk/attention/attention.cuh"

#include "llmk/kvcache/paged_kv.cuh"

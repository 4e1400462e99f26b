// llmk/arch/arch.cuh: every PTX atom llmk uses (inline PTX lives only under llmk/arch/).
#pragma once

#include "llmk/arch/bit_ops.cuh"
#include "llmk/arch/convert.cuh"
#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/fast_math.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/arch/minmax.cuh"
#include "llmk/arch/mma.cuh"
#include "llmk/arch/mma_f32.cuh"
#include "llmk/arch/packed_math.cuh"

// llmk/arch/sm90.cuh: every Hopper atom (docs/hopper.md). Not part of llmk/arch/arch.cuh: only sm_90 kernels
// need them, and the wgmma asm is large.
#pragma once

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/cluster.cuh"
#include "llmk/arch/sm90/mbarrier.cuh"
#include "llmk/arch/sm90/stmatrix.cuh"
#include "llmk/arch/sm90/tma.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/arch/sm90/wgmma.cuh"

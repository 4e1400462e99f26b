// llmk/quant/quant.cuh: the quantization capability in one include: the arithmetic (scheme.cuh), the
// quantize / dequantize / dynamic / reduction / int4 packing kernels, column reductions and the LLM.int8()
// outlier split. The host-only calibration and SmoothQuant helpers are calibration.hpp and smoothquant.hpp.
#pragma once

#include "llmk/quant/scheme.cuh"

#include "llmk/quant/kernels.cuh"
#include "llmk/quant/outliers.cuh"
#include "llmk/quant/reduce_columns.cuh"

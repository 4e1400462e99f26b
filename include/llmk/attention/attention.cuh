// llmk/attention/attention.cuh: everything of the attention capability (prefill, split-KV decode, the
// online-softmax state and the masks). See docs/attention.md.
#pragma once

#include "llmk/attention/args.cuh"
#include "llmk/attention/decode.cuh"
#include "llmk/attention/mask.cuh"
#include "llmk/attention/online_softmax.cuh"
#include "llmk/attention/prefill.cuh"
#include "llmk/attention/prefill_fp8.cuh"

// llmk/attention/decode.cuh: flash-decoding. One query token per sequence over a long KV history.
//
// Decode reads every key and value once and does little math per byte, so the kernel is about keeping
// enough loads in flight. The KV range of each sequence is split into num_splits chunks, one block each
// (grid: splits x (KV heads x head tiles) x batch), so that even batch 1 fills the GPU. Inside a block:
//   - the rows of the mma tile are the query heads of ONE KV head's group (up to 16 per block), so a K/V
//     tile loaded once serves the whole GQA group on tensor cores (MHA uses 1 of the 16 rows: decode is
//     bandwidth-bound, the idle rows cost no bandwidth);
//   - each warp takes 16 keys of every Bc = 16 * Warps key tile and keeps its own online-softmax state;
//     at the end the warps merge their states through shared memory.
// With one split the block writes O directly. Otherwise it writes a normalized fp32 partial output and its
// base-2 log-sum-exp to the caller's workspace, and decode_merge_kernel combines the splits:
//   out = sum_s 2^(lse_s - lse) * out_s,   lse = log2 sum_s 2^lse_s.
// Split boundaries: by default the visible range is cut evenly into num_splits chunks, so they (and the low
// bits of the output) follow the split count the heuristic picks from the batch and the SM count. The
// batch-invariant mode (DecodeSplits::batch_invariant) cuts every sequence into fixed keys_per_split chunks
// instead, so a sequence's bits depend on that sequence only.
//
// The parts: decode_plan.cuh (DecodeConfig, DecodeSplits, DecodePlan, the split heuristic and the planning),
// decode_kernels.cuh (decode_kernel and decode_merge_kernel). This file: the argument checks, the launch and
// the public entries (plan_decode / decode, plan_decode_paged / decode_paged and their _with_config forms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "llmk/attention/args.cuh"
#include "llmk/attention/decode_kernels.cuh"
#include "llmk/attention/decode_plan.cuh"
#include "llmk/attention/kv_access.cuh"
#include "llmk/attention/validate.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/kvcache/paged_kv.cuh"

namespace llmk::attention {

namespace detail {

template <class T>
Status validate_decode(const DecodeArgs<T>& a, bool dense_kv = true) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "decode supports half and bfloat16");
  if (a.batch < 1) return Status::invalid_argument("batch", str_cat("must be >= 1, got ", a.batch));
  LLMK_RETURN_IF_ERROR(check_heads(a.num_heads, a.num_kv_heads));
  LLMK_RETURN_IF_ERROR(check_options(a.options));
  const std::int64_t d = a.head_dim;
  const bool batched = a.batch > 1;
  LLMK_RETURN_IF_ERROR(
      check_rows("q", a.q, "q_stride_head", a.q_stride_head, "q_stride_batch", a.q_stride_batch, batched, d));
  LLMK_RETURN_IF_ERROR(
      check_rows("o", a.o, "o_stride_head", a.o_stride_head, "o_stride_batch", a.o_stride_batch, batched, d));
  if (a.lse != nullptr) LLMK_RETURN_IF_ERROR(check_element_alignment<float>("lse", a.lse));
  if (dense_kv) {
    LLMK_RETURN_IF_ERROR(check_rows("k", a.k, "k_stride_head", a.k_stride_head, "k_stride_batch",
                                    a.k_stride_batch, batched, d));
    LLMK_RETURN_IF_ERROR(check_rows("v", a.v, "v_stride_head", a.v_stride_head, "v_stride_batch",
                                    a.v_stride_batch, batched, d));
    LLMK_RETURN_IF_ERROR(check_stride("k_stride_token", a.k_stride_token));
    LLMK_RETURN_IF_ERROR(check_stride("v_stride_token", a.v_stride_token));
  } else if (a.k != nullptr || a.v != nullptr || a.kv_lens != nullptr) {
    return Status::invalid_argument("k/v/kv_lens", "must be null: keys and values come from the paged cache");
  }
  // Output rows of different (batch, head) pairs must not overlap: batch-major or head-major layouts. With
  // one sequence the batch stride is unused and the heads' rows are apart by o_stride_head >= head_dim
  // (check_rows). Saturating products: the strides are positive but may be huge.
  if (a.batch > 1) {
    const bool batch_major = a.o_stride_batch >= mul_sat(a.o_stride_head, a.num_heads);
    const bool head_major = a.o_stride_batch >= d && a.o_stride_head >= mul_sat(a.o_stride_batch, a.batch);
    if (!batch_major && !head_major)
      return Status::invalid_argument(
          "o_stride_batch/o_stride_head",
          str_cat("output rows overlap: need stride_batch >= num_heads * stride_head (batch-major) or "
                  "stride_head >= "
                  "batch * stride_batch with stride_batch >= head_dim (head-major), got ",
                  a.o_stride_batch, " and ", a.o_stride_head));
  }
  if (dense_kv && ((a.max_kv_len < 0) || (a.max_kv_len > (1 << 30))))
    return Status::invalid_argument("max_kv_len", str_cat("must be in [0, 2^30], got ", a.max_kv_len));
  if (dense_kv && a.kv_lens != nullptr) {
    LLMK_RETURN_IF_ERROR(check_element_alignment<int>("kv_lens", a.kv_lens));  // read as int32
    if (a.kv_lens_host == nullptr)
      return Status::invalid_argument("kv_lens_host",
                                      "must be given with kv_lens (the host copy is validated)");
    for (int b = 0; b < a.batch; ++b)
      if (a.kv_lens_host[b] < 0 || a.kv_lens_host[b] > a.max_kv_len)
        return Status::invalid_argument("kv_lens", str_cat("must be in [0, max_kv_len = ", a.max_kv_len,
                                                           "], sequence ", b, " has ", a.kv_lens_host[b]));
  }
  const int group = a.num_heads / a.num_kv_heads;
  if (static_cast<long long>(a.num_kv_heads) * ceil_div(group, 16) > 65535 || a.batch > 65535)
    return Status::invalid_argument("num_heads/batch",
                                    "grid limits: num_kv_heads * ceil(group / 16) and batch <= 65535");
  return {};
}

// max_len: the longest history (a bound), to check that a batch-invariant plan's splits cover it.
template <class T, class Cfg, class Kv>
Status launch_decode(const DecodeArgs<T>& args, const DecodePlan& plan, void* workspace,
                     std::size_t workspace_bytes, const Kv& kv, int max_len, cudaStream_t stream) {
  if (plan.keys_per_split != 0) {
    LLMK_RETURN_IF_ERROR(check_fixed_splits<Cfg>("plan.num_splits", plan.num_splits, "plan.keys_per_split",
                                                 plan.keys_per_split, visible_keys(args, max_len)));
    if (plan.num_splits < 1)
      return Status::invalid_argument("plan.num_splits",
                                      str_cat("must be >= 1, got ", plan.num_splits, " (use plan_decode)"));
  } else if (plan.num_splits < 1 || plan.num_splits > kMaxDecodeSplits) {
    return Status::invalid_argument("plan.num_splits", str_cat("must be in [1, ", kMaxDecodeSplits, "], got ",
                                                               plan.num_splits, " (use plan_decode)"));
  }
  const std::size_t need = decode_workspace_bytes(args.batch, args.num_heads, args.head_dim, plan.num_splits);
  DecodeWorkspace ws;
  ws.num_splits = plan.num_splits;
  ws.keys_per_split = plan.keys_per_split;
  if (need > 0) {
    if (workspace == nullptr)
      return Status::invalid_argument("workspace", str_cat("must not be null (", need, " bytes)"));
    if (workspace_bytes < need)
      return Status::invalid_argument(
          "workspace_bytes",
          str_cat("must be >= ", need, " for ", plan.num_splits, " splits, got ", workspace_bytes));
    if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0)
      return Status::invalid_argument("workspace", "must be 16-byte aligned");
    const std::size_t rows = static_cast<std::size_t>(args.batch) * args.num_heads * plan.num_splits;
    ws.partial_o = static_cast<float*>(workspace);
    ws.partial_lse2 = ws.partial_o + rows * args.head_dim;
  }
  const int group = args.num_heads / args.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(plan.num_splits),
                  static_cast<unsigned>(args.num_kv_heads * ceil_div(group, Cfg::kRows)),
                  static_cast<unsigned>(args.batch));
  LLMK_RETURN_IF_ERROR(
      launch(decode_kernel<T, Cfg, Kv>, grid, dim3(Cfg::kThreads), decode_smem_bytes<T, Cfg, Kv>(), stream,
             args, ScoreTransform::make(args.options.softmax_scale, args.options.softcap), ws, kv));
  if (plan.num_splits == 1) return {};
  constexpr int kHeads = kMergeHeadsPerBlock<Cfg::kHeadDim>;
  return launch(
      decode_merge_kernel<T, Cfg::kHeadDim>,
      dim3(static_cast<unsigned>(ceil_div(args.num_heads, kHeads)), static_cast<unsigned>(args.batch)),
      dim3(Cfg::kHeadDim / 8 * kHeads), 0, stream, args, ws);
}

template <class T>
BatchedKv<T> batched_kv(const DecodeArgs<T>& a) {
  return {a.k,
          a.v,
          a.k_stride_batch,
          a.k_stride_token,
          a.k_stride_head,
          a.v_stride_batch,
          a.v_stride_token,
          a.v_stride_head,
          a.kv_lens,
          a.max_kv_len};
}

constexpr const char* kDecodeInstantiation =
    "plan_decode_with_config / decode_with_config with DefaultDecodeConfig<";
constexpr const char* kPagedDecodeInstantiation =
    "plan_decode_paged_with_config / decode_paged_with_config with DefaultDecodeConfig<";

}  // namespace detail

/// Plans decode_with_config(): the split count (0 lets the heuristic choose from batch, heads, length and the
/// SM count; DecodeSplits::batch_invariant() cuts fixed chunks, see DecodeSplits) and the workspace it needs.
///
///   using Cfg = llmk::attention::DefaultDecodeConfig<80>;   // head dim 80: not dispatched by plan_decode
///   llmk::attention::DecodePlan plan;
///   LLMK_RETURN_IF_ERROR((llmk::attention::plan_decode_with_config<llmk::half, Cfg>(a, &plan)));
///
/// Errors (Status::invalid_argument naming the argument): plan null; head_dim != Cfg::kHeadDim; batch < 1;
/// num_heads or num_kv_heads < 1, or num_heads not a multiple of num_kv_heads; options.softmax_scale not
/// finite and > 0, options.softcap not finite and >= 0, options.window_left / window_right below -1; q, o, k
/// or v null or not 16-byte aligned; a head, token or (batch > 1) batch stride not a positive multiple of 8
/// elements, or a head stride below head_dim; lse not 4-byte aligned; overlapping output rows (need
/// o_stride_batch >= num_heads * o_stride_head, or o_stride_head >= batch * o_stride_batch with
/// o_stride_batch >= head_dim); max_kv_len outside [0, 2^30]; kv_lens not 4-byte aligned or given without
/// kv_lens_host, or a kv_lens_host[b] outside [0, max_kv_len]; batch or num_kv_heads * ceil(group / 16) above
/// 65535 (the grid). Splits: num_splits outside [0, kMaxDecodeSplits]; in the batch-invariant mode
/// keys_per_split not a positive multiple of Cfg::kBc (at most 2^30), num_splits below 0, or not 0 and
/// outside [ceil(visible keys / keys_per_split), kMaxBatchInvariantSplits], or a history that needs more than
/// kMaxBatchInvariantSplits chunks.
template <class T, class Cfg>
Status plan_decode_with_config(const DecodeArgs<T>& args, DecodePlan* plan, DecodeSplits splits = {}) {
  if (plan == nullptr) return Status::invalid_argument("plan", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args));
  return detail::plan_splits<T, Cfg>(args, args.max_kv_len, plan, splits);
}

/// Split-KV decode with an explicit configuration. The caller owns the workspace (CUB style): plan first,
/// allocate plan.workspace_bytes (16-byte aligned; nothing when 0), then run. It only enqueues kernels on
/// `stream` (no allocation, synchronization or host read of device memory), so it can be captured in a CUDA
/// graph; a workspace serves one call at a time (two decodes in flight on two streams need two).
///
///   llmk::attention::DecodeArgs<llmk::half> a;   // q [B, H, 128], k/v [B, max_len, H_kv, 128], ...
///   llmk::attention::DecodePlan plan;
///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode(a, &plan));
///   llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
///   LLMK_RETURN_IF_ERROR(llmk::attention::decode(a, plan, ws.data(), ws.size(), stream));
///
/// The explicit form takes a plan from plan_decode_with_config with the same Cfg:
///   namespace attn = llmk::attention;
///   LLMK_RETURN_IF_ERROR(
///       (attn::decode_with_config<llmk::half, Cfg>(a, plan, ws.data(), ws.size(), stream)));
///
/// Errors (Status::invalid_argument naming the argument): the argument checks of plan_decode_with_config;
/// plan.num_splits outside [1, kMaxDecodeSplits], or for a batch-invariant plan plan.keys_per_split not a
/// positive multiple of Cfg::kBc (at most 2^30) and plan.num_splits below 1 or too few for the longest
/// visible history; with more than one split, workspace null or not 16-byte aligned, or workspace_bytes below
/// what the plan needs for these arguments (plan.workspace_bytes). A failed launch: Status::cuda_error.
template <class T, class Cfg>
Status decode_with_config(const DecodeArgs<T>& args, const DecodePlan& plan, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args));
  return detail::launch_decode<T, Cfg>(args, plan, workspace, workspace_bytes, detail::batched_kv(args),
                                       args.max_kv_len, stream);
}

/// Plans decode_paged_with_config(): as plan_decode_with_config, with the lengths taken from the page table.
/// args.k, args.v and args.kv_lens must be null (args.max_kv_len is ignored).
///
///   using Cfg = llmk::attention::DefaultDecodeConfig<80>;
///   llmk::attention::DecodePlan plan;   // pages: a llmk::kvcache::PagedKv<llmk::half>, as for decode_paged
///   namespace attn = llmk::attention;
///   LLMK_RETURN_IF_ERROR((attn::plan_decode_paged_with_config<llmk::half, Cfg>(a, pages, &plan)));
///
/// Errors (Status::invalid_argument naming the argument): those of plan_decode_with_config without the dense
/// K/V rules (k, v, their strides, max_kv_len, kv_lens); k, v or kv_lens not null ('k/v/kv_lens'); the page
/// view's checks (kvcache::validate_paged_kv, naming 'pages.<field>').
template <class T, class Cfg, class Code = T>
Status plan_decode_paged_with_config(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                                     DecodePlan* plan, DecodeSplits splits = {}) {
  if (plan == nullptr) return Status::invalid_argument("plan", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args, /*dense_kv=*/false));
  kvcache::PagedKv<T, Code> view = pages;
  int max_len = 0;
  LLMK_RETURN_IF_ERROR(
      kvcache::validate_paged_kv(view, args.batch, args.num_kv_heads, args.head_dim, &max_len));
  return detail::plan_splits<T, Cfg>(args, max_len, plan, splits);
}

/// Split-KV decode over a paged KV cache (llmk/kvcache/paged_kv.cuh: NHD or HND pages, CSR or block-table
/// form, any page size). Same kernel as decode_with_config; rows come through the page table.
///
///   llmk::kvcache::PagedKv<llmk::half> pages;   // k_pages, v_pages, strides, page_size, num_pages, table
///   llmk::attention::DecodePlan plan;
///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode_paged(a, pages, &plan));
///   llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
///   LLMK_RETURN_IF_ERROR(llmk::attention::decode_paged(a, pages, plan, ws.data(), ws.size(), stream));
///
/// The explicit form takes a plan from plan_decode_paged_with_config with the same Cfg:
///   namespace attn = llmk::attention;
///   LLMK_RETURN_IF_ERROR(
///       (attn::decode_paged_with_config<llmk::half, Cfg>(a, pages, plan, ws.data(), ws.size(), stream)));
///
/// Errors (Status::invalid_argument naming the argument): the checks of plan_decode_paged_with_config, then
/// the plan and workspace checks of decode_with_config (the longest history taken from the page table). A
/// failed launch: Status::cuda_error.
template <class T, class Cfg, class Code = T>
Status decode_paged_with_config(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                                const DecodePlan& plan, void* workspace, std::size_t workspace_bytes,
                                cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args, /*dense_kv=*/false));
  kvcache::PagedKv<T, Code> view = pages;
  int max_len = 0;
  LLMK_RETURN_IF_ERROR(
      kvcache::validate_paged_kv(view, args.batch, args.num_kv_heads, args.head_dim, &max_len));
  return detail::launch_decode<T, Cfg>(args, plan, workspace, workspace_bytes,
                                       detail::PagedKvRows<T, Code>{view}, max_len, stream);
}

/// plan_decode_with_config() for the runtime head dims (kRuntimeHeadDims) with default tiles; the example is
/// decode_with_config's. Errors: those of plan_decode_with_config, and a head dim outside kRuntimeHeadDims
/// (invalid_argument naming 'head_dim' and the explicit instantiation to call).
template <class T>
Status plan_decode(const DecodeArgs<T>& args, DecodePlan* plan, DecodeSplits splits = {}) {
  return detail::dispatch_head_dim(args.head_dim, detail::kDecodeInstantiation, [&](auto dim) {
    return plan_decode_with_config<T, DefaultDecodeConfig<decltype(dim)::value>>(args, plan, splits);
  });
}

/// decode_with_config() for the runtime head dims (kRuntimeHeadDims) with default tiles; see there (example
/// and errors). A head dim outside kRuntimeHeadDims: invalid_argument naming 'head_dim'.
template <class T>
Status decode(const DecodeArgs<T>& args, const DecodePlan& plan, void* workspace, std::size_t workspace_bytes,
              cudaStream_t stream) {
  return detail::dispatch_head_dim(args.head_dim, detail::kDecodeInstantiation, [&](auto dim) {
    return decode_with_config<T, DefaultDecodeConfig<decltype(dim)::value>>(args, plan, workspace,
                                                                            workspace_bytes, stream);
  });
}

/// plan_decode_paged_with_config() for the runtime head dims; the example is decode_paged_with_config's.
/// Errors: those of plan_decode_paged_with_config, and a head dim outside kRuntimeHeadDims ('head_dim').
template <class T, class Code>
Status plan_decode_paged(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages, DecodePlan* plan,
                         DecodeSplits splits = {}) {
  return detail::dispatch_head_dim(args.head_dim, detail::kPagedDecodeInstantiation, [&](auto dim) {
    return plan_decode_paged_with_config<T, DefaultDecodeConfig<decltype(dim)::value>, Code>(args, pages,
                                                                                             plan, splits);
  });
}

/// decode_paged_with_config() for the runtime head dims; see there (example and errors). A head dim outside
/// kRuntimeHeadDims: invalid_argument naming 'head_dim'.
template <class T, class Code>
Status decode_paged(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages, const DecodePlan& plan,
                    void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  return detail::dispatch_head_dim(args.head_dim, detail::kPagedDecodeInstantiation, [&](auto dim) {
    return decode_paged_with_config<T, DefaultDecodeConfig<decltype(dim)::value>, Code>(
        args, pages, plan, workspace, workspace_bytes, stream);
  });
}

}  // namespace llmk::attention

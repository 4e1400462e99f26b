// llmk/gemm/checkpoint.cuh: GPTQ and AWQ checkpoint tensors in and out of the weight-only GEMM
// (llmk/gemm/weight_only.cuh). import_checkpoint_host / import_checkpoint (device) turn one linear layer's
// qweight / qzeros / scales / g_idx, exactly as a GPTQ (v1 or v2) or AWQ checkpoint stores them, into what
// weight_only_gemm takes: the packed weights, T scales, uint8 zero points and the act-order permutation.
// export_gptq_host writes llmk's own GPTQ result (llmk::obs::QuantizedLayer) as GPTQ checkpoint tensors.
//
// ---- The formats (one nn.Linear: weight W [N = out_features, K = in_features]) ----
// Packed tensors are int32, read as uint32 words; bit 0 is the word's least significant bit. b = bits,
// P = 32 / b codes per word, mask = 2^b - 1, G = group_size, groups = K / G. Codes q are unsigned in
// [0, mask]. Everything below is in elements of the named tensor, row-major.
//
// GPTQ (AutoGPTQ, GPTQ-for-LLaMa, GPTQModel; read by the exllama, exllamav2, Marlin and vLLM loaders):
//   qweight  int32 [K / P, N]        packed along K: word (i, n) holds q[n, k] for k = P i + j, j = 0 .. P-1,
//                                   in bits b j .. b j + b - 1 (4-bit: k = 8 i + j at bit 4 j; 8-bit:
//                                   k = 4 i + j at bit 8 j).
//   qzeros   int32 [groups, N / P]   packed the same way, along N: word (g, c) holds the stored zero of
//                                   column n = P c + j in bits b j .. b j + b - 1.
//   scales   fp16  [groups, N]       (GPTQ's layout, the weight-only GEMM's too).
//   g_idx    int32 [K]               group of input column k; absent means k / G. With act-order ("desc_act")
//                                   it is a shuffle of k / G: every group still has exactly G columns.
//   w[n, k] = scales[g, n] * (q[n, k] - z[g, n]),  g = g_idx[k].
//   Zero points. "gptq" (v1, the usual checkpoint_format) stores z - 1 and the loaders add 1 back; "gptq_v2"
//   (GPTQModel format="gptq_v2") stores z. See "v1 zero points" below for the one value where they differ.
//
// AWQ (AutoAWQ and llm-awq, version "GEMM"; 4-bit only):
//   qweight  int32 [K, N / 8]        packed along N, interleaved: nibble i (bits 4 i .. 4 i + 3) of word
//                                   (k, c) holds q[8 c + order[i], k], order = {0, 2, 4, 6, 1, 3, 5, 7}; i.e.
//                                   column 8 c + j is nibble 4 (j % 2) + j / 2 (the order AWQ's kernel
//                                   dequantizes in: its shifts give the even columns, then the odd ones).
//   qzeros   int32 [groups, N / 8]   the same packing; z stored as is (no offset).
//   scales   fp16  [groups, N];  no g_idx (AWQ has no act-order): g = k / G.
//   w[n, k] = scales[g, n] * (q[n, k] - z[g, n]).
//
// llmk's weight-only format (what import produces, weight_only.cuh): codes u = q unchanged (unsigned),
// repacked into the kernel layout (weight_only_repack; the plain input is [N, K], 4-bit two codes a byte with
// element 2 i in the low nibble, 8-bit one a byte), scales [groups, N] of T (half: the fp16 values exactly;
// bfloat16: rounded to nearest even, as every bf16 engine does), zero points uint8 [groups, N] holding z
// itself, and, for act-order, perm = act_order_permutation(g_idx), which the repack applies to W's columns
// and the GEMM to A's. Then weight_only_gemm computes exactly T(scales[g, n] * (q[n, k] - z[g, n])) per
// weight, the value the checkpoint defines (rounded once to T, see weight_only.cuh).
//
// ---- Rules, and why ----
//   bits 4 or 8                   the GEMM's code widths; 2- and 3-bit are Status::unsupported (3-bit words
//                                 also straddle fields across words). AWQ: 4 only (its only format).
//   GPTQ: K % P == 0              qweight packs P rows of K a word. GPTQ with qzeros: N % P == 0
//                                 (qzeros packs P columns a word, [groups, N * b / 32]). AWQ: N % 8 == 0
//                                 (both tensors pack 8 columns a word).
//   K % 16, G % 16, G | K         the GEMM's: K is covered by m16n8k16 steps and groups by whole k16 steps.
//                                 group_size -1 (GPTQ's "per-channel") means G = K.
//   g_idx: entries in [0, groups), each group exactly G columns: the act-order permutation's precondition.
//   AWQ with g_idx                rejected: the format has none, so a g_idx is a caller's mix-up.
//   4-byte aligned qweight, qzeros, g_idx (int32 loads), 2-byte aligned scales; device: dst.w 4-byte aligned
//   (the repack writes words), workspace 4-byte aligned (the flag word and group counters; the act-order
//   sort's temporary storage is aligned to 16 bytes inside it).
//   Every violation is Status::invalid_argument naming the argument ('qweight', 'qzeros', 'scales', 'g_idx',
//   'n', 'k', 'bits', 'group_size', 'format' for the checkpoint; 'dst.w', 'dst.scales', 'dst.zeros',
//   'dst.perm', 'workspace', 'workspace_bytes' for the outputs). Nothing is written on an error.
//
// ---- v1 zero points ----
// AutoGPTQ's pack() stores z - 1 (OR'ed into the word as a uint32) and every v1 loader adds 1 to the masked
// field: z = (stored & mask) + 1 (AutoGPTQ's torch path, exllama, exllamav2, vLLM's gptq_gemm). So v1 reaches
// z in [1, 2^b]; a true z = 0 cannot be stored (-1 is the all-ones field, and the OR also sets every field
// above it in that word), and the stored value mask reads back as z = 2^b. llmk reproduces those loaders:
//   4-bit stored 15  -> z = 16: a valid uint8 zero point; the GEMM computes s (u - 16), as the loaders do.
//   8-bit stored 255 -> z = 256 does not fit a uint8 zero point: rejected ('qzeros'), on the host and the
//                       device. Such a field comes from a true z = 0 that v1 cannot store; export the model
//                       as gptq_v2, which stores z = 0 as is.
// (GPTQModel's v1 -> v2 conversion instead adds 0x11111111 to the packed word, which wraps 15 to 0 and
// carries into the next field; the two readings differ only for stored == mask.) export_gptq_host writes v1
// only for z in [1, mask] and rejects z = 0 (write kV2 instead).
//
// ---- Host and device ----
// import_checkpoint_host (host memory) and import_checkpoint (device memory, caller-owned workspace) validate
// the same rules, including the tensors' contents (finite scales, g_idx, 8-bit v1 zeros: the device path
// checks them in a kernel and reads back one flag word, one stream synchronization),
// and write identical bytes: both unpack with the
// same decoding functions (one thread per plain byte and per scale / zero on the device) and then run the
// weight-only repack and act-order permutation, whose host and device versions are bit-identical.
// The act-order permutation is computed and used only when g_idx is not the trivial k / G (AutoGPTQ stores a
// trivial g_idx in every checkpoint without act-order; a permutation there would cost an A gather per call).
//
// ---- Files ----
// checkpoint_format.cuh    CheckpointFormat, CheckpointTensors, CheckpointImportOutput / Info; decoding
// checkpoint_validate.cuh  the argument and contents checks
// checkpoint_kernels.cuh   the device import's kernels (contents check, unpack)
// checkpoint_export.cuh    GptqExportFormat, GptqCheckpoint, export_gptq_host
// this file                unpack_checkpoint_host, import_checkpoint_host, import_checkpoint (+ its workspace
//                          size), checkpoint_gemm_args
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/checkpoint_export.cuh"
#include "llmk/gemm/checkpoint_format.cuh"
#include "llmk/gemm/checkpoint_kernels.cuh"
#include "llmk/gemm/checkpoint_validate.cuh"
#include "llmk/gemm/weight_only.cuh"

namespace llmk::gemm {

/// Unpacks a checkpoint to llmk's plain format on the host, without repacking: codes [N, K] in the ORIGINAL
/// column order (4-bit two a byte, element 2i in the low nibble; 8-bit one a byte; row stride ld_bytes),
/// scales [K / G, N] as T, and zero points z [K / G, N] (when src.qzeros is given; zeros may be null
/// otherwise). This is the input of weight_only_repack_host and of llmk::reference::weight_only_gemm (with
/// src.g_idx as its g_idx). g_idx is not read. Only the checkpoint's own rules apply here (not the GEMM's
/// K % 16 and G % 16), plus the v1 zero-point policy (an 8-bit stored 255 is rejected, 'qzeros').
///
///   std::vector<std::uint8_t> plain(N * (K / 2)), zeros((K / G) * N);
///   std::vector<llmk::half> scales((K / G) * N);
///   llmk::Status s =
///       llmk::gemm::unpack_checkpoint_host(src, plain.data(), K / 2, scales.data(), zeros.data());
///
/// Errors: the checkpoint's rules of the file comment (Status::invalid_argument naming 'qweight', 'n', ...;
/// 2- and 3-bit, or AWQ other than 4-bit: Status::unsupported); codes or scales_out null, ld_bytes below a
/// row's bytes, or zeros_out null when src.qzeros is given (invalid_argument naming it).
template <class T>
Status unpack_checkpoint_host(const CheckpointTensors& src, std::uint8_t* codes, std::int64_t ld_bytes,
                              T* scales_out, std::uint8_t* zeros_out) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "T must be llmk::half or llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(detail::validate_checkpoint(src, /*gemm_rules=*/false));
  if (codes == nullptr) return Status::invalid_argument("codes", "must not be null");
  const std::int64_t row = detail::ckpt_plain_ld(src.k, src.bits);
  if (ld_bytes < row)
    return Status::invalid_argument(
        "ld_bytes", str_cat("must be >= ", row, " (K=", src.k, ", bits=", src.bits, "), got ", ld_bytes));
  if (scales_out == nullptr) return Status::invalid_argument("scales_out", "must not be null");
  if (src.qzeros != nullptr && zeros_out == nullptr)
    return Status::invalid_argument("zeros_out", "must not be null: the checkpoint has qzeros");
  CheckpointTensors s = src;
  s.group_size = detail::ckpt_group_size(src);
  bool unused = false;
  LLMK_RETURN_IF_ERROR(detail::check_checkpoint_contents_host(s, /*check_g_idx=*/false, &unused));
  detail::unpack_codes_host(s, codes, ld_bytes);
  detail::unpack_quant_host(s, scales_out, zeros_out);
  return {};
}

/// Imports a checkpoint on the host (all pointers host memory): writes the GEMM's packed weights (dst.w,
/// weight_only_packed_bytes(N, K, bits) bytes), scales as T, zero points (with qzeros) and, when g_idx is not
/// k / G, the act-order permutation. Validates every argument and the tensors' contents (g_idx: range and
/// exactly G columns a group; the v1 zero-point policy) before writing anything. `info` (optional) says what
/// was written; checkpoint_gemm_args turns it into the GEMM's arguments. The same bytes as import_checkpoint.
///
///   llmk::gemm::CheckpointTensors src{llmk::gemm::CheckpointFormat::kGptqV1, qweight, qzeros, scales, g_idx,
///                                     N, K, /*bits=*/4, /*group_size=*/128};
///   std::vector<std::uint8_t> w(llmk::gemm::weight_only_packed_bytes(N, K, 4)), zeros((K / 128) * N);
///   std::vector<llmk::half> sc((K / 128) * N);
///   std::vector<std::int32_t> perm(K);
///   llmk::gemm::CheckpointImportOutput<llmk::half> dst{w.data(), sc.data(), zeros.data(), perm.data()};
///   llmk::gemm::CheckpointImportInfo info;
///   llmk::Status s = llmk::gemm::import_checkpoint_host(src, dst, &info);
///   // upload w, sc, zeros (if info.zeros) and perm (if info.act_order); then checkpoint_gemm_args
///
/// Errors: every rule of the file comment ("Rules, and why": Status::invalid_argument naming the checkpoint
/// tensor or 'dst.<field>'; 2- and 3-bit, or AWQ other than 4-bit: Status::unsupported). Nothing is written
/// on an error.
template <class T>
Status import_checkpoint_host(const CheckpointTensors& src, const CheckpointImportOutput<T>& dst,
                              CheckpointImportInfo* info = nullptr) {
  LLMK_RETURN_IF_ERROR(detail::validate_checkpoint(src, /*gemm_rules=*/true));
  LLMK_RETURN_IF_ERROR(detail::validate_import_output(src, dst, /*device=*/false));
  CheckpointTensors s = src;
  s.group_size = detail::ckpt_group_size(src);
  bool act_order = false;
  LLMK_RETURN_IF_ERROR(detail::check_checkpoint_contents_host(s, /*check_g_idx=*/true, &act_order));
  if (act_order && dst.perm == nullptr)
    return Status::invalid_argument("dst.perm", "must not be null: g_idx is not k / group_size (act-order)");
  const std::int64_t ld = detail::ckpt_plain_ld(s.k, s.bits);
  std::vector<std::uint8_t> plain(static_cast<std::size_t>(static_cast<std::int64_t>(s.n) * ld));
  detail::unpack_codes_host(s, plain.data(), ld);
  if (act_order) LLMK_RETURN_IF_ERROR(act_order_permutation_host(s.g_idx, s.k, s.group_size, dst.perm));
  const WeightRepackArgs r{plain.data(), ld, act_order ? dst.perm : nullptr, dst.w, s.n, s.k, s.bits, false};
  LLMK_RETURN_IF_ERROR(weight_only_repack_host(r));
  detail::unpack_quant_host(s, dst.scales, dst.zeros);
  if (info != nullptr) *info = {s.qzeros != nullptr, act_order};
  return {};
}

namespace detail {
// Offset of the act-order permutation's temporary storage in the workspace (after the header, the group
// counters and the plain codes), and its size.
inline std::size_t ckpt_perm_temp_offset(const CheckpointTensors& src) {
  const std::size_t groups = static_cast<std::size_t>(src.k / ckpt_group_size(src));
  return round_up<std::size_t>(
      kCkptHeaderBytes + round_up<std::size_t>(4 * groups, 16) +
          static_cast<std::size_t>(src.n) * static_cast<std::size_t>(ckpt_plain_ld(src.k, src.bits)),
      256);
}
// With a g_idx: act_order_permutation's temporary storage plus 12 bytes, so that the storage can start at
// the next 16-byte boundary of a workspace that is only 4-byte aligned (ckpt_perm_temp).
inline std::size_t ckpt_perm_temp_bytes(const CheckpointTensors& src) {
  std::size_t bytes = 0;
  if (src.g_idx == nullptr) return 0;  // no act-order without a g_idx
  (void)act_order_permutation(nullptr, &bytes, src.g_idx, src.k, ckpt_group_size(src), nullptr, nullptr);
  return bytes + 12;
}
// The act-order temporary storage in the workspace: 16-byte aligned (what the sort's storage needs).
inline void* ckpt_perm_temp(std::uint8_t* workspace, const CheckpointTensors& src) {
  const auto at = reinterpret_cast<std::uintptr_t>(workspace + ckpt_perm_temp_offset(src));
  return reinterpret_cast<void*>((at + 15) / 16 * 16);
}
}  // namespace detail

/// Bytes of device workspace import_checkpoint needs: a 16-byte flag header, one int32 counter per group
/// (rounded up to 16 bytes), the plain codes N * K * bits / 8 and, with a g_idx, act_order_permutation's
/// temporary storage (plus 12 bytes to align it: the workspace need only be 4-byte aligned). 0 for a
/// checkpoint that fails validation.
///   std::size_t bytes = llmk::gemm::import_checkpoint_workspace_bytes(src);
inline std::size_t import_checkpoint_workspace_bytes(const CheckpointTensors& src) {
  if (!detail::validate_checkpoint(src, /*gemm_rules=*/true).ok()) return 0;
  return detail::ckpt_perm_temp_offset(src) + detail::ckpt_perm_temp_bytes(src);
}

/// Imports a checkpoint on the device (src's tensors, dst and workspace: device memory): the same checks and
/// the same bytes as import_checkpoint_host. Kernels: a contents check (finite scales, g_idx, 8-bit v1 zeros;
/// its flag word is read back: one synchronization of `stream`), the unpack
/// (one thread per plain byte into the workspace, one per scale / zero point into dst), then
/// act_order_permutation (with act-order) and weight_only_repack. An offline step: run it once per layer
/// after uploading the checkpoint's tensors. On an error nothing in dst is written.
///
///   std::size_t ws_bytes = llmk::gemm::import_checkpoint_workspace_bytes(src);    // src: device pointers
///   llmk::DeviceBuffer<std::uint8_t> ws(ws_bytes), w(llmk::gemm::weight_only_packed_bytes(N, K, 4));
///   llmk::DeviceBuffer<llmk::half> sc((K / G) * N);
///   llmk::DeviceBuffer<std::uint8_t> zeros((K / G) * N);
///   llmk::DeviceBuffer<std::int32_t> perm(K);
///   llmk::gemm::CheckpointImportOutput<llmk::half> dst{w.data(), sc.data(), zeros.data(), perm.data()};
///   llmk::gemm::CheckpointImportInfo info;
///   llmk::Status s = llmk::gemm::import_checkpoint(src, dst, ws.data(), ws_bytes, stream, &info);
///
/// Errors: those of import_checkpoint_host (the contents found by the check kernel included); workspace
/// null or not 4-byte aligned, or workspace_bytes below import_checkpoint_workspace_bytes(src)
/// (invalid_argument naming it); on a GPU build, a host pointer among src's tensors or dst's (naming it); a
/// failed launch or read-back: Status::cuda_error.
template <class T>
Status import_checkpoint(const CheckpointTensors& src, const CheckpointImportOutput<T>& dst, void* workspace,
                         std::size_t workspace_bytes, cudaStream_t stream,
                         CheckpointImportInfo* info = nullptr) {
  LLMK_RETURN_IF_ERROR(detail::validate_checkpoint(src, /*gemm_rules=*/true));
  LLMK_RETURN_IF_ERROR(detail::validate_import_output(src, dst, /*device=*/true));
  const std::size_t need = import_checkpoint_workspace_bytes(src);
  if (workspace == nullptr)
    return Status::invalid_argument(
        "workspace", str_cat("must not be null: needs ", need, " bytes (import_checkpoint_workspace_bytes)"));
  if (detail::ckpt_misaligned(workspace, 4))
    return Status::invalid_argument("workspace", "must be 4-byte aligned");
  if (workspace_bytes < need)
    return Status::invalid_argument(
        "workspace_bytes",
        str_cat("must be >= import_checkpoint_workspace_bytes = ", need, ", got ", workspace_bytes));
  LLMK_RETURN_IF_ERROR(check_device_pointer("qweight", src.qweight));
  LLMK_RETURN_IF_ERROR(check_device_pointer("qzeros", src.qzeros));
  LLMK_RETURN_IF_ERROR(check_device_pointer("scales", src.scales));
  LLMK_RETURN_IF_ERROR(check_device_pointer("g_idx", src.g_idx));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.w", dst.w));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.scales", dst.scales));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.zeros", dst.zeros));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.perm", dst.perm));
  LLMK_RETURN_IF_ERROR(check_device_pointer("workspace", workspace));

  CheckpointTensors s = src;
  s.group_size = detail::ckpt_group_size(src);
  const int groups = s.k / s.group_size;
  auto* base = static_cast<std::uint8_t*>(workspace);
  auto* flags = reinterpret_cast<unsigned*>(base);
  auto* counts = reinterpret_cast<int*>(base + detail::kCkptHeaderBytes);
  std::uint8_t* plain =
      base + detail::kCkptHeaderBytes + round_up<std::size_t>(4 * static_cast<std::size_t>(groups), 16);
  const std::int64_t ld = detail::ckpt_plain_ld(s.k, s.bits);
  const dim3 block(detail::kCkptThreads);

  // 1. Contents check (the scales are always checked), before anything in dst is written.
  unsigned bad = 0;
  {
    LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_clear_kernel<>, detail::ckpt_grid(groups + 1), block, 0,
                                stream, flags, counts, groups));
    const std::int64_t check_items = std::max<std::int64_t>(static_cast<std::int64_t>(groups) * s.n, s.k);
    LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_check_kernel<>, detail::ckpt_grid(check_items), block, 0,
                                stream, s, flags, counts));
    if (s.g_idx != nullptr)
      LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_count_kernel<>, detail::ckpt_grid(groups), block, 0,
                                  stream, counts, groups, s.group_size, flags));
    LLMK_RETURN_IF_ERROR(detail::ckpt_read_word(flags, &bad, stream));
  }
  if (bad & detail::kCkptBadScale) return detail::ckpt_bad_scale(-1, -1);
  if (bad & detail::kCkptBadZero) return detail::ckpt_bad_zero(-1, -1);
  if (bad & detail::kCkptBadGroup)
    return Status::invalid_argument(
        "g_idx", str_cat("entries must be in [0, K / group_size) = [0, ", groups, ") (one is not)"));
  if (bad & detail::kCkptBadCount)
    return Status::invalid_argument(
        "g_idx", str_cat("every group must hold exactly group_size = ", s.group_size,
                         " columns (the act-order permutation's precondition; one group does not)"));
  const bool act_order = (bad & detail::kCkptActOrder) != 0;
  if (act_order && dst.perm == nullptr)
    return Status::invalid_argument("dst.perm", "must not be null: g_idx is not k / group_size (act-order)");

  // 2. Unpack, permutation, repack.
  LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_codes_kernel<>,
                              detail::ckpt_grid(static_cast<std::int64_t>(s.n) * ld), block, 0, stream, s,
                              plain, ld));
  LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_quant_kernel<T>,
                              detail::ckpt_grid(static_cast<std::int64_t>(groups) * s.n), block, 0, stream, s,
                              dst.scales, dst.zeros));
  if (act_order) {
    std::size_t perm_bytes = detail::ckpt_perm_temp_bytes(src) - 12;
    LLMK_RETURN_IF_ERROR(act_order_permutation(detail::ckpt_perm_temp(base, src), &perm_bytes, s.g_idx, s.k,
                                               s.group_size, dst.perm, stream));
  }
  const WeightRepackArgs r{plain, ld, act_order ? dst.perm : nullptr, dst.w, s.n, s.k, s.bits, false};
  LLMK_RETURN_IF_ERROR(weight_only_repack(r, stream));
  if (info != nullptr) *info = {s.qzeros != nullptr, act_order};
  return {};
}

/// The weight half of weight_only_gemm's arguments after an import: w, w_bytes, scales, scales_size, zeros
/// and perm (as `info` says), n, k, group_size (GPTQ's -1 resolved to K) and bits. Set a, lda, d, ldd, m and
/// bias, and pass a workspace of weight_only_workspace_bytes(args) bytes when info.act_order.
///
///   llmk::gemm::WeightOnlyArgs<llmk::half> x = llmk::gemm::checkpoint_gemm_args(src, d_dst, info);
///   x.a = d_act;  x.lda = K;  x.d = d_out;  x.ldd = N;  x.m = M;
///   llmk::Status s =
///       llmk::gemm::weight_only_gemm(x, d_ws, llmk::gemm::weight_only_workspace_bytes(x), stream);
template <class T>
WeightOnlyArgs<T> checkpoint_gemm_args(const CheckpointTensors& src, const CheckpointImportOutput<T>& dst,
                                       const CheckpointImportInfo& info) {
  WeightOnlyArgs<T> x;
  const int g = detail::ckpt_group_size(src);
  const std::int64_t quant = g > 0 ? static_cast<std::int64_t>(src.k / g) * src.n : 0;
  x.w = dst.w;
  x.w_bytes = static_cast<std::int64_t>(weight_only_packed_bytes(src.n, src.k, src.bits));
  x.scales = dst.scales;
  x.scales_size = quant;
  if (info.zeros) {
    x.zeros = dst.zeros;
    x.zeros_size = quant;
  }
  if (info.act_order) {
    x.perm = dst.perm;
    x.perm_size = src.k;
  }
  x.n = src.n;
  x.k = src.k;
  x.group_size = g;
  x.bits = src.bits;
  return x;
}

}  // namespace llmk::gemm

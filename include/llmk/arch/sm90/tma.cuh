// llmk/arch/sm90/tma.cuh: tensor maps and TMA tensor copies (cp.async.bulk.tensor, tile mode, sm_90).
//
//   make_tensor_map(&map, desc)                 host: validates `desc` and encodes the 128-byte map
//                                               (cuTensorMapEncodeTiled on a GPU build; the simulator keeps
//                                               the description itself)
//   tma_load(smem_dst, map, bar, {c0, ...})     cp.async.bulk.tensor.<R>d.shared::cluster.global.mbarrier::
//                                               complete_tx::bytes: the box at coordinates c (elements,
//                                               innermost first, may be negative or past the end) lands in
//                                               shared memory and complete_tx's box-bytes on `bar`
//   tma_store(map, smem_src, {c0, ...})         cp.async.bulk.tensor.<R>d.global.shared::cta.bulk_group: the
//                                               in-bounds part of the box is written (commit/wait with
//                                               bulk_commit_group / bulk_wait_group)
//   tma_prefetch(map)                           prefetch.tensormap
//
// The box lands dense, innermost dimension fastest (element (b0, .., b4) at byte es * (b0 + B0 * (b1 + ..))),
// then the swizzle of the map moves each 16-byte chunk as wgmma's descriptors expect (SmemSwizzle). Elements
// outside the tensor read as zero (TmaOobFill::kZero) or a NaN (kNan, float types; its bits are unspecified).
// The transaction count is always the full box, out-of-bounds elements included.
//
// llmk's rules (make_tensor_map returns a Status naming the field): rank 1..5; global 16-byte aligned; dims
// in [1, 2^32]; strides (bytes, of dims 1..rank-1) multiples of 16 below 2^40 (any value for a dimension of
// extent 1: the map substitutes the dense stride, which is never used); box dims in [1, 256] with the
// inner box a multiple of 16 bytes; with a swizzle the inner box is exactly the swizzle span (32/64/128
// bytes) and the box a multiple of 128 bytes. Shared destinations are 128-byte aligned (the repeat of the
// swizzle, 1024 bytes for 128B, when wgmma reads the tile); stores never start at a negative coordinate.
// A box starts on a 16-byte boundary: innermost coordinate * element bytes is a multiple of 16 (the PTX
// ISA's bounding-box rule; an H100 raises "illegal instruction" otherwise; the simulator reports it).
//
// Usage (a 64 x 64 f16 tile of a row-major M x K matrix, 128B swizzle, into a 1024-byte aligned buffer):
//
//   TensorMapDesc d{TmaElem::kF16, 2, a, {K, M}, {K * 2}, {64, 64}, SmemSwizzle::k128B};
//   TensorMap map;
//   if (Status s = make_tensor_map(&map, d); !s.ok()) return s;
//   llmk::launch(kernel, grid, block, smem, stream, map, ...);   // a `const __grid_constant__ TensorMap`
//   // device: mbarrier_arrive_expect_tx(bar, 64 * 64 * 2); tma_load(tile, map, bar, {k0, m0});
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "llmk/arch/sm90/sm90.cuh"
#include "llmk/core/status.cuh"

#if defined(LLMK_CUDA)
#include <cudaTypedefs.h>
#endif
#if defined(LLMK_SIM)
#include <string>
#include <utility>
#include <vector>
#endif

namespace llmk::arch::sm90 {

/// The element type of a tensor map (TensorMapDesc::elem).
enum class TmaElem : std::uint8_t { kU8, kU16, kF16, kBF16, kU32, kI32, kF32 };
/// What out-of-bounds elements of a box read as (TensorMapDesc::oob; kNan needs a float element type).
enum class TmaOobFill : std::uint8_t { kZero, kNan };

/// Bytes of one element:  tma_elem_bytes(TmaElem::kBF16) == 2.
LLMK_HOST_DEVICE constexpr int tma_elem_bytes(TmaElem e) {
  return e == TmaElem::kU8 ? 1 : (e == TmaElem::kU16 || e == TmaElem::kF16 || e == TmaElem::kBF16) ? 2 : 4;
}

/// What a tensor map describes: a strided tensor in global memory and the box one copy moves (example: the
/// file comment).
struct TensorMapDesc {
  TmaElem elem = TmaElem::kU8;
  int rank = 1;
  const void* global = nullptr;
  std::uint64_t dims[5] = {};     // elements, innermost first
  std::uint64_t strides[4] = {};  // bytes between consecutive indices of dims 1..rank-1
  std::uint32_t box[5] = {};      // elements, innermost first
  SmemSwizzle swizzle = SmemSwizzle::kNone;
  TmaOobFill oob = TmaOobFill::kZero;
};

/// The 128-byte, 64-byte aligned tensor map object (CUtensorMap on a GPU). Pass it to kernels by value as a
/// `const __grid_constant__ TensorMap` parameter (example: the file comment).
struct alignas(64) TensorMap {
  unsigned char opaque[128];
};

namespace detail {
inline constexpr std::uint64_t kSimTensorMapMagic = 0x50414D524F534E45ull;  // "ENSORMAP"
static_assert(sizeof(TensorMapDesc) + 8 <= sizeof(TensorMap),
              "the simulator keeps the description in the map");

inline Status validate_tensor_map(const TensorMap* out, const TensorMapDesc& d) {
  if (out == nullptr) return Status::invalid_argument("map", "must not be null");
  if (d.rank < 1 || d.rank > 5)
    return Status::invalid_argument("desc.rank", str_cat("must be in [1, 5], got ", d.rank));
  if (d.global == nullptr) return Status::invalid_argument("desc.global", "must not be null");
  if (reinterpret_cast<std::uintptr_t>(d.global) % 16 != 0)
    return Status::invalid_argument("desc.global", "must be 16-byte aligned");
  const int es = tma_elem_bytes(d.elem);
  for (int i = 0; i < d.rank; ++i) {
    if (d.dims[i] == 0 || d.dims[i] > (std::uint64_t{1} << 32))
      return Status::invalid_argument("desc.dims",
                                      str_cat("dims[", i, "] must be in [1, 2^32], got ", d.dims[i]));
    if (d.box[i] == 0 || d.box[i] > 256)
      return Status::invalid_argument("desc.box",
                                      str_cat("box[", i, "] must be in [1, 256], got ", d.box[i]));
  }
  for (int i = 0; i + 1 < d.rank; ++i) {
    if (d.strides[i] % 16 != 0 || d.strides[i] >= (std::uint64_t{1} << 40))
      return Status::invalid_argument(
          "desc.strides",
          str_cat("strides[", i, "] must be a multiple of 16 below 2^40, got ", d.strides[i]));
  }
  const std::uint64_t inner = std::uint64_t{d.box[0]} * static_cast<std::uint64_t>(es);
  if (inner % 16 != 0)
    return Status::invalid_argument("desc.box",
                                    str_cat("box[0] * element bytes must be a multiple of 16, got ", inner));
  if (d.swizzle != SmemSwizzle::kNone) {
    std::uint64_t box_bytes = static_cast<std::uint64_t>(es);
    for (int i = 0; i < d.rank; ++i) box_bytes *= d.box[i];
    if (inner != swizzle_span(d.swizzle))
      return Status::invalid_argument("desc.box",
                                      str_cat("with a swizzle, box[0] * element bytes must equal its span (",
                                              swizzle_span(d.swizzle), " bytes), got ", inner));
    if (box_bytes % 128 != 0)
      return Status::invalid_argument(
          "desc.box", str_cat("with a swizzle, the box must be a multiple of 128 bytes, got ", box_bytes));
  }
  if (d.oob == TmaOobFill::kNan &&
      !(d.elem == TmaElem::kF16 || d.elem == TmaElem::kBF16 || d.elem == TmaElem::kF32))
    return Status::invalid_argument("desc.oob", "the NaN fill needs a float element type");
  return {};
}

#if defined(LLMK_SIM)
inline TensorMapDesc sim_read_map(const TensorMap& map, const char* op, std::source_location loc) {
  std::uint64_t magic;
  std::memcpy(&magic, map.opaque, 8);
  if (magic != kSimTensorMapMagic)
    ::llmk::sim::fail(std::string(op) + ": the tensor map was not made by make_tensor_map", loc);
  TensorMapDesc d;
  std::memcpy(&d, map.opaque + 8, sizeof d);
  return d;
}

inline std::uint32_t sim_swizzle(std::uint32_t a, SmemSwizzle s) {
  const std::uint32_t w = swizzle_span(s) / 16;
  return w == 0 ? a : a ^ (((a >> 7) & (w - 1)) << 4);
}

// Calls f(smem byte offset from the tile start, box element index b[5], in bounds?, global address) for every
// element of the box at `coords`; `dst_addr` is the tile's shared address (the swizzle uses absolute bits).
template <class F>
void sim_for_each_box_element(const TensorMapDesc& d, const int* coords, std::uint32_t dst_addr, F&& f) {
  const int es = tma_elem_bytes(d.elem);
  std::uint32_t box[5] = {1, 1, 1, 1, 1};
  for (int i = 0; i < d.rank; ++i) box[i] = d.box[i];
  std::uint64_t linear = 0;
  for (std::uint32_t b4 = 0; b4 < box[4]; ++b4)
    for (std::uint32_t b3 = 0; b3 < box[3]; ++b3)
      for (std::uint32_t b2 = 0; b2 < box[2]; ++b2)
        for (std::uint32_t b1 = 0; b1 < box[1]; ++b1)
          for (std::uint32_t b0 = 0; b0 < box[0]; ++b0, ++linear) {
            const std::uint32_t b[5] = {b0, b1, b2, b3, b4};
            bool in = true;
            const unsigned char* g = static_cast<const unsigned char*>(d.global);
            for (int i = 0; i < d.rank; ++i) {
              const long long gi = static_cast<long long>(coords[i]) + b[i];
              if (gi < 0 || static_cast<std::uint64_t>(gi) >= d.dims[i]) in = false;
              if (in) g += i == 0 ? gi * es : gi * static_cast<long long>(d.strides[i - 1]);
            }
            const std::uint32_t off =
                sim_swizzle(dst_addr + static_cast<std::uint32_t>(linear * es), d.swizzle) - dst_addr;
            f(off, in, in ? g : nullptr);
          }
}

// The box-start rule of the file comment (base and strides are already 16-byte multiples, so only the
// innermost coordinate can break it).
inline void sim_check_box_start(const TensorMapDesc& d, const int* coords, const char* op,
                                std::source_location loc) {
  if ((static_cast<long long>(coords[0]) * tma_elem_bytes(d.elem)) % 16 != 0)
    ::llmk::sim::fail(std::string(op) + ": the box starts at innermost coordinate " +
                          std::to_string(coords[0]) +
                          ", not at a 16-byte boundary (coordinate * element bytes must be a multiple of 16)",
                      loc);
}

inline std::uint32_t sim_box_bytes(const TensorMapDesc& d) {
  std::uint32_t n = static_cast<std::uint32_t>(tma_elem_bytes(d.elem));
  for (int i = 0; i < d.rank; ++i) n *= d.box[i];
  return n;
}

// mask != 0: the multicast form (.multicast::cluster), into the blocks of the cluster whose ranks it sets.
inline void sim_tma_load(void* smem_dst, const TensorMap& map, std::uint64_t* bar, const int* coords,
                         int rank, std::source_location loc, unsigned mask = 0) {
  const char* op = mask != 0 ? "cp.async.bulk.tensor (multicast load)" : "cp.async.bulk.tensor (load)";
  const TensorMapDesc d = sim_read_map(map, op, loc);
  if (rank != d.rank)
    ::llmk::sim::fail(std::string(op) + ": the coordinate count differs from the map's rank", loc);
  sim_check_box_start(d, coords, op, loc);
  const std::uint32_t bytes = sim_box_bytes(d);
  if (!::llmk::sim::is_shared(smem_dst, bytes) || reinterpret_cast<std::uintptr_t>(smem_dst) % 128 != 0)
    ::llmk::sim::fail(
        std::string(op) + ": the destination must be 128-byte aligned and inside the block's arena", loc);
  const std::uint32_t dst_addr = shared_address(smem_dst);
  const int es = tma_elem_bytes(d.elem);
  std::vector<unsigned char> image(bytes);
  sim_for_each_box_element(d, coords, dst_addr, [&](std::uint32_t off, bool in, const unsigned char* g) {
    if (in) {
      std::memcpy(&image[off], g, static_cast<std::size_t>(es));
    } else if (d.oob == TmaOobFill::kNan) {
      const std::uint32_t nan = es == 2 ? 0x7FFFu : 0x7FFFFFFFu;
      std::memcpy(&image[off], &nan, static_cast<std::size_t>(es));
    } else {
      std::memset(&image[off], 0, static_cast<std::size_t>(es));
    }
  });
  if (mask != 0)
    ::llmk::sim::bulk_load_to_shared_multicast(smem_dst, image, bar, mask, op, loc);
  else
    ::llmk::sim::bulk_load_to_shared(smem_dst, std::move(image), bar, op, loc);
}

inline void sim_tma_store(const TensorMap& map, const void* smem_src, const int* coords, int rank,
                          std::source_location loc) {
  constexpr const char* op = "cp.async.bulk.tensor (store)";
  const TensorMapDesc d = sim_read_map(map, op, loc);
  if (rank != d.rank)
    ::llmk::sim::fail(std::string(op) + ": the coordinate count differs from the map's rank", loc);
  for (int i = 0; i < rank; ++i)
    if (coords[i] < 0)
      ::llmk::sim::fail(std::string(op) + ": a store's box must not start at a negative coordinate", loc);
  sim_check_box_start(d, coords, op, loc);
  const std::uint32_t bytes = sim_box_bytes(d);
  if (!::llmk::sim::is_shared(smem_src, bytes) || reinterpret_cast<std::uintptr_t>(smem_src) % 128 != 0)
    ::llmk::sim::fail(std::string(op) + ": the source must be 128-byte aligned and inside the block's arena",
                      loc);
  const auto* src = static_cast<const unsigned char*>(smem_src);
  const std::uint32_t src_addr = shared_address(src);
  const int es = tma_elem_bytes(d.elem);
  std::vector<std::pair<unsigned char*, std::size_t>> runs;
  std::vector<unsigned char> data;
  sim_for_each_box_element(d, coords, src_addr, [&](std::uint32_t off, bool in, const unsigned char* g) {
    if (!in) return;
    runs.emplace_back(const_cast<unsigned char*>(g), static_cast<std::size_t>(es));
    data.insert(data.end(), src + off, src + off + es);
  });
  ::llmk::sim::bulk_store_from_shared(smem_src, bytes, std::move(runs), std::move(data), op, loc);
}
#endif  // LLMK_SIM

}  // namespace detail

namespace detail {
// The stride of a dimension of extent 1 is never used (its only index is 0): a caller may pass any value
// there (a GEMM with M = 1 and any lda), but the driver applies its rules to every stride. Such a stride
// becomes the dense one (the span of the dimensions inside it, rounded up to 16 bytes), which meets them
// whenever the tensor itself spans less than 1 TiB.
inline TensorMapDesc with_dense_unit_strides(TensorMapDesc d) {
  if (d.rank < 2 || d.rank > 5) return d;  // validate_tensor_map names the rank
  const std::uint64_t es = static_cast<std::uint64_t>(tma_elem_bytes(d.elem));
  for (int i = 1; i < d.rank; ++i) {
    if (d.dims[i] != 1) continue;
    const std::uint64_t below = i == 1 ? es : d.strides[i - 2];
    if (below >= (std::uint64_t{1} << 40) || d.dims[i - 1] > (std::uint64_t{1} << 32))
      continue;  // named later
    const std::uint64_t inner = i == 1 ? d.dims[0] * es : d.strides[i - 2] * d.dims[i - 1];
    d.strides[i - 1] = (inner + 15) / 16 * 16;
  }
  return d;
}
}  // namespace detail

namespace detail {
inline bool same_desc(const TensorMapDesc& a, const TensorMapDesc& b) {
  if (a.elem != b.elem || a.rank != b.rank || a.global != b.global || a.swizzle != b.swizzle ||
      a.oob != b.oob)
    return false;
  for (int i = 0; i < 5; ++i)
    if (a.dims[i] != b.dims[i] || a.box[i] != b.box[i] || (i < 4 && a.strides[i] != b.strides[i]))
      return false;
  return true;
}

// The maps encoded before, by description: the Hopper launchers encode the same few maps on every call (the
// same operands, shapes and boxes: one decode step after another), and each cuTensorMapEncodeTiled is host
// time on the critical path. A map depends on its description (and, to be safe, is kept per device), so a
// small direct-mapped cache (kSlots entries, keyed on every field and the device) returns the bytes it
// encoded before.
// Host code, the same in both builds (tests/arch/sm90_tma.cu); make_tensor_map uses it on a GPU build.
class TensorMapCache {
 public:
  static constexpr int kSlots = 64;
  bool find(const TensorMapDesc& d, int device, TensorMap* map) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const Slot& s = slots_[slot_of(d, device)];
    if (!s.used || s.device != device || !same_desc(s.desc, d)) return false;
    *map = s.map;
    return true;
  }
  void insert(const TensorMapDesc& d, int device, const TensorMap& map) {
    const std::lock_guard<std::mutex> lock(mutex_);
    Slot& s = slots_[slot_of(d, device)];  // replaces whatever had this slot
    s.used = true;
    s.device = device;
    s.desc = d;
    s.map = map;
  }

 private:
  struct Slot {
    bool used = false;
    int device = 0;
    TensorMapDesc desc;
    TensorMap map;
  };
  static std::size_t slot_of(const TensorMapDesc& d, int device) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(device);
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 0x100000001B3ull + (h >> 29); };
    mix(static_cast<std::uint64_t>(d.elem) | (static_cast<std::uint64_t>(d.rank) << 8) |
        (static_cast<std::uint64_t>(d.swizzle) << 16) | (static_cast<std::uint64_t>(d.oob) << 24));
    mix(reinterpret_cast<std::uintptr_t>(d.global));
    for (int i = 0; i < 5; ++i) mix(d.dims[i] ^ (static_cast<std::uint64_t>(d.box[i]) << 40));
    for (int i = 0; i < 4; ++i) mix(d.strides[i]);
    return static_cast<std::size_t>(h % kSlots);
  }
  std::mutex mutex_;
  Slot slots_[kSlots];
};

inline TensorMapCache& tensor_map_cache() {
  static TensorMapCache cache;
  return cache;
}
}  // namespace detail

/// Validates `desc` and encodes it into `*map` (host). The stride of a dimension of extent 1 may be any
/// value: it is never used, and the map takes the dense one instead (detail::with_dense_unit_strides). On a
/// GPU build a description encoded before is copied from detail::tensor_map_cache() rather than encoded
/// again. Example: the file comment.
///
/// Errors (Status::invalid_argument naming the field): map null ('map'); desc.rank outside [1, 5];
/// desc.global null or not 16-byte aligned; a dims[i] outside [1, 2^32] ('desc.dims'); a box[i] outside
/// [1, 256] ('desc.box'); a stride of dims 1..rank-1 not a multiple of 16 below 2^40 ('desc.strides'; extent
/// 1 excepted); box[0] * element bytes not a multiple of 16, or, with a swizzle, not equal to its span or a
/// box not a multiple of 128 bytes ('desc.box'); the NaN fill with a non-float element ('desc.oob'). On a GPU
/// build, cuTensorMapEncodeTiled missing or failing: Status::cuda_error; a build that is neither the
/// simulator nor CUDA: Status::unsupported.
inline Status make_tensor_map(TensorMap* map, const TensorMapDesc& caller_desc) {
  const TensorMapDesc desc = detail::with_dense_unit_strides(caller_desc);
  if (Status s = detail::validate_tensor_map(map, desc); !s.ok() || map == nullptr) return s;
#if defined(LLMK_SIM)
  std::memset(map->opaque, 0, sizeof map->opaque);
  std::memcpy(map->opaque, &detail::kSimTensorMapMagic, 8);
  std::memcpy(map->opaque + 8, &desc, sizeof desc);
  return {};
#elif defined(LLMK_CUDA)
  static_assert(sizeof(CUtensorMap) == sizeof(TensorMap), "TensorMap mirrors CUtensorMap");
  int device = 0;
  const bool cacheable = cudaGetDevice(&device) == cudaSuccess;
  if (cacheable && detail::tensor_map_cache().find(desc, device, map)) return {};
  // The driver's entry point, looked up by name once per process (not per map: the Hopper launchers encode
  // several maps per call); a failed lookup is not kept.
  static std::atomic<void*> entry{nullptr};
  void* fn = entry.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        fn == nullptr || q != cudaDriverEntryPointSuccess)
      return Status::cuda_error("cudaGetDriverEntryPointByVersion",
                                "cuTensorMapEncodeTiled is not available");
    entry.store(fn, std::memory_order_relaxed);
  }
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  switch (desc.elem) {
    case TmaElem::kU8:
      type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
      break;
    case TmaElem::kU16:
      type = CU_TENSOR_MAP_DATA_TYPE_UINT16;
      break;
    case TmaElem::kF16:
      type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      break;
    case TmaElem::kBF16:
      type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
      break;
    case TmaElem::kU32:
      type = CU_TENSOR_MAP_DATA_TYPE_UINT32;
      break;
    case TmaElem::kI32:
      type = CU_TENSOR_MAP_DATA_TYPE_INT32;
      break;
    case TmaElem::kF32:
      type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
      break;
  }
  CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_NONE;
  switch (desc.swizzle) {
    case SmemSwizzle::kNone:
      sw = CU_TENSOR_MAP_SWIZZLE_NONE;
      break;
    case SmemSwizzle::k32B:
      sw = CU_TENSOR_MAP_SWIZZLE_32B;
      break;
    case SmemSwizzle::k64B:
      sw = CU_TENSOR_MAP_SWIZZLE_64B;
      break;
    case SmemSwizzle::k128B:
      sw = CU_TENSOR_MAP_SWIZZLE_128B;
      break;
  }
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], elem_strides[5];
  for (int i = 0; i < desc.rank; ++i) dims[i] = desc.dims[i], box[i] = desc.box[i], elem_strides[i] = 1;
  for (int i = 0; i + 1 < desc.rank; ++i) strides[i] = desc.strides[i];
  const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  const CUresult r = encode(reinterpret_cast<CUtensorMap*>(map), type, static_cast<cuuint32_t>(desc.rank),
                            const_cast<void*>(desc.global), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            desc.oob == TmaOobFill::kNan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                                         : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::cuda_error("cuTensorMapEncodeTiled", str_cat("CUresult ", static_cast<int>(r)));
  if (cacheable) detail::tensor_map_cache().insert(desc, device, *map);
  return {};
#else
  (void)map;
  return Status::unsupported("make_tensor_map needs the simulator or a CUDA build");
#endif
}

#if LLMK_SM90_ASM
namespace detail {
template <int R>
LLMK_DEVICE void tma_load_asm(std::uint32_t dst, const TensorMap& map, std::uint32_t bar, const int (&c)[R]) {
  const auto m = reinterpret_cast<std::uint64_t>(&map);
  if constexpr (R == 1)
    asm volatile(
        "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], "
        "[%2];" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0])
        : "memory");
  else if constexpr (R == 2)
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
        "[%2];" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1])
        : "memory");
  else if constexpr (R == 3)
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
        "%5}], [%2];" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2])
        : "memory");
  else if constexpr (R == 4)
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
        "%6}], [%2];" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
        "%6, %7}], [%2];" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
        : "memory");
}
template <int R>
LLMK_DEVICE void tma_store_asm(const TensorMap& map, std::uint32_t src, const int (&c)[R]) {
  const auto m = reinterpret_cast<std::uint64_t>(&map);
  if constexpr (R == 1)
    asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];" ::"l"(m), "r"(src),
                 "r"(c[0])
                 : "memory");
  else if constexpr (R == 2)
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(m),
                 "r"(src), "r"(c[0]), "r"(c[1])
                 : "memory");
  else if constexpr (R == 3)
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(m),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2])
                 : "memory");
  else if constexpr (R == 4)
    asm volatile(
        "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(m),
        "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(m),
        "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
        : "memory");
}
}  // namespace detail
#endif

/// Starts a TMA copy of the box at `coords` (elements, innermost first) into `smem_dst`; it complete_tx's
/// the box bytes on `bar` (example: the file comment).
template <int R>
LLMK_DEVICE void tma_load(void* smem_dst, const TensorMap& map, std::uint64_t* bar,
                          const int (&coords)[R] LLMK_LOC_TAIL) {
  static_assert(R >= 1 && R <= 5, "TMA tensors have rank 1..5");
#if LLMK_SM90_ASM
  detail::tma_load_asm<R>(detail::smem_u32(smem_dst), map, detail::smem_u32(bar), coords);
#elif defined(LLMK_SIM)
  detail::sim_tma_load(smem_dst, map, bar, coords, R, LLMK_LOC_FWD);
#else
  (void)smem_dst, (void)map, (void)bar, (void)coords;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Starts a TMA store of the box at `coords` from `smem_src` into the thread's bulk group (fence_proxy_async
/// the ordinary stores that wrote it first):
///   tma_store(map, tile, {n0, m0}); bulk_commit_group(); bulk_wait_group_read<0>();
template <int R>
LLMK_DEVICE void tma_store(const TensorMap& map, const void* smem_src, const int (&coords)[R] LLMK_LOC_TAIL) {
  static_assert(R >= 1 && R <= 5, "TMA tensors have rank 1..5");
#if LLMK_SM90_ASM
  detail::tma_store_asm<R>(map, detail::smem_u32(smem_src), coords);
#elif defined(LLMK_SIM)
  detail::sim_tma_store(map, smem_src, coords, R, LLMK_LOC_FWD);
#else
  (void)map, (void)smem_src, (void)coords;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Prefetches the tensor map's descriptor:  if (threadIdx.x == 0) tma_prefetch(map);
LLMK_DEVICE void tma_prefetch(const TensorMap& map LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&map)) : "memory");
#elif defined(LLMK_SIM)
  (void)detail::sim_read_map(map, "prefetch.tensormap", LLMK_LOC_FWD);
#else
  (void)map;
  LLMK_SM90_UNAVAILABLE();
#endif
}

}  // namespace llmk::arch::sm90

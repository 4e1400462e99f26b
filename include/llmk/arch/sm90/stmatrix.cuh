// llmk/arch/sm90/stmatrix.cuh: stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 (sm_90), the mirror
// of ldmatrix (llmk/arch/ldmatrix.cuh): every lane of the warp calls it with one row address and its
// registers.
//
//   STSM_x1 / STSM_x2 / STSM_x4 (and _T):  copy(smem_row_addr, r), r a const std::uint32_t[1 / 2 / 4]
//
// Matrix j takes its 8 row addresses from lanes 8j .. 8j+7 (16-byte aligned rows of eight 16-bit elements in
// shared memory). Register j of lane l holds matrix j's fragment:
//   non-trans: low half -> row l/4, column 2(l%4); high half -> row l/4, column 2(l%4)+1
//   .trans   : low half -> row 2(l%4), column l/4; high half -> row 2(l%4)+1, column l/4
// so an accumulator fragment of mma.m16n8 / wgmma (converted to 16-bit pairs) goes to shared memory row-major
// (non-trans) or transposed without shuffles. Like any ordinary store, it needs fence.proxy.async before a
// TMA store or wgmma reads the data.
//
// Usage (a row-major 16 x 16 tile of 16-bit pairs, pitch in elements, rows 16-byte aligned):
//
//   std::uint32_t r[4];   // e.g. llmk::arch::cvt_f32x2_to_f16x2 of accumulator pairs
//   llmk::arch::sm90::STSM_x4::copy(&tile[(lane % 16) * kPitch + (lane / 16) * 8], r);
#pragma once

#include <cstdint>

#include "llmk/arch/sm90/sm90.cuh"

#if defined(LLMK_SIM)
#include <cstring>
#include <sstream>
#include <string>
#endif

namespace llmk::arch::sm90 {

namespace detail {
#if defined(LLMK_SIM)
template <int kNum, bool kTrans>
struct StsmEmulation {
  struct In {
    void* addr;
    std::uint32_t r[4];
  };
  struct Out {
    std::string error;
  };
  static const char* name() {
    if constexpr (kTrans)
      return kNum == 1   ? "stmatrix.m8n8.x1.trans.b16"
             : kNum == 2 ? "stmatrix.m8n8.x2.trans.b16"
                         : "stmatrix.m8n8.x4.trans.b16";
    else
      return kNum == 1 ? "stmatrix.m8n8.x1.b16" : kNum == 2 ? "stmatrix.m8n8.x2.b16" : "stmatrix.m8n8.x4.b16";
  }
  static void compute(const In* const* ins, Out* const* outs) {
    for (int j = 0; j < kNum; ++j)
      for (int r = 0; r < 8; ++r) {
        void* p = ins[8 * j + r]->addr;
        if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0 || !::llmk::sim::is_shared(p, 16)) {
          std::ostringstream os;
          os << name() << ": lane " << 8 * j + r << " gives row " << r << " of matrix " << j << " at " << p
             << ", which is not a 16-byte aligned row inside this block's shared-memory arena";
          for (int l = 0; l < 32; ++l) outs[l]->error = os.str();
          return;
        }
      }
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < kNum; ++j)
        for (int h = 0; h < 2; ++h) {
          const std::uint16_t v = static_cast<std::uint16_t>(ins[l]->r[j] >> (16 * h));
          const int row = kTrans ? 2 * (l % 4) + h : l / 4;
          const int col = kTrans ? l / 4 : 2 * (l % 4) + h;
          std::memcpy(static_cast<unsigned char*>(ins[8 * j + row]->addr) + 2 * col, &v, 2);
        }
  }
  static void run(void* addr, const std::uint32_t* r, std::source_location loc) {
    In in{addr, {0, 0, 0, 0}};
    for (int j = 0; j < kNum; ++j) in.r[j] = r[j];
    const Out out = ::llmk::sim::warp_collective<Out>(name(), 0xFFFFFFFFu, in, &compute, loc);
    if (!out.error.empty()) ::llmk::sim::fail(out.error, loc);
  }
};
#endif
}  // namespace detail

#if LLMK_SM90_ASM
#define LLMK_STSM_ASM(PTX, ...) asm volatile(PTX ::"r"(detail::smem_u32(smem_row)), __VA_ARGS__ : "memory")
#endif

#if LLMK_SM90_ASM
#define LLMK_DEFINE_STSM(NAME, NUM, TRANS, PTX, ...)                                            \
  struct NAME {                                                                                 \
    LLMK_DEVICE static void copy(void* smem_row, const std::uint32_t (&r)[NUM] LLMK_LOC_TAIL) { \
      LLMK_STSM_ASM(PTX, __VA_ARGS__);                                                          \
    }                                                                                           \
  }
#elif defined(LLMK_SIM)
#define LLMK_DEFINE_STSM(NAME, NUM, TRANS, PTX, ...)                                            \
  struct NAME {                                                                                 \
    LLMK_DEVICE static void copy(void* smem_row, const std::uint32_t (&r)[NUM] LLMK_LOC_TAIL) { \
      detail::StsmEmulation<NUM, TRANS>::run(smem_row, r, LLMK_LOC_FWD);                        \
    }                                                                                           \
  }
#else
#define LLMK_DEFINE_STSM(NAME, NUM, TRANS, PTX, ...)                                            \
  struct NAME {                                                                                 \
    LLMK_DEVICE static void copy(void* smem_row, const std::uint32_t (&r)[NUM] LLMK_LOC_TAIL) { \
      (void)smem_row, (void)r;                                                                  \
      LLMK_SM90_UNAVAILABLE();                                                                  \
    }                                                                                           \
  }
#endif

/// stmatrix .x1 / .x2 / .x4 and their .trans forms (_T): copy(smem_row, r) (example: the file comment).
LLMK_DEFINE_STSM(STSM_x1, 1, false, "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n", "r"(r[0]));
LLMK_DEFINE_STSM(STSM_x2, 2, false, "stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n", "r"(r[0]),
                 "r"(r[1]));
LLMK_DEFINE_STSM(STSM_x4, 4, false, "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n",
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
LLMK_DEFINE_STSM(STSM_x1_T, 1, true, "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n",
                 "r"(r[0]));
LLMK_DEFINE_STSM(STSM_x2_T, 2, true, "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n",
                 "r"(r[0]), "r"(r[1]));
LLMK_DEFINE_STSM(STSM_x4_T, 4, true,
                 "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n", "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3]));

}  // namespace llmk::arch::sm90

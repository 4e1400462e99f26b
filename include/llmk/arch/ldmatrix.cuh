// llmk/arch/ldmatrix.cuh: ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 atoms (sm_75+).
//
//   LDSM_x1 / LDSM_x2 / LDSM_x4      load 1 / 2 / 4 8x8 matrices of 16-bit elements from shared memory
//   LDSM_x1_T / LDSM_x2_T / LDSM_x4_T  the same with .trans (each lane gets the fragment of the transpose)
//
//   copy(smem_row_addr, d0[, d1[, d2, d3]])   every lane of the warp calls it (mask 0xffffffff).
//
// Addresses: matrix j takes its 8 row addresses from lanes 8j .. 8j+7; each address is the start of a 16-byte
// row (eight 16-bit elements) in shared memory and must be 16-byte aligned. For .x1 / .x2 the addresses of
// lanes >= 8 * num are ignored (the simulator does not check them either).
// Result: register j holds matrix j's fragment; with row[r][c] the elements of matrix j:
//   non-trans: lane l gets row[l/4][2(l%4)] (low 16 bits) and row[l/4][2(l%4)+1] (high 16 bits);
//   .trans   : lane l gets row[2(l%4)][l/4]  (low 16 bits) and row[2(l%4)+1][l/4] (high 16 bits).
// With lane l addressing row l%16, 16-byte chunk l/16 of a row-major 16x16 tile, LDSM_x4 yields exactly the
// four A registers of MMA_16x8x16; with lane l addressing row l%16 of a row-major 16(k) x 8(n) tile,
// LDSM_x2_T yields the two B registers.
//
// Simulator: the rows are read when the last lane arrives (all lanes have synchronised, as on the GPU);
// a used address that is misaligned or outside the block's shared-memory arena fails the launch, naming the
// lane and its source line. The device asm carries no "memory" clobber (like CUTLASS): shared-memory writes
// that feed an ldmatrix must be separated from it by a barrier (__syncthreads / __syncwarp), which the
// cross-lane visibility needs anyway.
//
// Usage (the A registers of MMA_16x8x16 from a row-major 16 x 16 tile, the B registers from a row-major
// 16(k) x 8(n) tile; pitches in elements, rows 16-byte aligned):
//
//   std::uint32_t a[4], b[2];
//   llmk::arch::LDSM_x4::copy(&a_tile[(lane % 16) * kPitch + (lane / 16) * 8], a[0], a[1], a[2], a[3]);
//   llmk::arch::LDSM_x2_T::copy(&b_tile[(lane % 16) * kPitch], b[0], b[1]);
#pragma once

#include "llmk/config.cuh"

#include <cstdint>

#if defined(LLMK_SIM)
#include <cstring>
#include <sstream>
#include <string>
#include "llmk/sim/runtime.hpp"
#endif

namespace llmk::arch {

namespace detail {

#if LLMK_DEVICE_PASS
LLMK_DEVICE std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
#endif

#if defined(LLMK_SIM)
template <int kNum, bool kTrans>
struct LdsmEmulation {
  struct In {
    const void* addr;
    std::source_location loc;
  };
  struct Out {
    std::uint32_t d[4];
    std::string error;  // set for every lane when a used address is bad; reported after the rendezvous
    std::source_location error_loc;
  };

  static const char* name() {
    if constexpr (kTrans)
      return kNum == 1   ? "ldmatrix.m8n8.x1.trans.b16"
             : kNum == 2 ? "ldmatrix.m8n8.x2.trans.b16"
                         : "ldmatrix.m8n8.x4.trans.b16";
    else
      return kNum == 1 ? "ldmatrix.m8n8.x1.b16" : kNum == 2 ? "ldmatrix.m8n8.x2.b16" : "ldmatrix.m8n8.x4.b16";
  }

  // Failing inside the rendezvous would abandon the other lanes mid-collective, so an address error is handed
  // to every lane and reported by the first one to resume (naming the offending lane's source location).
  static void compute(const In* const* ins, Out* const* outs) {
    auto report = [&](const std::string& msg, std::source_location loc) {
      for (int l = 0; l < 32; ++l) {
        outs[l]->error = msg;
        outs[l]->error_loc = loc;
      }
    };
    std::uint16_t rows[kNum][8][8];
    for (int j = 0; j < kNum; ++j) {
      for (int r = 0; r < 8; ++r) {
        const int lane = 8 * j + r;
        const void* p = ins[lane]->addr;
        if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) {
          std::ostringstream os;
          os << name() << ": lane " << lane << " gives row " << r << " of matrix " << j << " at address " << p
             << ", which is not 16-byte aligned";
          report(os.str(), ins[lane]->loc);
          return;
        }
        if (!::llmk::sim::is_shared(p, 16)) {
          std::ostringstream os;
          os << name() << ": lane " << lane << " gives row " << r << " of matrix " << j << " at address " << p
             << ", and [address, address + 16) is not inside this block's shared-memory arena";
          report(os.str(), ins[lane]->loc);
          return;
        }
        std::memcpy(rows[j][r], p, 16);
      }
    }
    for (int l = 0; l < 32; ++l) {
      for (int j = 0; j < 4; ++j) outs[l]->d[j] = 0;
      for (int j = 0; j < kNum; ++j) {
        std::uint32_t lo, hi;
        if constexpr (kTrans) {
          lo = rows[j][2 * (l % 4)][l / 4];
          hi = rows[j][2 * (l % 4) + 1][l / 4];
        } else {
          lo = rows[j][l / 4][2 * (l % 4)];
          hi = rows[j][l / 4][2 * (l % 4) + 1];
        }
        outs[l]->d[j] = lo | (hi << 16);
      }
    }
  }

  static void run(const void* addr, std::uint32_t* d, std::source_location loc) {
    const Out out = ::llmk::sim::warp_collective<Out>(name(), 0xFFFFFFFFu, In{addr, loc}, &compute, loc);
    if (!out.error.empty()) ::llmk::sim::fail(out.error, out.error_loc);
    for (int j = 0; j < kNum; ++j) d[j] = out.d[j];
  }
};
#endif

}  // namespace detail

#if LLMK_DEVICE_PASS
#define LLMK_ARCH_LDSM_BODY(NUM, TRANS, ...) __VA_ARGS__
#elif defined(LLMK_SIM)
#define LLMK_ARCH_LDSM_BODY(NUM, TRANS, ...) \
  ::llmk::arch::detail::LdsmEmulation<NUM, TRANS>::run(smem_row_addr, d, LLMK_LOC_FWD)
#elif defined(LLMK_HOST_ONLY)
#define LLMK_ARCH_LDSM_BODY(NUM, TRANS, ...) __builtin_trap()
#else
#define LLMK_ARCH_LDSM_BODY(NUM, TRANS, ...) (void)0
#endif

/// ldmatrix .x1: one 8x8 matrix, d0 its fragment (example: the file comment).
struct LDSM_x1 {
  LLMK_DEVICE static void copy(const void* smem_row_addr, std::uint32_t& d0 LLMK_LOC_TAIL) {
    [[maybe_unused]] std::uint32_t* d = &d0;
    LLMK_ARCH_LDSM_BODY(1, false,
                        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                                     : "=r"(d0)
                                     : "r"(detail::smem_u32(smem_row_addr))));
  }
};

/// ldmatrix .x2: two 8x8 matrices, d0 / d1 their fragments (example: the file comment).
struct LDSM_x2 {
  LLMK_DEVICE static void copy(const void* smem_row_addr, std::uint32_t& d0,
                               std::uint32_t& d1 LLMK_LOC_TAIL) {
    [[maybe_unused]] std::uint32_t tmp[2];
    [[maybe_unused]] std::uint32_t* d = tmp;
    LLMK_ARCH_LDSM_BODY(2, false,
                        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                                     : "=r"(tmp[0]), "=r"(tmp[1])
                                     : "r"(detail::smem_u32(smem_row_addr))));
    d0 = tmp[0];
    d1 = tmp[1];
  }
};

/// ldmatrix .x4: four 8x8 matrices, e.g. an mma A operand (example: the file comment).
struct LDSM_x4 {
  LLMK_DEVICE static void copy(const void* smem_row_addr, std::uint32_t& d0, std::uint32_t& d1,
                               std::uint32_t& d2, std::uint32_t& d3 LLMK_LOC_TAIL) {
    [[maybe_unused]] std::uint32_t tmp[4];
    [[maybe_unused]] std::uint32_t* d = tmp;
    LLMK_ARCH_LDSM_BODY(4, false,
                        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                     : "=r"(tmp[0]), "=r"(tmp[1]), "=r"(tmp[2]), "=r"(tmp[3])
                                     : "r"(detail::smem_u32(smem_row_addr))));
    d0 = tmp[0];
    d1 = tmp[1];
    d2 = tmp[2];
    d3 = tmp[3];
  }
};

/// ldmatrix .x1.trans: LDSM_x1 with each lane getting the fragment of the transpose.
struct LDSM_x1_T {
  LLMK_DEVICE static void copy(const void* smem_row_addr, std::uint32_t& d0 LLMK_LOC_TAIL) {
    [[maybe_unused]] std::uint32_t* d = &d0;
    LLMK_ARCH_LDSM_BODY(1, true,
                        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                                     : "=r"(d0)
                                     : "r"(detail::smem_u32(smem_row_addr))));
  }
};

/// ldmatrix .x2.trans, e.g. an mma B operand from a row-major k x n tile (example: the file comment).
struct LDSM_x2_T {
  LLMK_DEVICE static void copy(const void* smem_row_addr, std::uint32_t& d0,
                               std::uint32_t& d1 LLMK_LOC_TAIL) {
    [[maybe_unused]] std::uint32_t tmp[2];
    [[maybe_unused]] std::uint32_t* d = tmp;
    LLMK_ARCH_LDSM_BODY(2, true,
                        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                                     : "=r"(tmp[0]), "=r"(tmp[1])
                                     : "r"(detail::smem_u32(smem_row_addr))));
    d0 = tmp[0];
    d1 = tmp[1];
  }
};

/// ldmatrix .x4.trans: LDSM_x4 with each lane getting the fragment of the transpose.
struct LDSM_x4_T {
  LLMK_DEVICE static void copy(const void* smem_row_addr, std::uint32_t& d0, std::uint32_t& d1,
                               std::uint32_t& d2, std::uint32_t& d3 LLMK_LOC_TAIL) {
    [[maybe_unused]] std::uint32_t tmp[4];
    [[maybe_unused]] std::uint32_t* d = tmp;
    LLMK_ARCH_LDSM_BODY(4, true,
                        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                     : "=r"(tmp[0]), "=r"(tmp[1]), "=r"(tmp[2]), "=r"(tmp[3])
                                     : "r"(detail::smem_u32(smem_row_addr))));
    d0 = tmp[0];
    d1 = tmp[1];
    d2 = tmp[2];
    d3 = tmp[3];
  }
};

#undef LLMK_ARCH_LDSM_BODY

}  // namespace llmk::arch

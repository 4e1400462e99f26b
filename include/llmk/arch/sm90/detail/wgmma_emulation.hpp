// llmk/arch/sm90/detail/wgmma_emulation.hpp: the simulator's wgmma (included by llmk/arch/sm90/wgmma.cuh in
// LLMK_SIM builds). Operand addressing follows the PTX ISA "Shared Memory Matrix Layout" / "Matrix Descriptor
// Format" sections and the register fragments of "Register Fragments" for wgmma (docs/hopper.md has the
// formulas with their sources); arithmetic is exact then rounded once, as the mma.sync emulation
// (llmk/arch/mma.cuh).
//
// Asynchrony: at issue the accumulators are computed and the thread's registers are poisoned (NaN / -1); the
// values land at the wgmma.wait_group that covers the wgmma's group, so reading accumulators early reads
// poison. A wgmma chained on accumulators that a previous, not yet waited wgmma of the same thread writes
// takes that wgmma's result as its input (in-flight wgmmas on the same accumulators are ordered, as on the
// GPU).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "llmk/arch/detail/exact.hpp"
#include "llmk/arch/mma.cuh"
#include "llmk/sim/runtime.hpp"

namespace llmk::arch::sm90::detail {

using ::llmk::arch::detail::Elem;

/// The fields of a shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format").
struct SmemDescFields {
  std::uint32_t start = 0;  // shared-window byte address
  std::uint32_t lbo = 0;    // leading-dimension byte offset
  std::uint32_t sbo = 0;    // stride-dimension byte offset
  std::uint32_t base_offset = 0;
  std::uint32_t swizzle = 0;  // 0 none, 1 128B, 2 64B, 3 32B
};

inline SmemDescFields decode_smem_desc(std::uint64_t d) {
  SmemDescFields f;
  f.start = static_cast<std::uint32_t>(d & 0x3FFFu) << 4;
  f.lbo = static_cast<std::uint32_t>((d >> 16) & 0x3FFFu) << 4;
  f.sbo = static_cast<std::uint32_t>((d >> 32) & 0x3FFFu) << 4;
  f.base_offset = static_cast<std::uint32_t>((d >> 49) & 0x7u);
  f.swizzle = static_cast<std::uint32_t>(d >> 62);
  return f;
}

/// 16-byte chunks per swizzle row: 8 (128B), 4 (64B), 2 (32B); 0 without swizzle.
inline std::uint32_t swizzle_chunks(std::uint32_t mode) {
  return mode == 1 ? 8u : mode == 2 ? 4u : mode == 3 ? 2u : 0u;
}

/// The swizzle applied to an absolute shared address: 16-byte chunk bits [4, 4 + log2 W) ^= bits [7, 7 + log2
/// W).
inline std::uint32_t swizzle_address(std::uint32_t a, std::uint32_t w) {
  return w == 0 ? a : a ^ (((a >> 7) & (w - 1)) << 4);
}

/// Byte address of element (r, k) of an operand described by `f`: r indexes M (A) or N (B), k indexes K.
/// `k_major` = no transpose; `es` = element bytes.
inline std::uint32_t operand_address(const SmemDescFields& f, bool k_major, int es, int r, int k) {
  const std::uint32_t w = swizzle_chunks(f.swizzle);
  const auto ur = static_cast<std::uint32_t>(r), uk = static_cast<std::uint32_t>(k);
  if (k_major) {
    const std::uint32_t kb = uk * static_cast<std::uint32_t>(es), c = kb >> 4, o = kb & 15u;
    if (w == 0) return f.start + (ur >> 3) * f.sbo + (ur & 7u) * 16u + c * f.lbo + o;
    return swizzle_address(f.start + (ur >> 3) * f.sbo + (ur & 7u) * (16u * w) + c * 16u + o, w);
  }
  // MN-major (16-bit types only): 8 elements of MN per 16 bytes.
  if (w == 0) return f.start + (ur >> 3) * f.sbo + (ur & 7u) * 2u + (uk & 7u) * 16u + (uk >> 3) * f.lbo;
  return swizzle_address(
      f.start + (ur % (8u * w)) * 2u + (ur / (8u * w)) * f.lbo + (uk & 7u) * (16u * w) + (uk >> 3) * f.sbo,
      w);
}

struct WgmmaShape {
  int n = 0;
  int k = 0;
  Elem ea{}, eb{};
  bool int_acc = false;
  bool satfinite = false;
  bool a_regs = false;  // RS form
  bool a_k_major = true, b_k_major = true;
  int scale_a = 1, scale_b = 1;
};

struct WgmmaIn {
  std::array<std::uint32_t, 128> c{};  // accumulator input (bits), N/2 used
  std::uint32_t a[4] = {};
  std::uint64_t desc_a = 0, desc_b = 0;
  bool scale_d = true;
};
struct WgmmaOut {
  std::array<std::uint32_t, 128> d{};
  std::shared_ptr<const ::llmk::sim::detail::OperandSnapshot> operands;
};

inline int elem_bytes(Elem e) {
  return ::llmk::arch::detail::elem_bits(e) / 8;
}

// Reads one element's code from shared memory for the async proxy: inside the arena, and unchanged by
// ordinary stores since the last fence.proxy.async.
inline std::uint32_t read_operand(const char* op, const SmemDescFields& f, std::uint32_t addr, int es,
                                  std::source_location loc, ::llmk::sim::detail::OperandSnapshot& snap) {
  if (f.base_offset != 0)
    ::llmk::sim::fail(std::string(op) +
                          ": descriptor base_offset must be 0 (swizzled tiles aligned to their "
                          "repeat: 1024/512/256 bytes for 128B/64B/32B)",
                      loc);
  const unsigned char* base = ::llmk::sim::dynamic_shared_base();
  if (addr + static_cast<std::uint32_t>(es) > ::llmk::sim::dynamic_shared_size()) {
    std::ostringstream os;
    os << op << ": an operand element at shared address 0x" << std::hex << addr << std::dec
       << " lies outside the block's shared memory (" << ::llmk::sim::dynamic_shared_size() << " bytes)";
    ::llmk::sim::fail(os.str(), loc);
  }
  ::llmk::sim::async_proxy_read(base + addr, static_cast<std::size_t>(es), op, loc);
  std::uint32_t v = 0;
  std::memcpy(&v, base + addr, static_cast<std::size_t>(es));
  for (int i = 0; i < es; ++i) {
    snap.offsets.push_back(addr + static_cast<std::uint32_t>(i));
    snap.bytes.push_back(base[addr + static_cast<std::uint32_t>(i)]);
  }
  return v;
}

inline ::llmk::arch::detail::FpParts scaled(::llmk::arch::detail::FpParts p, int scale) {
  if (scale < 0) p.neg = !p.neg;
  return p;
}

// The warpgroup's computation: D (64 x N) for all 128 threads.
inline void wgmma_compute(const WgmmaShape& s, const char* op, std::source_location loc,
                          const WgmmaIn* const* ins, WgmmaOut* const* outs) {
  const int K = s.k, N = s.n;
  const int esa = elem_bytes(s.ea), esb = elem_bytes(s.eb);
  std::uint32_t A[64][32];
  std::uint32_t B[256][32];
  const WgmmaIn& in0 = *ins[0];
  auto snap = std::make_shared<::llmk::sim::detail::OperandSnapshot>();
  for (int i = 1; i < 128; ++i)
    if (ins[i]->desc_b != in0.desc_b || (!s.a_regs && ins[i]->desc_a != in0.desc_a) ||
        ins[i]->scale_d != in0.scale_d)
      ::llmk::sim::fail(std::string(op) +
                            ": the descriptors and scale-d must be the same in every thread of the "
                            "warpgroup",
                        loc);
  if (s.a_regs) {
    // Warp w holds rows 16w..16w+15 in the mma.m16n8k16 / m16n8k32 A-fragment layout.
    const int per_reg = 4 / esa;
    for (int tid = 0; tid < 128; ++tid) {
      const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
      for (int reg = 0; reg < 4; ++reg)
        for (int e = 0; e < per_reg; ++e) {
          const int row = 16 * w + g + 8 * (reg & 1);
          const int k = t * per_reg + e + (reg >> 1) * (K / 2);
          A[row][k] = (ins[tid]->a[reg] >> (8 * esa * e)) & (esa == 2 ? 0xFFFFu : 0xFFu);
        }
    }
  } else {
    const SmemDescFields fa = decode_smem_desc(in0.desc_a);
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < K; ++k)
        A[m][k] = read_operand(op, fa, operand_address(fa, s.a_k_major, esa, m, k), esa, loc, *snap);
  }
  const SmemDescFields fb = decode_smem_desc(in0.desc_b);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      B[n][k] = read_operand(op, fb, operand_address(fb, s.b_k_major, esb, n, k), esb, loc, *snap);

  // Float operands decoded (and negated) once each, not once per product.
  std::vector<::llmk::arch::detail::FpParts> da, db;
  if (!s.int_acc) {
    da.resize(static_cast<std::size_t>(64 * K));
    db.resize(static_cast<std::size_t>(N * K));
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < K; ++k)
        da[static_cast<std::size_t>(m * K + k)] =
            scaled(::llmk::arch::detail::decode_float(A[m][k], s.ea), s.scale_a);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k)
        db[static_cast<std::size_t>(n * K + k)] =
            scaled(::llmk::arch::detail::decode_float(B[n][k], s.eb), s.scale_b);
  }
  for (int tid = 0; tid < 128; ++tid) {
    const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const WgmmaIn& in = *ins[tid];
    for (int j = 0; j < N / 2; ++j) {
      const int row = 16 * w + g + 8 * ((j >> 1) & 1);
      const int col = 8 * (j >> 2) + 2 * t + (j & 1);
      std::uint32_t bits;
      if (s.int_acc) {
        std::int64_t acc = in.scale_d ? static_cast<std::int32_t>(in.c[static_cast<std::size_t>(j)]) : 0;
        for (int k = 0; k < K; ++k)
          acc += ::llmk::arch::detail::decode_int(A[row][k], s.ea) *
                 ::llmk::arch::detail::decode_int(B[col][k], s.eb);
        if (s.satfinite) acc = std::clamp<std::int64_t>(acc, INT32_MIN, INT32_MAX);
        bits = static_cast<std::uint32_t>(static_cast<std::uint64_t>(acc));
      } else {
        ::llmk::arch::detail::ExactSum sum;
        if (in.scale_d) {
          float c;
          std::memcpy(&c, &in.c[static_cast<std::size_t>(j)], 4);
          sum.add_float(c);
        }
        sum.add_dot(&da[static_cast<std::size_t>(row * K)], &db[static_cast<std::size_t>(col * K)], K);
        const float r = sum.round_to_float();
        std::memcpy(&bits, &r, 4);
      }
      outs[tid]->d[static_cast<std::size_t>(j)] = bits;
    }
    outs[tid]->operands = snap;
  }
}

// The accumulator input of a wgmma of the calling thread: the registers, or the newest in-flight result for
// them.
inline void current_accumulators(void* regs, int nregs, std::array<std::uint32_t, 128>& c) {
  auto& t = ::llmk::sim::detail::current_thread();
  std::memcpy(c.data(), regs, static_cast<std::size_t>(nregs) * 4);
  const ::llmk::sim::detail::PendingAccumulators* newest = nullptr;
  for (const auto& g : t.acc_groups)
    for (const auto& p : g)
      if (p.regs == regs) newest = &p;
  for (const auto& p : t.acc_uncommitted)
    if (p.regs == regs) newest = &p;
  if (newest != nullptr) std::memcpy(c.data(), newest->values.data(), static_cast<std::size_t>(nregs) * 4);
}

/// Issues one wgmma for the calling thread: `regs` are its N/2 accumulator registers, `a` its A fragment
/// (RS).
inline void wgmma_issue(const WgmmaShape& s, const char* op, void* regs, const std::uint32_t* a,
                        std::uint64_t desc_a, std::uint64_t desc_b, bool scale_d, std::source_location loc) {
  auto& t = ::llmk::sim::detail::current_thread();
  if (!t.wgmma_fenced)
    ::llmk::sim::fail(std::string(op) +
                          ": no wgmma.fence since this thread last touched wgmma registers (a "
                          "wgmma.fence must precede the first wgmma and follow every wgmma.wait_group "
                          "before the next wgmma)",
                      loc);
  const int nregs = s.n / 2;
  WgmmaIn in;
  current_accumulators(regs, nregs, in.c);
  if (a != nullptr)
    for (int i = 0; i < 4; ++i) in.a[i] = a[i];
  in.desc_a = desc_a;
  in.desc_b = desc_b;
  in.scale_d = scale_d;
  const WgmmaOut out = ::llmk::sim::warpgroup_collective<WgmmaOut>(
      op, in, [&](const WgmmaIn* const* ins, WgmmaOut* const* outs) { wgmma_compute(s, op, loc, ins, outs); },
      loc);
  ::llmk::sim::detail::PendingAccumulators p;
  p.regs = regs;
  p.values.assign(out.d.begin(), out.d.begin() + nregs);
  p.operands = out.operands;
  p.loc = loc;
  t.acc_uncommitted.push_back(std::move(p));
  std::memset(regs, 0xFF, static_cast<std::size_t>(nregs) * 4);  // poison until wgmma.wait_group
}

inline void wgmma_fence_emulate() {
  ::llmk::sim::detail::current_thread().wgmma_fenced = true;
}

inline void wgmma_commit_emulate() {
  auto& t = ::llmk::sim::detail::current_thread();
  t.acc_groups.push_back(std::move(t.acc_uncommitted));
  t.acc_uncommitted.clear();
}

// Index of the first operand byte of `snap` that shared memory no longer holds, or its size.
LLMK_SIM_BOOKKEEPING std::size_t changed_operand(const ::llmk::sim::detail::OperandSnapshot& snap) {
  const unsigned char* base = ::llmk::sim::dynamic_shared_base();
  for (std::size_t i = 0; i < snap.bytes.size(); ++i)
    if (base[snap.offsets[i]] != snap.bytes[i]) return i;
  return snap.bytes.size();
}

inline void wgmma_wait_emulate(int n, std::source_location loc) {
  using ::llmk::sim::detail::Thread;
  auto& t = ::llmk::sim::detail::current_thread();
  // The GPU may read a wgmma's shared operands until this wait: let other threads run first (a slot freed too
  // early gets refilled now), then check that the operands are still there.
  ::llmk::sim::detail::yield_without_sync(t);
  const std::size_t keep = static_cast<std::size_t>(n);
  // .sync.aligned: the lanes of a warp leave the wait together, so every lane's operands are checked before
  // any lane goes on (and, say, lane 0 frees the ring slot).
  struct Out {
    std::string error;
  };
  const Out out = ::llmk::sim::warp_collective<Out>(
      "wgmma.wait_group", 0xFFFFFFFFu, &t,
      [keep](Thread* const* const* ins, Out* const* outs) {
        std::string error;
        // The 128 threads of a wgmma share its snapshot: check each one once, not once per lane.
        std::vector<const ::llmk::sim::detail::OperandSnapshot*> checked;
        for (int l = 0; l < 32 && error.empty(); ++l) {
          const Thread& o = **ins[l];
          for (std::size_t g = 0; g + keep < o.acc_groups.size() && error.empty(); ++g)
            for (const auto& p : o.acc_groups[g]) {
              if (!p.operands) continue;
              if (std::find(checked.begin(), checked.end(), p.operands.get()) != checked.end()) continue;
              checked.push_back(p.operands.get());
              const std::size_t i = changed_operand(*p.operands);
              if (i == p.operands->bytes.size()) continue;
              std::ostringstream os;
              os << "wgmma.wait_group: shared memory at offset 0x" << std::hex << p.operands->offsets[i]
                 << std::dec << " that the wgmma issued at " << ::llmk::sim::detail::format_loc(p.loc)
                 << " reads changed before this wait: the GPU may still be reading it (a ring slot freed or "
                    "overwritten before the wgmma.wait_group that covers its wgmmas)";
              error = os.str();
              break;
            }
        }
        for (int l = 0; l < 32; ++l) outs[l]->error = error;
      },
      loc);
  if (!out.error.empty()) ::llmk::sim::fail(out.error, loc);
  while (t.acc_groups.size() > keep) {
    for (const auto& p : t.acc_groups.front()) std::memcpy(p.regs, p.values.data(), p.values.size() * 4);
    t.acc_groups.erase(t.acc_groups.begin());
  }
  t.wgmma_fenced = false;  // registers may be touched now: the next wgmma needs a fence
}

}  // namespace llmk::arch::sm90::detail

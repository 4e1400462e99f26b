// llmk/attention/online_softmax.cuh: the online-softmax state, the building block of every attention kernel.
//
// A softmax row is consumed in tiles of scores. The state after some tiles is (m, l, o):
//   m = running max of the scores seen,  l = sum exp(s - m),  o = sum exp(s - m) * v   (unnormalized).
// A new tile with max m' >= m rescales the old terms by exp(m - m') (the update); two states over disjoint
// key sets combine the same way (the merge, what split-KV decode needs). At the end out = o / l and the
// log-sum-exp is m + log(l).
//
// Base 2: kernels multiply scores by log2(e) once (folded into the softmax scale) and use exp2, one MUFU
// instruction. So m here is in log2 units; lse() returns the NATURAL log-sum-exp of the unscaled-by-log2e
// scores (what FlashAttention and FlashInfer report); lse_to_base2()/lse_from_base2() convert.
//
// Special values: a state that has seen nothing (or only masked scores, -inf) has m = -inf and l = 0; every
// rescale factor from it is 0 and its lse is -inf. NaN scores propagate: the running max keeps a NaN, so the
// row's l, o and lse become NaN (a plain fmaxf would drop it and silently return a finite row).
#pragma once

#include <cmath>

#include "llmk/arch/fast_math.cuh"
#include "llmk/arch/minmax.cuh"
#include "llmk/config.cuh"

namespace llmk::attention {

/// log2(e) and ln(2), as llmk::kLog2e / llmk::kLn2 (core/math.cuh):  float x2 = score * scale * kLog2e;
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

/// max(a, b) that returns NaN when either is NaN (-0 < +0): the max.NaN.f32 atom, one instruction.
///   m_new = llmk::attention::max_propagate_nan(m, tile_max);
LLMK_HOST_DEVICE float max_propagate_nan(float a, float b) {
  return arch::max_nan(a, b);
}

/// 2^(x - m) for a running max m that may be -inf (nothing seen yet): then the shift is 0, so a masked
/// x = -inf gives exactly 0 instead of NaN from (-inf) - (-inf).
///   float p = llmk::attention::exp2_shifted(s, m);   // 0 for s = m = -inf
LLMK_HOST_DEVICE float exp2_shifted(float x, float m) {
  return arch::ex2_approx(x - (m == -INFINITY ? 0.0f : m));
}

/// Natural log-sum-exp from a base-2 state (m in log2 units, l the sum of 2^(x - m)); -inf when l is 0.
///   lse[row] = llmk::attention::lse_from_state(m, l);
LLMK_HOST_DEVICE float lse_from_state(float m, float l) {
  if (l == 0.0f) return -INFINITY;
  return (m + ::log2f(l)) * kLn2;
}
/// Natural log-sum-exp -> the same quantity in log2 units (for users of base-2 kernels):
///   float lse2 = llmk::attention::lse_to_base2(lse);
LLMK_HOST_DEVICE float lse_to_base2(float lse) {
  return lse * kLog2e;
}
/// Inverse of lse_to_base2:  float lse = llmk::attention::lse_from_base2(lse2);
LLMK_HOST_DEVICE float lse_from_base2(float lse2) {
  return lse2 * kLn2;
}

/// The state of one softmax row, scores in log2 units. Usable on host and device.
///
///   llmk::attention::SoftmaxState st;          // m = -inf, l = 0, o = 0
///   for (int j = 0; j < n; ++j) {               // o holds the unnormalized output
///     float old_scale, p;
///     st.add(score[j] * scale * kLog2e, old_scale, p);
///     o = o * old_scale + p * v[j];
///   }
///   out = o / st.l;  lse = st.lse();
struct SoftmaxState {
  float m = -INFINITY;
  float l = 0.0f;

  /// Adds one score x: old terms (l and the caller's o) are multiplied by old_scale, the new one has weight
  /// p.
  LLMK_HOST_DEVICE void add(float x, float& old_scale, float& p) {
    const float m_new = max_propagate_nan(m, x);
    old_scale = exp2_shifted(m, m_new);
    p = exp2_shifted(x, m_new);
    l = l * old_scale + p;
    m = m_new;
  }
  /// Rescales to a new running max m_new >= m (a tile's max); returns the factor for the caller's o.
  LLMK_HOST_DEVICE float rescale_to(float m_new) {
    const float f = exp2_shifted(m, m_new);
    l *= f;
    m = m_new;
    return f;
  }
  /// Natural log-sum-exp of the scores added (-inf when none).
  LLMK_HOST_DEVICE float lse() const { return lse_from_state(m, l); }
};

/// Merges state b into a. The caller combines outputs as o = o_a * scale_a + o_b * scale_b (unnormalized
/// outputs; for normalized outputs use merge_normalized).
///   float sa, sb;
///   llmk::attention::merge(a, b, sa, sb);   // a now covers both key sets
///   for (int d = 0; d < D; ++d) o_a[d] = o_a[d] * sa + o_b[d] * sb;
LLMK_HOST_DEVICE void merge(SoftmaxState& a, const SoftmaxState& b, float& scale_a, float& scale_b) {
  const float m = max_propagate_nan(a.m, b.m);
  scale_a = exp2_shifted(a.m, m);
  scale_b = exp2_shifted(b.m, m);
  a.l = a.l * scale_a + b.l * scale_b;
  a.m = m;
}

/// Weights of two NORMALIZED partial outputs with base-2 log-sum-exps lse2_a, lse2_b (what split kernels
/// store): out = w_a * out_a + w_b * out_b, and the merged base-2 lse. -inf parts get weight 0; if both are
/// -inf the weights are 0 and the lse stays -inf.
///   float wa, wb;
///   float lse2 = llmk::attention::merge_normalized(lse2_a, lse2_b, wa, wb);
///   for (int d = 0; d < D; ++d) out[d] = wa * out_a[d] + wb * out_b[d];
LLMK_HOST_DEVICE float merge_normalized(float lse2_a, float lse2_b, float& w_a, float& w_b) {
  const float m = max_propagate_nan(lse2_a, lse2_b);
  const float ea = exp2_shifted(lse2_a, m), eb = exp2_shifted(lse2_b, m);
  const float sum = ea + eb;
  if (sum == 0.0f) {
    w_a = w_b = 0.0f;
    return -INFINITY;
  }
  w_a = ea / sum;
  w_b = eb / sum;
  return m + ::log2f(sum);
}

/// The rows one thread holds in the mma.m16n8 accumulator layout: rows g and g + 8 of kMmaM 16-row tiles
/// (g = lane / 4), each shared by the 4 lanes of a quad. Scores arrive as s[kMmaM][kN8][4] in units of
/// `c` (the score in log2 units is s * c, c > 0; masked entries -inf); the output accumulator is
/// o[kMmaM][kD8][4]. m is kept in log2 units. Taking c here rather than scaling the scores first folds the
/// scale into the exponent: p = 2^(s c - m) is one FFMA and one MUFU per score.
///   llmk::attention::FragmentSoftmax<kMmaM> sm;
///   sm.init();
///   for (each key tile) { /* s = Q K^T */ sm.update(s, o, scale * kLog2e); /* o += P V, P in s */ }
///   sm.reduce_sums(); sm.normalize(o);
template <int kMmaM>
struct FragmentSoftmax {
  float m[kMmaM][2];
  float l[kMmaM][2];  // this thread's partial sums (its 2 columns of each n8 tile); finalize() adds the quad

  LLMK_DEVICE void init() {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m[mi][r] = -INFINITY;
        l[mi][r] = 0.0f;
      }
  }

  /// The online update for one tile of scores: new row max (over the quad), rescale l and o, and replace the
  /// scores by p = 2^(s c - m).
  template <int kN8, int kD8>
  LLMK_DEVICE void update(float (&s)[kMmaM][kN8][4], float (&o)[kMmaM][kD8][4], float c) {
    float f[kMmaM][2];
    update_scores(s, c, f);
    rescale(o, f);
  }

  /// update() for kM of the 16-row tiles, from tile kM0 on (s holds their scores): the same arithmetic per
  /// row as update(), so a kernel that computes its S one 16-row tile at a time gets the same bits.
  template <int kM0, int kM, int kN8, int kD8>
  LLMK_DEVICE void update_rows(float (&s)[kM][kN8][4], float (&o)[kMmaM][kD8][4], float c) {
    static_assert(kM0 >= 0 && kM0 + kM <= kMmaM, "rows outside the state");
    float f[kM][2];
#pragma unroll
    for (int mi = 0; mi < kM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r) update_row<0>(s[mi], r, c, m[kM0 + mi][r], l[kM0 + mi][r], f[mi][r]);
    // Unconditional: rescale_rows_if_changed here spilled 36 bytes in the mma.sync prefill's d64 tile
    // (sm_90a).
    rescale_rows<kM0>(o, f);
  }

  /// update() without the output accumulator: the new max, p in s, l, and each row's factor f for o (apply
  /// it with rescale() once o may be touched: a pipelined kernel's P V of the previous tile may still be
  /// writing o here). kExpBias scales p and l by 2^kExpBias (an fp8 P stays out of the subnormals); o / l is
  /// unchanged, the LSE needs m - kExpBias.
  template <int kExpBias = 0, int kN8>
  LLMK_DEVICE void update_scores(float (&s)[kMmaM][kN8][4], float c, float (&f)[kMmaM][2]) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r) update_row<kExpBias>(s[mi], r, c, m[mi][r], l[mi][r], f[mi][r]);
  }

  /// One row (r = 0: g, 1: g + 8) of one 16-row tile: its max over the quad, the factor f for the old terms,
  /// p = 2^(s c - m) in place, and l.
  template <int kExpBias, int kN8>
  LLMK_DEVICE static void update_row(float (&s)[kN8][4], int r, float c, float& m_row, float& l_row,
                                     float& f) {
    float tile_max = max_propagate_nan(s[0][2 * r], s[0][2 * r + 1]);
#pragma unroll
    for (int ni = 1; ni < kN8; ++ni)
      tile_max = max_propagate_nan(tile_max, max_propagate_nan(s[ni][2 * r], s[ni][2 * r + 1]));
    tile_max = max_propagate_nan(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = max_propagate_nan(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float mx = max_propagate_nan(m_row, tile_max * c);  // c > 0: the max commutes with it
    // The shift of the exponents: mx, or a finite stand-in while mx = -inf (nothing visible yet), so that
    // masked scores give exactly 0 rather than NaN from (-inf) - (-inf). Any finite shift gives the same
    // zeros there (every score seen is -inf), so one NaN-propagating max replaces exp2_shifted's compare
    // and two selects; NaN and +inf shift as mx itself. Bit-identical to exp2_shifted(., mx).
    const float shift = max_propagate_nan(mx, -3.402823466e38f);
    f = arch::ex2_approx(m_row - shift);
    m_row = mx;
    float neg_m = -shift;
    if constexpr (kExpBias != 0) neg_m += static_cast<float>(kExpBias);
    float sum = l_row * f;
#pragma unroll
    for (int ni = 0; ni < kN8; ++ni)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = arch::ex2_approx(fmaf(s[ni][2 * r + e], c, neg_m));
        s[ni][2 * r + e] = p;
        sum += p;
      }
    l_row = sum;
  }

  /// o *= f, row by row (the factors of update_scores()).
  template <int kD8>
  LLMK_DEVICE static void rescale(float (&o)[kMmaM][kD8][4], const float (&f)[kMmaM][2]) {
    rescale_rows<0>(o, f);
  }

  /// rescale(), skipped when no row of the warp changed its max (every f == 1: o * 1 == o, bit for bit). The
  /// branch is warp-uniform (a vote); once the running maxima settle most tiles skip the kD8 * 8 multiplies
  /// (64 a thread at d128).
  template <int kD8>
  LLMK_DEVICE static void rescale_if_changed(float (&o)[kMmaM][kD8][4], const float (&f)[kMmaM][2]) {
    rescale_rows_if_changed<0>(o, f);
  }

  /// rescale_if_changed() of the kM 16-row tiles from tile kM0 on.
  template <int kM0, int kM, int kD8>
  LLMK_DEVICE static void rescale_rows_if_changed(float (&o)[kMmaM][kD8][4], const float (&f)[kM][2]) {
    bool changed = false;
#pragma unroll
    for (int mi = 0; mi < kM; ++mi) changed = changed || f[mi][0] != 1.0f || f[mi][1] != 1.0f;
    if (__any_sync(0xffffffffu, changed)) rescale_rows<kM0>(o, f);
  }

  /// rescale() of the kM 16-row tiles from tile kM0 on.
  template <int kM0, int kM, int kD8>
  LLMK_DEVICE static void rescale_rows(float (&o)[kMmaM][kD8][4], const float (&f)[kM][2]) {
#pragma unroll
    for (int mi = 0; mi < kM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int di = 0; di < kD8; ++di) {
          o[kM0 + mi][di][2 * r] *= f[mi][r];
          o[kM0 + mi][di][2 * r + 1] *= f[mi][r];
        }
  }

  /// Sums l over the quad (every lane gets the row total). Call once, after the last update.
  LLMK_DEVICE void reduce_sums() {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        l[mi][r] += __shfl_xor_sync(0xffffffffu, l[mi][r], 1);
        l[mi][r] += __shfl_xor_sync(0xffffffffu, l[mi][r], 2);
      }
  }

  /// out = o / l after reduce_sums() (rows with l = 0, nothing visible, become 0; NaN stays NaN).
  template <int kD8>
  LLMK_DEVICE void normalize(float (&o)[kMmaM][kD8][4]) const {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float inv = l[mi][r] == 0.0f ? 0.0f : 1.0f / l[mi][r];
#pragma unroll
        for (int di = 0; di < kD8; ++di) {
          o[mi][di][2 * r] *= inv;
          o[mi][di][2 * r + 1] *= inv;
        }
      }
  }
};

}  // namespace llmk::attention

// llmk/obs/pruning.hpp: the pruning baselines SparseGPT is measured against, and the pruning-pattern rules
// SparseGPT shares with them.
//   magnitude  score |W_ij|                                   (no calibration data)
//   Wanda      score |W_ij| * ||X_j||_2 (Sun et al. 2023)      ||X_j||_2^2 = (n/2) H_jj, so sqrt(H_jj) is
//              used: a positive factor common to all columns does not change a row's ranking
// Neither updates the kept weights. Patterns (PruneOptions, as SparseGptOptions):
//   unstructured  which weights compete for the count is PruneOptions::scope; the default (kReference) is
//                 each method's reference rule:
//                   magnitude  per layer: llround(sparsity * rows * cols) weights of the lowest scores of the
//                              whole layer (the usual rule; per row costs +15.6% loss on the outlier layer)
//                   Wanda      per row: every row loses exactly int(sparsity * cols), the fp64 product
//                              truncated (Wanda's per-output comparison group and count)
//                 kPerRow / kPerLayer force either rule (and its count) for both. Counts are exact by
//                 default: the magnitude reference's `score <= sorted[int(numel * sparsity)]` prunes one
//                 more weight (and every tie); PruneOptions::count = PruneCount::kThreshold applies that rule
//                 to every candidate set instead (the magnitude reference's mask exactly).
//   n:m           n of every m consecutive columns of every row (2:4, 4:8; cols % m == 0)
// The rank rule (also SparseGPT's, and its GPU kernel's): among the candidates, rank_t = #{u : s_u < s_t or
// (s_u == s_t and u < t)}; the k candidates of rank < k are pruned (ties go to the lower index; a candidate
// set of several rows is indexed row-major, so ties go to the lower row, then column).
//
//   llmk::obs::PruneOptions opt;  opt.prune_n = 2;  opt.prune_m = 4;
//   llmk::obs::PruneResult out;
//   llmk::Status s = llmk::obs::wanda_prune(w.data(), rows, cols, cols, h.data(), cols, opt, &la, &out);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "llmk/obs/obs.hpp"

namespace llmk::obs {

/// Which weights compete for an unstructured pruning count.
enum class PruneScope {
  kReference,  ///< each method's reference rule: magnitude per layer, Wanda per row, SparseGPT per block
               ///< (one threshold over all rows of a block of columns, as the SparseGPT reference code)
  kPerRow,     ///< every row loses exactly int(sparsity * cols) weights (Wanda's truncated count; SparseGPT:
               ///< llround, cumulative over its blocks)
  kPerLayer,   ///< magnitude / Wanda: llround(sparsity * rows * cols) over the whole layer (not SparseGPT)
};

/// How many weights an unstructured candidate set loses.
enum class PruneCount {
  kExact,      ///< exactly the requested count (ties to the lower index): never more than asked
  kThreshold,  ///< the SparseGPT and magnitude reference codes' rule: every score <= the set's sorted
               ///< score at index int(sparsity * n): int(sparsity * n) + 1 weights, and every tie of it
};

/// The pruning pattern of the baselines (SparseGptOptions has the same fields).
struct PruneOptions {
  double sparsity = 0.5;  ///< fraction of the weights pruned, in [0, 1); used when prune_n == 0
  int prune_n = 0;        ///< n:m when > 0: n zeros in every m consecutive columns (0 < n < m, cols % m == 0)
  int prune_m = 0;        ///< 0 with prune_n == 0 (unstructured)
  PruneScope scope = PruneScope::kReference;  ///< unstructured only: who competes for the count
  PruneCount count = PruneCount::kExact;      ///< unstructured only: exact count or the reference threshold
};

/// A baseline's output.
struct PruneResult {
  std::vector<float> weights;      ///< [rows, cols] dense: w where kept, exactly 0 where pruned
  std::vector<std::uint8_t> mask;  ///< [rows, cols] 1 = kept
  bool has_loss = false;           ///< true when h was given
  double loss = 0.0;               ///< 1/2 tr(E H E^T), E = W - W' (= ||E X||^2 / n); 0 without h
};

namespace detail {

// Pattern options shared by SparseGPT and the baselines. Errors: sparsity outside [0, 1) (NaN too);
// "prune_n" for n < 0 or n == 0 with m != 0; "prune_m" for m <= n or cols % m != 0.
inline Status check_prune_pattern(double sparsity, int n, int m, std::int64_t cols) {
  if (!(sparsity >= 0.0 && sparsity < 1.0))
    return Status::invalid_argument("sparsity", str_cat("must be in [0, 1), got ", sparsity));
  const auto rule = [&] {
    return str_cat("n:m needs 0 < n < m and cols % m == 0, unstructured n = m = 0 (n=", n, ", m=", m,
                   ", cols=", cols, ")");
  };
  if (n < 0 || (n == 0 && m != 0)) return Status::invalid_argument("prune_n", rule());
  if (n > 0 && (m <= n || cols % m != 0)) return Status::invalid_argument("prune_m", rule());
  return {};
}

// Weights pruned from a row of `cols` columns, unstructured: llround(sparsity * cols). Applied to a prefix
// [0, i) it is the cumulative count SparseGPT's blocks use, so the per-block counts add up to the row's.
inline std::int64_t prune_count(double sparsity, std::int64_t cols) {
  return static_cast<std::int64_t>(std::llround(sparsity * static_cast<double>(cols)));
}

// Weights the baselines prune from each row when every row is its own candidate set: Wanda's count,
// `int(W_metric.shape[1] * args.sparsity_ratio)` in its reference code (lib/prune.py), the fp64 product
// truncated: 2457 of 4096 at 0.6 (llround would prune 2458), 28 of 100 at 0.29 (0.29 * 100 is
// 28.999999999999996).
inline std::int64_t row_prune_count(double sparsity, std::int64_t cols) {
  return static_cast<std::int64_t>(sparsity * static_cast<double>(cols));
}

// The rank rule: clears keep[t] for the k entries of scores[0, count) of rank < k, rank by (score, index).
// nth_element with the (score, index) order selects exactly that set (the order is total). Scores must not
// be NaN (the callers' are finite or +inf).
template <class T>
void prune_lowest(const T* scores, std::int64_t count, std::int64_t k, std::uint8_t* keep,
                  std::vector<std::int64_t>& idx) {
  if (k <= 0) return;
  idx.resize(static_cast<std::size_t>(count));
  std::iota(idx.begin(), idx.end(), std::int64_t{0});
  if (k < count)
    std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), [&](std::int64_t a, std::int64_t b) {
      return scores[a] < scores[b] || (scores[a] == scores[b] && a < b);
    });
  for (std::int64_t i = 0; i < std::min(k, count); ++i) keep[idx[static_cast<std::size_t>(i)]] = 0;
}

// The threshold rule (PruneCount::kThreshold): clears keep[t] for every entry of scores[0, count) at or below
// the score of rank int(sparsity * count) (0-based; rank by score alone: the reference's torch.sort value).
// sparsity < 1, so the rank exists when count > 0. Scores must not be NaN.
template <class T>
void prune_at_or_below_rank(const T* scores, std::int64_t count, double sparsity, std::uint8_t* keep,
                            std::vector<T>& sorted) {
  if (count <= 0) return;
  const auto rank = static_cast<std::int64_t>(sparsity * static_cast<double>(count));
  sorted.assign(scores, scores + count);
  std::nth_element(sorted.begin(), sorted.begin() + rank, sorted.end());
  const T threshold = sorted[static_cast<std::size_t>(rank)];
  for (std::int64_t i = 0; i < count; ++i)
    if (scores[i] <= threshold) keep[i] = 0;
}

inline Status check_count(PruneCount count) {
  if (count != PruneCount::kExact && count != PruneCount::kThreshold)
    return Status::invalid_argument("count", "must be PruneCount::kExact or PruneCount::kThreshold");
  return {};
}

// 1/2 tr(E H E^T) in fp64 for a pruning without weight updates: E = W at the pruned entries, 0 elsewhere, so
// only the pruned pairs contribute (rows * k^2 terms, k the pruned count of a row).
inline double pruned_loss_fp64(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                               const float* h, std::int64_t ldh, const std::vector<std::uint8_t>& mask) {
  double total = 0.0;
  std::vector<std::int64_t> pruned;
  for (std::int64_t r = 0; r < rows; ++r) {
    pruned.clear();
    for (std::int64_t c = 0; c < cols; ++c)
      if (!mask[static_cast<std::size_t>(r * cols + c)]) pruned.push_back(c);
    for (const std::int64_t i : pruned) {
      double s = 0.0;
      for (const std::int64_t j : pruned) s += static_cast<double>(h[i * ldh + j]) * w[r * ldw + j];
      total += static_cast<double>(w[r * ldw + i]) * s;
    }
  }
  return 0.5 * total;
}

inline Status check_scope(PruneScope scope) {
  if (scope != PruneScope::kReference && scope != PruneScope::kPerRow && scope != PruneScope::kPerLayer)
    return Status::invalid_argument("scope", "must be kReference, kPerRow or kPerLayer");
  return {};
}

// True when an unstructured pruning of the baselines ranks the whole layer at once (magnitude's reference).
inline bool per_layer(PruneScope scope, bool reference_per_layer) {
  return scope == PruneScope::kPerLayer || (scope == PruneScope::kReference && reference_per_layer);
}

// Shared driver of the baselines: score(r, c) -> double (finite, >= 0), then the pattern, then the loss.
template <class Score>
Status prune_by_score(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const float* h,
                      std::int64_t ldh, const PruneOptions& opt, bool reference_per_layer, LinalgBackend* la,
                      PruneResult* out, Score score) {
  LLMK_RETURN_IF_ERROR(check_prune_pattern(opt.sparsity, opt.prune_n, opt.prune_m, cols));
  LLMK_RETURN_IF_ERROR(check_scope(opt.scope));
  LLMK_RETURN_IF_ERROR(check_count(opt.count));
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  PruneResult res;
  res.weights.resize(static_cast<std::size_t>(rows * cols));
  res.mask.assign(res.weights.size(), 1);
  const bool nm = opt.prune_n > 0, threshold = !nm && opt.count == PruneCount::kThreshold;
  std::vector<std::int64_t> idx;
  std::vector<double> sorted;
  if (!nm && per_layer(opt.scope, reference_per_layer)) {  // one candidate set: the layer, row-major
    std::vector<double> s(res.weights.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) s[static_cast<std::size_t>(r * cols + c)] = score(r, c);
    if (threshold)
      prune_at_or_below_rank(s.data(), rows * cols, opt.sparsity, res.mask.data(), sorted);
    else
      prune_lowest(s.data(), rows * cols, prune_count(opt.sparsity, rows * cols), res.mask.data(), idx);
  } else {
    const std::int64_t group = nm ? opt.prune_m : cols;
    const std::int64_t k = nm ? opt.prune_n : row_prune_count(opt.sparsity, cols);
    std::vector<double> s(static_cast<std::size_t>(group));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t g0 = 0; g0 < cols; g0 += group) {
        for (std::int64_t t = 0; t < group; ++t) s[static_cast<std::size_t>(t)] = score(r, g0 + t);
        if (threshold)
          prune_at_or_below_rank(s.data(), group, opt.sparsity, res.mask.data() + r * cols + g0, sorted);
        else
          prune_lowest(s.data(), group, k, res.mask.data() + r * cols + g0, idx);
      }
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      res.weights[i] = res.mask[i] ? w[r * ldw + c] : 0.0f;
    }
  if (h != nullptr) {
    res.has_loss = true;
    if (la != nullptr)
      LLMK_RETURN_IF_ERROR(layer_loss(LayerArgs{w, rows, cols, ldw, h, ldh}, res.weights, *la, &res.loss));
    else
      res.loss = pruned_loss_fp64(w, rows, cols, ldw, h, ldh, res.mask);
  }
  *out = std::move(res);
  return {};
}

}  // namespace detail

/// Wanda pruning of w [rows = out features, cols = in features] (ldw) with the layer Hessian h [cols, cols]
/// (ldh; llmk/obs/hessian.cuh): score |w_rc| * sqrt(H_cc) (fp64), pattern per opt (file comment), no weight
/// update (unstructured: per row by default, as Wanda; opt.scope = kPerLayer ranks the whole layer).
/// out->loss = 1/2 tr(E H E^T) through la's GEMM (fp32 products, fp64 sum) when la is given, else
/// exactly in fp64 over the pruned entries (O(rows k^2), k pruned per row: fine for small layers). Dead
/// columns (H_cc == 0) score 0 and go first. Errors name: rows, cols, w, ldw, h, ldh, sparsity, prune_n,
/// prune_m, out.
///   llmk::obs::PruneOptions opt;  opt.sparsity = 0.5;
///   llmk::obs::PruneResult out;
///   llmk::Status s = llmk::obs::wanda_prune(w.data(), rows, cols, cols, h.data(), cols, opt, &la, &out);
inline Status wanda_prune(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                          const float* h, std::int64_t ldh, const PruneOptions& opt, LinalgBackend* la,
                          PruneResult* out) {
  LLMK_RETURN_IF_ERROR(detail::validate_layer(detail::LayerArgs{w, rows, cols, ldw, h, ldh}));
  return detail::prune_by_score(w, rows, cols, ldw, h, ldh, opt, /*reference_per_layer=*/false, la, out,
                                [&](std::int64_t r, std::int64_t c) {
                                  return std::fabs(static_cast<double>(w[r * ldw + c])) *
                                         std::sqrt(static_cast<double>(h[c * ldh + c]));
                                });
}

/// Magnitude pruning of w [rows, cols] (ldw): score |w_rc|, pattern per opt (unstructured: per layer by
/// default, opt.scope = kPerRow for an exact count in every row), no weight update. h [cols, cols]
/// (ldh) is optional: only the reported loss uses it (nullptr: has_loss false; la as in wanda_prune). Errors
/// name: rows, cols, w, ldw, h, ldh (when h is given), sparsity, prune_n, prune_m, out.
///   llmk::obs::PruneOptions opt;  opt.prune_n = 2;  opt.prune_m = 4;
///   llmk::obs::PruneResult out;
///   llmk::Status s = llmk::obs::magnitude_prune(w.data(), rows, cols, cols, nullptr, 0, opt, nullptr, &out);
inline Status magnitude_prune(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                              const float* h, std::int64_t ldh, const PruneOptions& opt, LinalgBackend* la,
                              PruneResult* out) {
  LLMK_RETURN_IF_ERROR(h != nullptr ? detail::validate_layer(detail::LayerArgs{w, rows, cols, ldw, h, ldh})
                                    : detail::validate_weights(w, rows, cols, ldw));
  return detail::prune_by_score(
      w, rows, cols, ldw, h, ldh, opt, /*reference_per_layer=*/true, la, out,
      [&](std::int64_t r, std::int64_t c) { return std::fabs(static_cast<double>(w[r * ldw + c])); });
}

}  // namespace llmk::obs

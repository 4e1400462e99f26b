// llmk/quant/calibration.hpp: host-side calibration. Calibrators accumulate statistics over many batches
// (observe()) and report a clipping range; to_quant_params<Q>() turns the range into the QuantParams of a
// llmk::quant::Quantizer with the same arithmetic the kernels use (llmk/quant/scheme.cuh).
//
//   llmk::quant::PercentileCalibrator cal(99.99);
//   for (const auto& batch : batches) cal.observe(batch.data(), batch.size());
//   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerTensor>;
//   llmk::quant::QuantParams p = llmk::quant::to_quant_params<Q>(cal.range());
//
// The methods (exact definitions; docs/quantization.md discusses when to use which):
//   MinMaxCalibrator      running finite min, max and absmax (amax = max|x|). Exact and order independent.
//   PercentileCalibrator  the p-th percentile of |x| from a 2048-bin histogram of |x| (AbsHistogram below).
//   KLCalibrator          TensorRT "entropy" calibration: the threshold whose clipped-and-quantized histogram
//                         is closest to the observed one in KL divergence (kl_search() below).
//   mse_clip_search()     GPTQ's MSE-optimal clipping grid search over a span (per tensor, row or group):
//                         shrink factors p = 1 - i / grid, i = 0 .. int(maxshrink * grid) - 1; keep the
//                         candidate with the least sum |dequant(quant(x)) - x|^norm.
// Every reduction skips NaN and +-Inf (as the kernels' range reductions do): a calibrator that saw only
// non-finite values or nothing at all reports the empty range [0, 0] (symmetric scale 1; asymmetric [-1, 1]).
//
// Errors: invalid arguments (a null pointer with a non-zero count, a percentile outside (0, 100], ...) throw
// llmk::Error carrying Status::invalid_argument("name", "rule (values)").
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::quant {

/// A clipping range [min, max] (min <= 0 <= max is not required). amax() = max(|min|, |max|). The
/// calibrators' range() returns one; to_quant_params turns it into QuantParams:
///   llmk::quant::ClipRange r{-2.5f, 4.0f};   // r.amax() == 4
struct ClipRange {
  float min = 0.0f;
  float max = 0.0f;
  float amax() const { return std::max(std::fabs(min), std::fabs(max)); }
};

/// QuantParams of quantizer Q for a clipping range: symmetric and fp8 quantizers use
/// params_from_absmax(amax), asymmetric ones params_from_range(min, max) (which widens the range to hold 0).
///   using Q = llmk::quant::Quantizer<llmk::int4_t, llmk::quant::Asymmetric, llmk::quant::PerTensor>;
///   llmk::quant::QuantParams p = llmk::quant::to_quant_params<Q>(cal.range());
template <class Q>
QuantParams to_quant_params(ClipRange r) {
  if constexpr (Q::kAsymmetric)
    return Q::params_from_range(r.min, r.max);
  else
    return Q::params_from_absmax(r.amax());
}

namespace detail {

inline void calibration_require(bool ok, const char* argument, const std::string& rule) {
  if (!ok) throw Error(Status::invalid_argument(argument, rule));
}

template <class T>
inline constexpr bool kCalibrationInput =
    std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Calls f(float) for every element of a [rows, cols] view with row stride ld (elements).
template <class T, class F>
void for_each_element(const T* data, std::int64_t rows, std::int64_t cols, std::int64_t ld, F&& f) {
  static_assert(kCalibrationInput<T>, "calibration inputs are float, llmk::half or llmk::bfloat16");
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = data + r * ld;
    for (std::int64_t c = 0; c < cols; ++c) f(load_as_float(row[c]));
  }
}

inline void check_view(const void* data, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  calibration_require(rows >= 0, "rows", str_cat("must be >= 0, got ", rows));
  calibration_require(cols >= 0, "cols", str_cat("must be >= 0, got ", cols));
  calibration_require(ld >= cols, "ld", str_cat("must be >= cols (cols=", cols, ", ld=", ld, ")"));
  calibration_require(data != nullptr || rows == 0 || cols == 0, "data", "must not be null");
}

}  // namespace detail

// ---- min / max
// ------------------------------------------------------------------------------------------------

/// Running finite min, max and absmax over every batch observed; NaN and +-Inf are counted and skipped.
///   llmk::quant::MinMaxCalibrator cal;
///   cal.observe(x.data(), x.size());             // float, llmk::half or llmk::bfloat16
///   cal.observe(w.data(), rows, cols, ld);       // a strided [rows, cols] view
///   float amax = cal.amax();                     // 0 when nothing finite was seen
class MinMaxCalibrator {
 public:
  /// Observes data[0 .. count). Throws llmk::Error (invalid_argument 'data') for a null data with count > 0.
  template <class T>
  void observe(const T* data, std::size_t count) {
    detail::calibration_require(data != nullptr || count == 0, "data", "must not be null when count > 0");
    detail::for_each_element(data, count == 0 ? 0 : 1, static_cast<std::int64_t>(count),
                             static_cast<std::int64_t>(count), [this](float v) { add(v); });
  }
  /// Observes a [rows, cols] view with row stride ld (elements). Throws llmk::Error (invalid_argument naming
  /// it) for rows or cols < 0, ld < cols, or a null data with a non-empty view.
  template <class T>
  void observe(const T* data, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    detail::check_view(data, rows, cols, ld);
    detail::for_each_element(data, rows, cols, ld, [this](float v) { add(v); });
  }
  /// Adds one value.
  void add(float v) {
    if (!is_finite(v)) {
      ++non_finite_;
      return;
    }
    if (finite_ == 0) {
      min_ = max_ = v;
    } else {
      min_ = std::min(min_, v);
      max_ = std::max(max_, v);
    }
    ++finite_;
  }
  /// Folds another calibrator's statistics into this one (as if its data had been observed here).
  void merge(const MinMaxCalibrator& other) {
    if (other.finite_ != 0) {
      min_ = finite_ ? std::min(min_, other.min_) : other.min_;
      max_ = finite_ ? std::max(max_, other.max_) : other.max_;
    }
    finite_ += other.finite_;
    non_finite_ += other.non_finite_;
  }
  /// Forgets everything observed: the state of a new calibrator.
  ///   cal.reset();   // before the next layer
  void reset() { *this = MinMaxCalibrator(); }

  float min() const { return finite_ ? min_ : 0.0f; }  ///< 0 when no finite value was seen
  float max() const { return finite_ ? max_ : 0.0f; }
  float amax() const { return std::max(std::fabs(min()), std::fabs(max())); }
  std::uint64_t finite_count() const { return finite_; }
  std::uint64_t non_finite_count() const { return non_finite_; }
  /// [min, max] (amax() for symmetric quantizers).
  ClipRange range() const { return {min(), max()}; }

 private:
  float min_ = 0.0f, max_ = 0.0f;
  std::uint64_t finite_ = 0, non_finite_ = 0;
};

// ---- histogram of |x|
// ----------------------------------------------------------------------------------------

/// A kBins-bin histogram of |x| over [0, R), where R is the smallest power of two strictly greater than the
/// largest finite |x| seen so far (R = 2^e with amax = m * 2^e, m in [0.5, 1)). Bin b counts |x| in
/// [b * w, (b + 1) * w), w = R / kBins. When a batch holds a larger |x|, R doubles (as often as needed) and
/// pairs of bins merge, which is exact: the histogram after any split of the data into batches, in any order,
/// is identical to the histogram of one big batch.
/// Resolution: w = R / 2048 with amax < R <= 2 amax, so amax / 2048 < w <= amax / 1024 (between 1024 and 2048
/// bins cover [0, amax]). Zeros land in bin 0; values seen before the first non-zero one are kept aside and
/// added to bin 0. Non-finite values are skipped (and counted in minmax()).
///   llmk::quant::AbsHistogram hist;
///   for (const auto& b : batches) hist.observe(b.data(), b.size());   // float, llmk::half or llmk::bfloat16
///   const float p999 = hist.percentile(99.9);   // at most one bin width above the exact 99.9th percentile
///   auto r = llmk::quant::kl_search(hist.counts(), hist.bin_width(), 128, hist.minmax().amax());
class AbsHistogram {
 public:
  static constexpr int kBins = 2048;

  /// Adds data[0 .. count) (two passes: the batch's amax first, so the range grows once). Throws llmk::Error
  /// (invalid_argument 'data') for a null data with count > 0.
  ///   hist.observe(activations.data(), activations.size());
  template <class T>
  void observe(const T* data, std::size_t count) {
    detail::calibration_require(data != nullptr || count == 0, "data", "must not be null when count > 0");
    observe(data, count == 0 ? 0 : 1, static_cast<std::int64_t>(count), static_cast<std::int64_t>(count));
  }
  /// Adds a [rows, cols] view with row stride ld (elements). Throws llmk::Error (invalid_argument naming it)
  /// for rows or cols < 0, ld < cols, or a null data with a non-empty view.
  ///   hist.observe(x.data(), tokens, hidden, /*ld=*/hidden_padded);
  template <class T>
  void observe(const T* data, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    detail::check_view(data, rows, cols, ld);
    // Pass 1: the batch's finite amax (and min/max), so the range grows once before binning.
    MinMaxCalibrator batch;
    detail::for_each_element(data, rows, cols, ld, [&batch](float v) { batch.add(v); });
    merge_minmax(batch);
    grow_to(batch.amax());
    // Pass 2: bin.
    detail::for_each_element(data, rows, cols, ld, [this](float v) {
      if (!is_finite(v)) return;
      const double a = std::fabs(static_cast<double>(v));
      if (exponent_ == kNoRange) {  // everything so far was zero
        ++pending_zeros_;
        return;
      }
      // a * 2^(11 - e) is exact (power-of-two scaling), so the bin does not depend on the batching.
      auto b = static_cast<std::int64_t>(std::ldexp(a, kLog2Bins - exponent_));
      counts_[static_cast<std::size_t>(std::min<std::int64_t>(b, kBins - 1))] += 1;
    });
  }
  /// Forgets everything observed (counts, range, min/max): the state of a new histogram.
  ///   hist.reset();   // before the next layer
  void reset() { *this = AbsHistogram(); }

  /// Counts per bin (all zero while nothing non-zero was seen: the zeros seen so far are then kept aside,
  /// added to bin 0 once a non-zero value arrives).
  const std::array<std::uint64_t, kBins>& counts() const { return counts_; }
  /// Bin width w (0 while no non-zero finite value was seen).
  double bin_width() const { return exponent_ == kNoRange ? 0.0 : std::ldexp(1.0, exponent_ - kLog2Bins); }
  /// Finite values counted (histogram total).
  std::uint64_t total() const { return minmax_.finite_count(); }
  /// Running min/max/amax (exact) of the same data.
  const MinMaxCalibrator& minmax() const { return minmax_; }

  /// The p-th percentile of |x| (p in (0, 100]): with n = total() and target = ceil(p / 100 * n), the
  /// smallest bin b whose cumulative count reaches target; returns min((b + 1) * w, amax), the bin's upper
  /// edge clipped to the exact amax. At least p% of the values are <= the result, which is within one bin
  /// width above the exact percentile. 0 when nothing non-zero was seen. Throws llmk::Error
  /// (invalid_argument 'percentile') for p outside (0, 100].
  ///   const float clip = hist.percentile(99.99);   // the clipping amax of PercentileCalibrator's default
  float percentile(double p) const {
    detail::calibration_require(p > 0.0 && p <= 100.0, "percentile", str_cat("must be in (0, 100], got ", p));
    if (exponent_ == kNoRange) return 0.0f;
    const std::uint64_t n = total();
    const auto target = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
    std::uint64_t cumulative = pending_zeros_;
    int b = 0;
    for (; b < kBins; ++b) {
      cumulative += counts_[static_cast<std::size_t>(b)];
      if (cumulative >= target) break;
    }
    b = std::min(b, kBins - 1);
    return static_cast<float>(std::min((b + 1) * bin_width(), static_cast<double>(minmax_.amax())));
  }

 private:
  static constexpr int kLog2Bins = 11;
  static constexpr int kNoRange = std::numeric_limits<int>::min();

  void merge_minmax(const MinMaxCalibrator& batch) { minmax_.merge(batch); }
  void grow_to(float amax) {
    if (!(amax > 0.0f)) return;
    int e = 0;
    (void)std::frexp(static_cast<double>(amax), &e);  // amax = m * 2^e, m in [0.5, 1): 2^e > amax
    if (exponent_ == kNoRange) {
      exponent_ = e;
      counts_[0] += pending_zeros_;
      pending_zeros_ = 0;
      return;
    }
    while (exponent_ < e) {  // double the range: bin b absorbs bins 2b and 2b + 1
      for (int b = 0; b < kBins / 2; ++b)
        counts_[static_cast<std::size_t>(b)] =
            counts_[static_cast<std::size_t>(2 * b)] + counts_[static_cast<std::size_t>(2 * b + 1)];
      std::fill(counts_.begin() + kBins / 2, counts_.end(), std::uint64_t{0});
      ++exponent_;
    }
  }

  std::array<std::uint64_t, kBins> counts_{};
  int exponent_ = kNoRange;  // R = 2^exponent_
  std::uint64_t pending_zeros_ = 0;
  MinMaxCalibrator minmax_;
};

// ---- KL-divergence (entropy) threshold
// --------------------------------------------------------------------------

/// Result of kl_search(): the number of bins kept, its divergence and the threshold (example: kl_search).
struct KLSearchResult {
  int bins_kept = 0;        ///< the chosen i
  double divergence = 0.0;  ///< KL(P || Q) at i
  float threshold = 0.0f;   ///< min((i + 0.5) * bin_width, amax)
};

namespace detail {

// MXNet/TVM's _smooth_distribution: zero entries get eps, non-zero ones lose eps * n_zeros / n_nonzeros, so
// the mass is unchanged and no entry is zero. eps is reduced (to half the smallest non-zero entry times
// n_nonzeros / n_zeros) where the reference would assert because an entry would drop to <= 0. Returns false
// when every entry is zero.
inline bool smooth_distribution(std::vector<double>& d, double eps = 1e-4) {
  std::size_t zeros = 0;
  double smallest = std::numeric_limits<double>::infinity();
  for (double v : d) {
    if (v == 0.0)
      ++zeros;
    else
      smallest = std::min(smallest, v);
  }
  const std::size_t nonzeros = d.size() - zeros;
  if (nonzeros == 0) return false;
  if (zeros == 0) return true;
  double eps1 = eps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
  if (eps1 >= smallest) {
    eps1 = 0.5 * smallest;
    eps = eps1 * static_cast<double>(nonzeros) / static_cast<double>(zeros);
  }
  for (double& v : d) v = v == 0.0 ? eps : v - eps1;
  return true;
}

}  // namespace detail

/// TensorRT's entropy calibration over a histogram of |x| (counts[0 .. n), bin width w):
///   for every candidate i in [num_quant_bins, n]:
///     P = counts[0 .. i), with the clipped mass sum(counts[i .. n)) added to P[i - 1];
///     Q = counts[0 .. i) (without the clipped mass) merged into num_quant_bins groups of m = i /
///     num_quant_bins
///         consecutive bins (the last group also takes the i % num_quant_bins remaining bins), each group's
///         sum spread evenly over the bins of the group where P is non-zero (Q = 0 where P = 0);
///     P and Q smoothed (detail::smooth_distribution, eps = 1e-4 on counts, as MXNet/TVM do), normalized,
///     divergence(i) = KL(P || Q) = sum_j P_j log(P_j / Q_j);
///   the first i with the least divergence wins; threshold = min((i + 0.5) * w, amax) (the TensorRT slides'
///   "(m + 0.5) * width", clipped to the exact amax).
/// num_quant_bins is the number of levels on one side of zero: 128 for int8, 8 for int4. An all-zero
/// histogram gives threshold 0. Cost: O(n^2 / 2) (about 2M logarithms for n = 2048; a few ms).
///   auto r = llmk::quant::kl_search(hist.counts(), hist.bin_width(), 128, hist.minmax().amax());
inline KLSearchResult kl_search(std::span<const std::uint64_t> counts, double bin_width, int num_quant_bins,
                                float amax) {
  const int n = static_cast<int>(counts.size());
  detail::calibration_require(
      num_quant_bins >= 1 && num_quant_bins <= n, "num_quant_bins",
      str_cat("must be in [1, number of bins] (bins=", n, ", num_quant_bins=", num_quant_bins, ")"));
  detail::calibration_require(bin_width >= 0.0, "bin_width", str_cat("must be >= 0, got ", bin_width));
  std::vector<double> suffix(static_cast<std::size_t>(n) + 1, 0.0);  // suffix[i] = sum(counts[i .. n))
  for (int j = n - 1; j >= 0; --j)
    suffix[static_cast<std::size_t>(j)] =
        suffix[static_cast<std::size_t>(j) + 1] + static_cast<double>(counts[static_cast<std::size_t>(j)]);
  KLSearchResult best;
  if (suffix[0] == 0.0 || bin_width == 0.0) return best;
  best.divergence = std::numeric_limits<double>::infinity();
  std::vector<double> p, q;
  for (int i = num_quant_bins; i <= n; ++i) {
    p.assign(counts.begin(), counts.begin() + i);
    p[static_cast<std::size_t>(i) - 1] += suffix[static_cast<std::size_t>(i)];
    q.assign(static_cast<std::size_t>(i), 0.0);
    const int m = i / num_quant_bins;
    for (int g = 0; g < num_quant_bins; ++g) {
      const int start = g * m, stop = g == num_quant_bins - 1 ? i : start + m;
      double mass = 0.0;
      int nonzero = 0;
      for (int j = start; j < stop; ++j) {
        mass += static_cast<double>(counts[static_cast<std::size_t>(j)]);
        nonzero += p[static_cast<std::size_t>(j)] != 0.0;
      }
      if (nonzero == 0) continue;
      for (int j = start; j < stop; ++j)
        if (p[static_cast<std::size_t>(j)] != 0.0) q[static_cast<std::size_t>(j)] = mass / nonzero;
    }
    double divergence = std::numeric_limits<double>::infinity();
    if (detail::smooth_distribution(p) && detail::smooth_distribution(q)) {
      double sp = 0.0, sq = 0.0;
      for (int j = 0; j < i; ++j) {
        sp += p[static_cast<std::size_t>(j)];
        sq += q[static_cast<std::size_t>(j)];
      }
      divergence = 0.0;
      for (int j = 0; j < i; ++j) {
        const double pj = p[static_cast<std::size_t>(j)] / sp, qj = q[static_cast<std::size_t>(j)] / sq;
        divergence += pj * std::log(pj / qj);
      }
    }
    if (divergence < best.divergence) {
      best.divergence = divergence;
      best.bins_kept = i;
    }
  }
  if (best.bins_kept == 0) best.bins_kept = n;  // every candidate infinite (cannot happen with data)
  best.threshold =
      static_cast<float>(std::min((best.bins_kept + 0.5) * bin_width, static_cast<double>(amax)));
  return best;
}

// ---- calibrators over the histogram
// ------------------------------------------------------------------------------

namespace detail {
inline ClipRange clip_to(const MinMaxCalibrator& mm, float t) {
  return {std::max(mm.min(), -t), std::min(mm.max(), t)};
}
}  // namespace detail

/// Percentile calibration: amax() = the p-th percentile of |x| (AbsHistogram::percentile; default 99.99).
///   llmk::quant::PercentileCalibrator cal(99.9);
///   for (auto& b : batches) cal.observe(b.data(), b.size());
///   float clip = cal.amax();  ClipRange r = cal.range();   // [max(min, -clip), min(max, clip)]
class PercentileCalibrator : public AbsHistogram {
 public:
  explicit PercentileCalibrator(double percentile = 99.99) : percentile_(percentile) {
    detail::calibration_require(percentile > 0.0 && percentile <= 100.0, "percentile",
                                str_cat("must be in (0, 100], got ", percentile));
  }
  double percentile_rank() const { return percentile_; }
  float amax() const { return percentile(percentile_); }
  ClipRange range() const { return detail::clip_to(minmax(), amax()); }

 private:
  double percentile_;
};

/// KL-divergence (TensorRT "entropy") calibration for activations: amax() = kl_search(...).threshold over the
/// accumulated AbsHistogram with num_quant_bins levels (128 for int8, 8 for int4).
///   llmk::quant::KLCalibrator cal;                  // int8
///   for (auto& b : batches) cal.observe(b.data(), b.size());
///   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerTensor>;
///   llmk::quant::QuantParams p = llmk::quant::to_quant_params<Q>(cal.range());
class KLCalibrator : public AbsHistogram {
 public:
  explicit KLCalibrator(int num_quant_bins = 128) : num_quant_bins_(num_quant_bins) {
    detail::calibration_require(num_quant_bins >= 1 && num_quant_bins <= kBins, "num_quant_bins",
                                str_cat("must be in [1, ", kBins, "], got ", num_quant_bins));
  }
  /// The levels on one side of zero the search assumes (the constructor's).
  int num_quant_bins() const { return num_quant_bins_; }
  /// kl_search() over the histogram observed so far: the threshold with its bin count and divergence
  /// (amax() is its threshold). O(kBins^2 / 2): call once per layer, after the last batch. Never throws.
  ///   const llmk::quant::KLSearchResult r = cal.search();   // r.threshold, r.bins_kept, r.divergence
  KLSearchResult search() const { return kl_search(counts(), bin_width(), num_quant_bins_, minmax().amax()); }
  /// search().threshold (each call searches again).
  float amax() const { return search().threshold; }
  /// [max(min, -amax()), min(max, amax())].
  ClipRange range() const { return detail::clip_to(minmax(), amax()); }

 private:
  int num_quant_bins_;
};

// ---- MSE-optimal clipping search (GPTQ)
// ---------------------------------------------------------------------------

/// Result of mse_clip_search(): the chosen parameters, the shrink factor p and the error at p.
///   const llmk::quant::QuantParams p = llmk::quant::mse_clip_search<Q>(span).params;
struct MseClipResult {
  QuantParams params{1.0f, 0};
  float shrink = 1.0f;  ///< p: the candidate range was [p * min, p * max]
  double error = 0.0;   ///< sum |dequant(quant(x)) - x|^norm over the finite x
};

/// GPTQ's clipping search (Quantizer.find_params with mse=True) for one group of values, with quantizer Q:
///   [min, max] = finite range of x;
///   for i = 0 .. int(maxshrink * grid) - 1:  p = 1 - i / grid (double), pf = float(p),
///     candidate = Q::params_from_range(pf * min, pf * max)   (fp32 products: the reference's p * xmin, a
///                                                               Python float times an fp32 tensor)
///               = Q::params_from_absmax(max(|pf * min|, |pf * max|))   (symmetric, fp8)
///     err = sum over finite x of |Q::dequantize(Q::quantize(x)) - x|^norm  (fp64)
///     keep the candidate when err < best (strict: ties keep the wider range).
/// The defaults are GPTQ's (grid 100, maxshrink 0.8, norm 2.4): p runs from 1.00 down to 0.21. Apply per
/// tensor, per row or per group by passing the corresponding span (mse_clip_search_rows does rows and
/// groups). Cost: int(maxshrink * grid) quantize/dequantize passes over the span.
///   using Q = llmk::quant::Quantizer<llmk::int4_t, llmk::quant::Asymmetric, llmk::quant::GroupWise<128>>;
///   auto r = llmk::quant::mse_clip_search<Q>(std::span<const float>(row + g * 128, 128));
///
/// params_of(lo, hi) may replace to_quant_params<Q>(ClipRange{lo, hi}) as the candidates' rule (a grid rule
/// of the caller's, e.g. llmk::obs::grid_params; Q still quantizes):
///   auto r = llmk::quant::mse_clip_search<Q>(span, 100, 0.8, 2.4,
///                                             [](float lo, float hi) { return my_params(lo, hi); });
///
/// Throws llmk::Error (invalid_argument naming it) for grid < 1, maxshrink outside (0, 1] or norm not finite
/// and > 0.
template <class Q, class T, class ParamsOf>
MseClipResult mse_clip_search(std::span<const T> x, int grid, double maxshrink, double norm,
                              ParamsOf params_of) {
  detail::calibration_require(grid >= 1, "grid", str_cat("must be >= 1, got ", grid));
  detail::calibration_require(maxshrink > 0.0 && maxshrink <= 1.0, "maxshrink",
                              str_cat("must be in (0, 1], got ", maxshrink));
  detail::calibration_require(norm > 0.0 && std::isfinite(norm), "norm", str_cat("must be > 0, got ", norm));
  MinMaxCalibrator mm;
  mm.observe(x.data(), x.size());
  const int steps = std::max(1, static_cast<int>(maxshrink * grid));
  MseClipResult best;
  best.error = std::numeric_limits<double>::infinity();
  for (int i = 0; i < steps; ++i) {
    const double p = 1.0 - static_cast<double>(i) / grid;
    const float pf = static_cast<float>(p), lo = pf * mm.min(), hi = pf * mm.max();
    const QuantParams params = params_of(lo, hi);
    double err = 0.0;
    for (const T& raw : x) {
      const float v = load_as_float(raw);
      if (!is_finite(v)) continue;
      const double d = std::fabs(static_cast<double>(Q::dequantize(Q::quantize(v, params), params)) - v);
      err += norm == 2.0 ? d * d : std::pow(d, norm);
    }
    if (err < best.error) {
      best.error = err;
      best.params = params;
      best.shrink = static_cast<float>(p);
    }
  }
  return best;
}

/// mse_clip_search with Q's own rule for the candidates (to_quant_params<Q>), the defaults GPTQ's (example
/// and errors: the form above).
template <class Q, class T>
MseClipResult mse_clip_search(std::span<const T> x, int grid = 100, double maxshrink = 0.8,
                              double norm = 2.4) {
  return mse_clip_search<Q>(x, grid, maxshrink, norm, [](float lo, float hi) {
    return to_quant_params<Q>(ClipRange{lo, hi});
  });
}

/// Convenience overload for a pointer and a count. Throws llmk::Error (invalid_argument) for a null x with
/// count > 0 ('x'), and as the span form for grid < 1, maxshrink outside (0, 1] or norm not finite and > 0.
///   using Q = llmk::quant::Quantizer<llmk::int4_t, llmk::quant::Asymmetric, llmk::quant::GroupWise<128>>;
///   llmk::quant::MseClipResult r = llmk::quant::mse_clip_search<Q>(w.data() + g * 128, 128);   // group g
template <class Q, class T>
MseClipResult mse_clip_search(const T* x, std::size_t count, int grid = 100, double maxshrink = 0.8,
                              double norm = 2.4) {
  detail::calibration_require(x != nullptr || count == 0, "x", "must not be null when count > 0");
  return mse_clip_search<Q>(std::span<const T>(x, count), grid, maxshrink, norm);
}

/// mse_clip_search over every row (group_size = cols) or every group of group_size consecutive elements of
/// each row of a [rows, cols] view with row stride ld; writes params[rows][cols / group_size] (the
/// scales/zero-point layout of PerChannel / GroupWise).
///   std::vector<QuantParams> p(rows * (cols / 128));
///   llmk::quant::mse_clip_search_rows<Q>(w.data(), rows, cols, cols, 128, p.data());
/// Throws llmk::Error (invalid_argument naming it) for rows or cols < 0, ld < cols, a null x ('data') with a
/// non-empty view, group_size < 1 or not dividing cols, a null params with a non-empty view, and as
/// mse_clip_search.
template <class Q, class T>
void mse_clip_search_rows(const T* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                          std::int64_t group_size, QuantParams* params, int grid = 100,
                          double maxshrink = 0.8, double norm = 2.4) {
  detail::check_view(x, rows, cols, ld);
  detail::calibration_require(group_size >= 1 && (cols == 0 || cols % group_size == 0), "group_size",
                              str_cat("must divide cols (cols=", cols, ", group_size=", group_size, ")"));
  detail::calibration_require(params != nullptr || rows == 0 || cols == 0, "params", "must not be null");
  const std::int64_t groups = cols / group_size;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < groups; ++g)
      params[r * groups + g] = mse_clip_search<Q>(std::span<const T>(x + r * ld + g * group_size,
                                                                     static_cast<std::size_t>(group_size)),
                                                  grid, maxshrink, norm)
                                   .params;
}

}  // namespace llmk::quant

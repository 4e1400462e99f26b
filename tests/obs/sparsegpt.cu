// Tests of llmk/obs/sparsegpt.hpp, llmk/obs/pruning.hpp (Wanda, magnitude) and llmk/obs/sparse_format.hpp
// (n:m compression): SparseGPT < Wanda < magnitude in output error on a layer with correlated inputs and
// outlier channels, exact mask counts, the reported loss, the lazy-batch loop against an fp64 column-loop
// reference with the same rules, joint quantization, odd sizes, rank-deficient calibration, bad arguments.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "llmk/obs/gptq.hpp"
#include "llmk/obs/pruning.hpp"
#include "llmk/obs/sparse_format.hpp"
#include "llmk/obs/sparsegpt.hpp"
#include "llmk/reference/weight_only.hpp"
#include "obs_test_support.hpp"
#include "support/test_env.hpp"

namespace {

using namespace llmk::test::obs;  // Layer, make_layer, output_error, trace_loss, has

// Every row: exactly `zeros` mask zeros; weights are 0 exactly where the mask is 0 (kept weights are random
// floats: 0 only with probability ~0).
void check_row_counts(const std::vector<float>& w, const std::vector<std::uint8_t>& mask, std::int64_t n,
                      std::int64_t k, std::int64_t zeros) {
  REQUIRE(w.size() == static_cast<std::size_t>(n * k));
  REQUIRE(mask.size() == w.size());
  for (std::int64_t r = 0; r < n; ++r) {
    std::int64_t z = 0;
    for (std::int64_t c = 0; c < k; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * k + c);
      CHECK(mask[i] <= 1);
      z += mask[i] == 0;
      CHECK((w[i] == 0.0f) == (mask[i] == 0));
    }
    CHECK(z == zeros);
  }
}

// SparseGPT's reference rule (scope kReference): every block of columns [i1, i2) loses exactly
// llround(sparsity n i2) - llround(sparsity n i1) weights over all its rows; weights are 0 exactly where the
// mask is 0. Returns the per-row counts (they differ between rows: that is the point of the rule).
std::vector<std::int64_t> check_block_counts(const std::vector<float>& w,
                                             const std::vector<std::uint8_t>& mask, std::int64_t n,
                                             std::int64_t k, double sparsity, std::int64_t bs,
                                             bool zero_iff_pruned = true) {
  std::vector<std::int64_t> per_row(static_cast<std::size_t>(n), 0);
  for (std::int64_t i1 = 0; i1 < k; i1 += bs) {
    const std::int64_t i2 = std::min(i1 + bs, k);
    std::int64_t z = 0;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = i1; c < i2; ++c) {
        const std::size_t i = static_cast<std::size_t>(r * k + c);
        if (zero_iff_pruned) CHECK((w[i] == 0.0f) == (mask[i] == 0));
        z += mask[i] == 0;
        per_row[static_cast<std::size_t>(r)] += mask[i] == 0;
      }
    CHECK(z == std::llround(sparsity * static_cast<double>(n * i2)) -
                   std::llround(sparsity * static_cast<double>(n * i1)));
  }
  return per_row;
}

// Every group of m consecutive columns of every row: exactly n mask zeros, weights 0 exactly there.
void check_nm_counts(const std::vector<float>& w, const std::vector<std::uint8_t>& mask, std::int64_t rows,
                     std::int64_t cols, int n, int m) {
  REQUIRE(cols % m == 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols; g += m) {
      int z = 0;
      for (int t = 0; t < m; ++t) {
        const std::size_t i = static_cast<std::size_t>(r * cols + g + t);
        z += mask[i] == 0;
        CHECK((w[i] == 0.0f) == (mask[i] == 0));
      }
      CHECK(z == n);
    }
  CHECK(llmk::obs::check_n_m(mask.data(), rows, cols, cols, n, m).ok());
  CHECK(llmk::obs::check_n_m(w.data(), rows, cols, cols, n, m).ok());
}

// ---- fp64 reference of SparseGPT (no quantization): the unblocked column loop (every update applied to the
// whole rest of the row at once), masks chosen with the library's rules at the starts of blocks of `bs`.

// Upper U with (H + damp I)^-1 = U^T U, fp64 (plain Cholesky, inverse, Cholesky again).
std::vector<double> upper_factor_fp64(const std::vector<float>& h, std::int64_t d, double damp) {
  std::vector<double> a(static_cast<std::size_t>(d * d));
  for (std::int64_t i = 0; i < d * d; ++i) a[static_cast<std::size_t>(i)] = h[static_cast<std::size_t>(i)];
  for (std::int64_t i = 0; i < d; ++i) a[static_cast<std::size_t>(i * d + i)] += damp;
  auto chol = [d](std::vector<double>& m) {  // lower L in place (upper part zeroed), m = L L^T
    for (std::int64_t j = 0; j < d; ++j) {
      double s = m[static_cast<std::size_t>(j * d + j)];
      for (std::int64_t p = 0; p < j; ++p)
        s -= m[static_cast<std::size_t>(j * d + p)] * m[static_cast<std::size_t>(j * d + p)];
      REQUIRE(s > 0.0);
      const double l = std::sqrt(s);
      m[static_cast<std::size_t>(j * d + j)] = l;
      for (std::int64_t i = j + 1; i < d; ++i) {
        double t = m[static_cast<std::size_t>(i * d + j)];
        for (std::int64_t p = 0; p < j; ++p)
          t -= m[static_cast<std::size_t>(i * d + p)] * m[static_cast<std::size_t>(j * d + p)];
        m[static_cast<std::size_t>(i * d + j)] = t / l;
      }
      for (std::int64_t i = 0; i < j; ++i) m[static_cast<std::size_t>(i * d + j)] = 0.0;
    }
  };
  chol(a);
  // Linv = L^-1 (lower), H^-1 = Linv^T Linv
  std::vector<double> li(a.size(), 0.0);
  for (std::int64_t c = 0; c < d; ++c)
    for (std::int64_t i = c; i < d; ++i) {
      double s = i == c ? 1.0 : 0.0;
      for (std::int64_t p = c; p < i; ++p)
        s -= a[static_cast<std::size_t>(i * d + p)] * li[static_cast<std::size_t>(p * d + c)];
      li[static_cast<std::size_t>(i * d + c)] = s / a[static_cast<std::size_t>(i * d + i)];
    }
  std::vector<double> hinv(a.size(), 0.0);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      double s = 0.0;
      for (std::int64_t p = std::max(i, j); p < d; ++p)
        s += li[static_cast<std::size_t>(p * d + i)] * li[static_cast<std::size_t>(p * d + j)];
      hinv[static_cast<std::size_t>(i * d + j)] = s;
    }
  chol(hinv);  // H^-1 = L2 L2^T, U = L2^T
  std::vector<double> u(a.size());
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j)
      u[static_cast<std::size_t>(i * d + j)] = hinv[static_cast<std::size_t>(j * d + i)];
  return u;
}

struct RefOut {
  std::vector<double> w;
  std::vector<std::uint8_t> mask;
};

// per_row: the kPerRow rule; else (unstructured) the reference rule, one candidate set per block of all rows.
RefOut sparsegpt_fp64(const std::vector<float>& w, std::int64_t n, std::int64_t d,
                      const std::vector<double>& u, double sparsity, int pn, int pm, std::int64_t bs,
                      bool per_row = false) {
  RefOut o{std::vector<double>(w.begin(), w.end()), std::vector<std::uint8_t>(w.size(), 1)};
  // The rank rule, written as stated over the candidates (r0 .. r1-1) x (lo .. hi-1), indexed row-major:
  // rank_t = #{u : s_u < s_t or (s_u == s_t and u < t)}.
  auto select = [&](std::int64_t r0, std::int64_t r1, std::int64_t lo, std::int64_t hi, std::int64_t k) {
    std::vector<double> s;
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t t = lo; t < hi; ++t) {
        const double x = o.w[static_cast<std::size_t>(r * d + t)],
                     ut = u[static_cast<std::size_t>(t * d + t)];
        s.push_back(x * x / (ut * ut));
      }
    const std::int64_t cnt = static_cast<std::int64_t>(s.size());
    for (std::int64_t t = 0; t < cnt; ++t) {
      std::int64_t rank = 0;
      for (std::int64_t v = 0; v < cnt; ++v)
        rank += s[static_cast<std::size_t>(v)] < s[static_cast<std::size_t>(t)] ||
                (s[static_cast<std::size_t>(v)] == s[static_cast<std::size_t>(t)] && v < t);
      if (rank < k) o.mask[static_cast<std::size_t>((r0 + t / (hi - lo)) * d + lo + t % (hi - lo))] = 0;
    }
  };
  auto cum = [&](std::int64_t x) { return std::llround(sparsity * static_cast<double>(x)); };
  for (std::int64_t i1 = 0; i1 < d; i1 += bs) {
    const std::int64_t i2 = std::min(i1 + bs, d);
    if (pn == 0 && !per_row) select(0, n, i1, i2, cum(n * i2) - cum(n * i1));
    for (std::int64_t r = 0; r < n; ++r) {
      if (pn == 0 && per_row) select(r, r + 1, i1, i2, cum(i2) - cum(i1));
      for (std::int64_t j = i1; j < i2; ++j) {
        if (pn > 0 && (j - i1) % pm == 0) select(r, r + 1, j, j + pm, pn);
        double* wr = o.w.data() + r * d;
        const double q = o.mask[static_cast<std::size_t>(r * d + j)] ? wr[j] : 0.0;
        const double e = (wr[j] - q) / u[static_cast<std::size_t>(j * d + j)];
        for (std::int64_t t = j + 1; t < d; ++t) wr[t] -= e * u[static_cast<std::size_t>(j * d + t)];
        wr[j] = q;
      }
    }
  }
  return o;
}

// Compares the library's result with the fp64 reference: rows whose masks agree must agree in weights within
// tol * max|w|; near-ties of the fp32 and fp64 scores may flip a mask decision, allowed in <= max_rows rows.
void compare_with_reference(const llmk::obs::SparseGptResult& got, const RefOut& ref, std::int64_t n,
                            std::int64_t d, double tol, std::int64_t max_rows) {
  double wmax = 0.0;
  for (double v : ref.w) wmax = std::max(wmax, std::fabs(v));
  std::int64_t rows_differ = 0;
  double worst = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    bool same = true;
    for (std::int64_t c = 0; c < d; ++c)
      same = same &&
             got.mask[static_cast<std::size_t>(r * d + c)] == ref.mask[static_cast<std::size_t>(r * d + c)];
    if (!same) {
      ++rows_differ;
      continue;
    }
    for (std::int64_t c = 0; c < d; ++c)
      worst = std::max(worst, std::fabs(got.weights[static_cast<std::size_t>(r * d + c)] -
                                        ref.w[static_cast<std::size_t>(r * d + c)]));
  }
  MESSAGE("vs fp64 reference: rows with a different mask ", rows_differ, " of ", n, ", max |dw| ", worst,
          " (max |w| ", wmax, ")");
  CHECK(rows_differ <= max_rows);
  CHECK(worst <= tol * wmax);
}

}  // namespace

TEST_CASE("sparsegpt: output error SparseGPT < Wanda < magnitude at 50% unstructured and 2:4") {
  const std::int64_t n = llmk::test::pick<std::int64_t>(64, 32), k = llmk::test::pick<std::int64_t>(128, 64);
  const Layer l = make_layer(n, k, 4 * k, 7);
  llmk::obs::HostLapackBackend la;
  struct Pattern {
    double sparsity;
    int pn, pm;
  };
  for (const Pattern p : {Pattern{0.5, 0, 0}, Pattern{0.5, 2, 4}}) {
    CAPTURE(p.pn);
    llmk::obs::SparseGptOptions so;
    so.sparsity = p.sparsity;
    so.prune_n = p.pn;
    so.prune_m = p.pm;
    llmk::obs::SparseGptResult sg;
    const llmk::Status s1 = llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg);
    REQUIRE_MESSAGE(s1.ok(), s1.message());
    const llmk::obs::PruneOptions po{p.sparsity, p.pn, p.pm};
    llmk::obs::PruneResult wa, mg;
    REQUIRE(llmk::obs::wanda_prune(l.w.data(), n, k, k, l.h.data(), k, po, &la, &wa).ok());
    REQUIRE(llmk::obs::magnitude_prune(l.w.data(), n, k, k, l.h.data(), k, po, &la, &mg).ok());
    const double e_sg = output_error(l, sg.weights), e_wa = output_error(l, wa.weights),
                 e_mg = output_error(l, mg.weights);
    MESSAGE(std::string(p.pn == 0 ? "50% unstructured" : "2:4"), ": ||WX - W'X||^2 sparsegpt ", e_sg,
            ", wanda ", e_wa, ", magnitude ", e_mg);
    CHECK(e_sg < e_wa);
    CHECK(e_wa < e_mg);
    // loss = ||(W - W') X||^2 / samples for every method
    const double ns = static_cast<double>(l.samples);
    CHECK(sg.loss == doctest::Approx(e_sg / ns).epsilon(1e-3));
    CHECK(wa.loss == doctest::Approx(e_wa / ns).epsilon(1e-3));
    CHECK(mg.loss == doctest::Approx(e_mg / ns).epsilon(1e-3));
    CHECK(sg.timings.inverse_s > 0.0);
    CHECK(sg.timings.column_loop_s > 0.0);
  }
}

TEST_CASE(
    "sparsegpt: exact mask counts (per block of rows / per row, 2:4 and 4:8 per group); baselines rank") {
  const std::int64_t n = 24, k = 64;
  const Layer l = make_layer(n, k, 2 * k, 13);
  llmk::obs::HostLapackBackend la;
  for (double sparsity : {0.5, 0.3, 0.75}) {
    CAPTURE(sparsity);
    const std::int64_t zeros = std::llround(sparsity * static_cast<double>(k));
    for (std::int64_t bs : {std::int64_t{7}, std::int64_t{16}, std::int64_t{128}}) {
      CAPTURE(bs);
      llmk::obs::SparseGptOptions so;
      so.sparsity = sparsity;
      so.block_size = bs;
      llmk::obs::SparseGptResult sg;
      REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
      CHECK(sg.block_size == std::min<std::int64_t>(bs, k));
      const std::vector<std::int64_t> per_row =
          check_block_counts(sg.weights, sg.mask, n, k, sparsity, sg.block_size);
      CHECK(*std::max_element(per_row.begin(), per_row.end()) >
            *std::min_element(per_row.begin(), per_row.end()));  // rows give unequal counts
      so.scope = llmk::obs::PruneScope::kPerRow;
      REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
      check_row_counts(sg.weights, sg.mask, n, k, zeros);
    }
    llmk::obs::PruneOptions po{sparsity, 0, 0};
    llmk::obs::PruneResult wa, mg, mg_layer;
    REQUIRE(llmk::obs::wanda_prune(l.w.data(), n, k, k, l.h.data(), k, po, nullptr, &wa).ok());
    // magnitude's default ranks the whole layer: exactly llround(sparsity n k), the lowest |w| of the layer
    REQUIRE(llmk::obs::magnitude_prune(l.w.data(), n, k, k, nullptr, 0, po, nullptr, &mg_layer).ok());
    CHECK(std::count(mg_layer.mask.begin(), mg_layer.mask.end(), 0) ==
          std::llround(sparsity * static_cast<double>(n * k)));
    {
      double pruned_max = 0.0, kept_min = 1e30;
      for (std::size_t i = 0; i < l.w.size(); ++i) {
        const double a = std::fabs(static_cast<double>(l.w[i]));
        CHECK((mg_layer.weights[i] == 0.0f) == (mg_layer.mask[i] == 0));
        if (mg_layer.mask[i])
          kept_min = std::min(kept_min, a);
        else
          pruned_max = std::max(pruned_max, a);
      }
      CHECK(pruned_max <= kept_min);
    }
    po.scope = llmk::obs::PruneScope::kPerRow;
    REQUIRE(llmk::obs::magnitude_prune(l.w.data(), n, k, k, nullptr, 0, po, nullptr, &mg).ok());
    check_row_counts(wa.weights, wa.mask, n, k, zeros);
    check_row_counts(mg.weights, mg.mask, n, k, zeros);
    // Wanda per layer (an option): the layer count, lowest scores of the layer
    po.scope = llmk::obs::PruneScope::kPerLayer;
    llmk::obs::PruneResult wa_layer;
    REQUIRE(llmk::obs::wanda_prune(l.w.data(), n, k, k, l.h.data(), k, po, nullptr, &wa_layer).ok());
    CHECK(std::count(wa_layer.mask.begin(), wa_layer.mask.end(), 0) ==
          std::llround(sparsity * static_cast<double>(n * k)));
    CHECK(!mg.has_loss);
    CHECK(wa.has_loss);
    // the pruned ones are the lowest scores of their row; kept weights are untouched
    for (std::int64_t r = 0; r < n; ++r) {
      double wa_pruned = 0.0, wa_kept = 1e30, mg_pruned = 0.0, mg_kept = 1e30;
      for (std::int64_t c = 0; c < k; ++c) {
        const std::size_t i = static_cast<std::size_t>(r * k + c);
        const double a = std::fabs(static_cast<double>(l.w[i]));
        const double sw = a * std::sqrt(static_cast<double>(l.h[static_cast<std::size_t>(c * k + c)]));
        if (wa.mask[i]) {
          wa_kept = std::min(wa_kept, sw);
          CHECK(wa.weights[i] == l.w[i]);
        } else {
          wa_pruned = std::max(wa_pruned, sw);
        }
        if (mg.mask[i]) {
          mg_kept = std::min(mg_kept, a);
          CHECK(mg.weights[i] == l.w[i]);
        } else {
          mg_pruned = std::max(mg_pruned, a);
        }
      }
      CHECK(wa_pruned <= wa_kept);
      CHECK(mg_pruned <= mg_kept);
    }
  }
  for (const auto& [pn, pm] : {std::pair{2, 4}, std::pair{4, 8}}) {
    CAPTURE(pm);
    for (std::int64_t bs : {std::int64_t{4}, std::int64_t{13}, std::int64_t{128}}) {
      CAPTURE(bs);
      llmk::obs::SparseGptOptions so;
      so.prune_n = pn;
      so.prune_m = pm;
      so.block_size = bs;
      llmk::obs::SparseGptResult sg;
      REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
      const std::int64_t want_bs = std::max<std::int64_t>(pm, std::min<std::int64_t>(bs, k) / pm * pm);
      CHECK(sg.block_size == want_bs);
      check_nm_counts(sg.weights, sg.mask, n, k, pn, pm);
    }
    const llmk::obs::PruneOptions po{0.5, pn, pm};
    llmk::obs::PruneResult wa, mg;
    REQUIRE(llmk::obs::wanda_prune(l.w.data(), n, k, k, l.h.data(), k, po, &la, &wa).ok());
    REQUIRE(llmk::obs::magnitude_prune(l.w.data(), n, k, k, nullptr, 0, po, nullptr, &mg).ok());
    check_nm_counts(wa.weights, wa.mask, n, k, pn, pm);
    check_nm_counts(mg.weights, mg.mask, n, k, pn, pm);
  }
}

TEST_CASE("sparsegpt: loss = 1/2 tr(E H E^T); lazy batches equal the fp64 column loop with the same rules") {
  const std::int64_t n = llmk::test::pick<std::int64_t>(32, 12), k = llmk::test::pick<std::int64_t>(128, 48);
  const Layer l = make_layer(n, k, 3 * k, 17);
  llmk::obs::HostLapackBackend la;
  struct Case {
    double sparsity;
    int pn, pm;
    std::int64_t bs;
    bool per_row = false;
  };
  // Unstructured: the block partition decides the per-block prune counts, so the reference uses the same
  // block starts (bs = cols is the unblocked loop); n:m masks do not depend on bs at all.
  for (const Case c : {Case{0.5, 0, 0, 5}, Case{0.5, 0, 0, 32}, Case{0.5, 0, 0, 32, true}, Case{0.6, 0, 0, k},
                       Case{0.5, 2, 4, 16}, Case{0.5, 2, 4, k}, Case{0.5, 4, 8, 24}}) {
    CAPTURE(c.pn);
    CAPTURE(c.bs);
    llmk::obs::SparseGptOptions so;
    so.sparsity = c.sparsity;
    so.prune_n = c.pn;
    so.prune_m = c.pm;
    so.block_size = c.bs;
    so.scope = c.per_row ? llmk::obs::PruneScope::kPerRow : llmk::obs::PruneScope::kReference;
    llmk::obs::SparseGptResult sg;
    REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
    const double want = trace_loss(l.w, sg.weights, l.h, n, k);
    CHECK(sg.loss == doctest::Approx(want).epsilon(1e-3));
    // the saliency sum is the objective with the damped Hessian: loss + damp / 2 ||W - W'||^2
    double sq = 0.0;
    for (std::size_t i = 0; i < l.w.size(); ++i)
      sq += std::pow(static_cast<double>(l.w[i]) - sg.weights[i], 2);
    CHECK(sg.loss_estimate == doctest::Approx(sg.loss + 0.5 * sg.damping.damp * sq).epsilon(1e-3));
    CHECK(sg.damping.retries == 0);
    const std::vector<double> u = upper_factor_fp64(l.h, k, sg.damping.damp);
    const RefOut ref = sparsegpt_fp64(l.w, n, k, u, c.sparsity, c.pn, c.pm, sg.block_size, c.per_row);
    compare_with_reference(sg, ref, n, k, 1e-4, n / 16 + 1);
  }
  // Baseline losses: fp64 over the pruned entries (la = nullptr) and through the backend's GEMM.
  const llmk::obs::PruneOptions po{0.5, 0, 0};
  llmk::obs::PruneResult a, b;
  REQUIRE(llmk::obs::wanda_prune(l.w.data(), n, k, k, l.h.data(), k, po, nullptr, &a).ok());
  REQUIRE(llmk::obs::wanda_prune(l.w.data(), n, k, k, l.h.data(), k, po, &la, &b).ok());
  const double want = trace_loss(l.w, a.weights, l.h, n, k);
  CHECK(a.loss == doctest::Approx(want).epsilon(1e-9));
  CHECK(b.loss == doctest::Approx(want).epsilon(1e-3));
  CHECK(a.mask == b.mask);
}

TEST_CASE("sparsegpt: sparsity 0 without quantization returns W exactly (padded leading dims)") {
  const std::int64_t n = 5, k = 24, ldw = k + 3, ldh = k + 2;
  const Layer l = make_layer(n, k, 3 * k, 19);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> w(static_cast<std::size_t>(n * ldw), nan), h(static_cast<std::size_t>(k * ldh), nan);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      w[static_cast<std::size_t>(r * ldw + c)] = l.w[static_cast<std::size_t>(r * k + c)];
  for (std::int64_t r = 0; r < k; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      h[static_cast<std::size_t>(r * ldh + c)] = l.h[static_cast<std::size_t>(r * k + c)];
  llmk::obs::HostLapackBackend la;
  for (std::int64_t bs : {std::int64_t{5}, std::int64_t{128}}) {
    llmk::obs::SparseGptOptions so;
    so.sparsity = 0.0;
    so.block_size = bs;
    llmk::obs::SparseGptResult sg;
    sg.weights.assign(static_cast<std::size_t>(n * k), nan);  // poisoned: everything must be overwritten
    const llmk::Status s = llmk::obs::sparsegpt_prune(w.data(), n, k, ldw, h.data(), ldh, so, la, &sg);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(sg.weights == l.w);
    CHECK(std::count(sg.mask.begin(), sg.mask.end(), 1) == n * k);
    CHECK(sg.loss == 0.0);
    CHECK(sg.loss_estimate == 0.0);
    CHECK(sg.quantized.rows == 0);
  }
  // the padded layout gives the same result as the dense one at 50%
  llmk::obs::SparseGptOptions so;
  so.block_size = 8;
  llmk::obs::SparseGptResult padded, dense;
  REQUIRE(llmk::obs::sparsegpt_prune(w.data(), n, k, ldw, h.data(), ldh, so, la, &padded).ok());
  REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &dense).ok());
  CHECK(padded.weights == dense.weights);
  CHECK(padded.mask == dense.mask);
  llmk::obs::PruneResult mp;
  REQUIRE(llmk::obs::magnitude_prune(w.data(), n, k, ldw, h.data(), ldh, {0.5, 0, 0}, nullptr, &mp).ok());
  CHECK(mp.loss == doctest::Approx(trace_loss(l.w, mp.weights, l.h, n, k)).epsilon(1e-9));
}

TEST_CASE("sparsegpt: joint 50% + 4-bit: kept weights on their grid, pruned = zero point, GEMM format") {
  const std::int64_t n = 16, k = 64;
  const Layer l = make_layer(n, k, 3 * k, 23);
  llmk::obs::HostLapackBackend la;
  struct Case {
    bool sym;
    std::int64_t g, bs;
    int pn, pm;
  };
  for (const Case c : {Case{true, 0, 128, 0, 0}, Case{false, 32, 16, 0, 0}, Case{true, 16, 24, 2, 4},
                       Case{false, 0, 8, 2, 4}}) {
    CAPTURE(c.sym);
    CAPTURE(c.g);
    CAPTURE(c.pn);
    llmk::obs::SparseGptOptions so;
    so.bits = 4;
    so.symmetric = c.sym;
    so.group_size = c.g;
    so.block_size = c.bs;
    so.prune_n = c.pn;
    so.prune_m = c.pm;
    llmk::obs::SparseGptResult sg;
    const llmk::Status s = llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg);
    REQUIRE_MESSAGE(s.ok(), s.message());
    const llmk::obs::QuantizedLayer& q = sg.quantized;
    const std::int64_t G = c.g == 0 ? k : c.g;
    REQUIRE(q.rows == n);
    REQUIRE(q.cols == k);
    CHECK(q.bits == 4);
    CHECK(q.group_size == G);
    CHECK(q.groups == k / G);
    REQUIRE(q.codes.size() == static_cast<std::size_t>(n * k));
    REQUIRE(q.scales.size() == static_cast<std::size_t>(q.groups * n));
    CHECK(q.dequantized == sg.weights);
    CHECK(q.loss == sg.loss);
    std::int64_t kept_zero = 0;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t col = 0; col < k; ++col) {
        const std::size_t i = static_cast<std::size_t>(r * k + col);
        const std::size_t gi = static_cast<std::size_t>((col / G) * n + r);
        CHECK(q.g_idx[static_cast<std::size_t>(col)] == col / G);
        CHECK(q.codes[i] < 16);
        const float deq =
            static_cast<float>(static_cast<int>(q.codes[i]) - static_cast<int>(q.zeros[gi])) * q.scales[gi];
        CHECK(deq == sg.weights[i]);
        if (!sg.mask[i]) {
          CHECK(q.codes[i] == q.zeros[gi]);
          CHECK(sg.weights[i] == 0.0f);
        } else {
          kept_zero += sg.weights[i] == 0.0f;  // a kept weight may round to the zero point
        }
      }
    if (c.sym)
      for (std::uint8_t z : q.zeros) CHECK(z == 8);
    if (c.pn == 0) {
      check_block_counts(sg.weights, sg.mask, n, k, 0.5, sg.block_size, /*zero_iff_pruned=*/false);
    } else {
      CHECK(llmk::obs::check_n_m(sg.mask.data(), n, k, k, c.pn, c.pm).ok());
    }
    MESSAGE("kept weights quantized to 0: ", kept_zero, " of ", n * k / 2, "; loss ", sg.loss);
    std::vector<std::uint8_t> plain;
    REQUIRE(llmk::obs::pack_plain_codes(q, &plain).ok());
    std::vector<float> deq(static_cast<std::size_t>(n * k), std::numeric_limits<float>::quiet_NaN());
    llmk::reference::weight_only_dequantize(plain.data(), k / 2, 4, q.scales.data(), q.zeros.data(),
                                            q.g_idx.data(), static_cast<int>(G), static_cast<int>(n),
                                            static_cast<int>(k), deq.data());
    CHECK(deq == sg.weights);
    CHECK(sg.loss == doctest::Approx(trace_loss(l.w, sg.weights, l.h, n, k)).epsilon(1e-3));
    // joint quantization costs more than pruning alone; n:m: the block size (the n:m masks do not depend on
    // it; groups crossing blocks get the pending update) changes codes only by fp32 rounding
    llmk::obs::SparseGptOptions plain_opt = so;
    plain_opt.bits = 0;
    plain_opt.group_size = 0;
    llmk::obs::SparseGptResult pruned_only;
    REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, plain_opt, la, &pruned_only).ok());
    CHECK(pruned_only.loss < sg.loss);
    if (c.pn == 0) continue;  // unstructured: the block partition decides the per-block prune counts
    // The current-weights group grids (GroupGrid::kCurrent): the default takes a group's grid from W as its
    // block began, so there the block partition is part of the answer.
    so.group_grid = llmk::obs::GroupGrid::kCurrent;
    REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
    so.block_size = k;
    llmk::obs::SparseGptResult unblocked;
    REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &unblocked).ok());
    std::int64_t differ = 0;
    for (std::size_t i = 0; i < q.codes.size(); ++i) differ += q.codes[i] != unblocked.quantized.codes[i];
    MESSAGE("codes differing between block sizes ", c.bs, " and ", k, ": ", differ);
    CHECK(differ <= static_cast<std::int64_t>(q.codes.size()) / 100);
    CHECK(unblocked.loss == doctest::Approx(sg.loss).epsilon(2e-3));  // as GPTQ's (measured: 1.2e-7)
  }
}

TEST_CASE("sparsegpt: odd sizes (1 x 17 at 0.3 with block 5, 3:7 on 21 columns, 7 x 13 at 0.5)") {
  llmk::obs::HostLapackBackend la;
  {
    const Layer l = make_layer(1, 17, 40, 29);
    llmk::obs::SparseGptOptions so;
    so.sparsity = 0.3;
    so.block_size = 5;
    llmk::obs::SparseGptResult sg;
    REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), 1, 17, 17, l.h.data(), 17, so, la, &sg).ok());
    check_row_counts(sg.weights, sg.mask, 1, 17, 5);  // llround(5.1)
    // cumulative rounding per block of 5: llround(0.3 i2) - llround(0.3 i1) = 2, 1, 2, 0 (ends 5, 10, 15, 17)
    const int want[] = {2, 1, 2, 0};
    for (int b = 0; b < 4; ++b)
      CHECK(std::count(sg.mask.begin() + 5 * b, sg.mask.begin() + std::min(5 * b + 5, 17), 0) == want[b]);
    const RefOut ref = sparsegpt_fp64(l.w, 1, 17, upper_factor_fp64(l.h, 17, sg.damping.damp), 0.3, 0, 0, 5);
    compare_with_reference(sg, ref, 1, 17, 1e-5, 0);
  }
  {
    const std::int64_t n = 3, k = 21;
    const Layer l = make_layer(n, k, 50, 31);
    for (std::int64_t bs : {std::int64_t{3}, std::int64_t{10}, std::int64_t{20}, std::int64_t{64}}) {
      CAPTURE(bs);
      llmk::obs::SparseGptOptions so;
      so.prune_n = 3;
      so.prune_m = 7;
      so.block_size = bs;
      llmk::obs::SparseGptResult sg;
      REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
      CHECK(sg.block_size == (bs >= k ? 21 : bs >= 14 ? 14 : 7));
      check_nm_counts(sg.weights, sg.mask, n, k, 3, 7);
      const RefOut ref =
          sparsegpt_fp64(l.w, n, k, upper_factor_fp64(l.h, k, sg.damping.damp), 0.5, 3, 7, sg.block_size);
      compare_with_reference(sg, ref, n, k, 1e-5, 0);
    }
    llmk::obs::PruneResult wa;
    REQUIRE(llmk::obs::wanda_prune(l.w.data(), n, k, k, l.h.data(), k, {0.5, 3, 7}, nullptr, &wa).ok());
    check_nm_counts(wa.weights, wa.mask, n, k, 3, 7);
  }
  {
    const std::int64_t n = 7, k = 13;
    const Layer l = make_layer(n, k, 30, 37);
    llmk::obs::SparseGptOptions so;
    so.block_size = 4;
    llmk::obs::SparseGptResult sg;
    REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
    check_block_counts(sg.weights, sg.mask, n, k, 0.5, 4);  // per block: llround(0.5 * 7 * i2) differences
    so.scope = llmk::obs::PruneScope::kPerRow;
    REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
    check_row_counts(sg.weights, sg.mask, n, k, 7);  // llround(6.5) = 7 (half away from zero)
    llmk::obs::PruneResult mg;
    REQUIRE(llmk::obs::magnitude_prune(l.w.data(), n, k, k, nullptr, 0, {0.5, 0, 0}, nullptr, &mg).ok());
    CHECK(std::count(mg.mask.begin(), mg.mask.end(), 0) == 46);  // per layer: llround(45.5)
    llmk::obs::PruneOptions per_row{0.5, 0, 0};
    per_row.scope = llmk::obs::PruneScope::kPerRow;
    REQUIRE(llmk::obs::magnitude_prune(l.w.data(), n, k, k, nullptr, 0, per_row, nullptr, &mg).ok());
    check_row_counts(mg.weights, mg.mask, n, k, 6);  // the baselines' per-row count: int(6.5) = 6, as Wanda
  }
}

TEST_CASE("sparsegpt: rank-deficient calibration data completes with the damping retry and finite weights") {
  const std::int64_t n = 6, k = 32;
  const Layer base = make_layer(n, k, 8, 41);  // 8 samples < 32 columns
  std::vector<float> x = base.x;
  for (std::int64_t s = 0; s < base.samples; ++s) {
    x[static_cast<std::size_t>(s * k + 5)] = x[static_cast<std::size_t>(s * k + 4)];  // duplicated column
    x[static_cast<std::size_t>(s * k + 9)] = 0.0f;                                    // dead column
  }
  llmk::obs::HessianAccumulator acc(k);
  REQUIRE(acc.add_batch(x.data(), base.samples, k).ok());
  const std::vector<float> h = acc.hessian();
  llmk::obs::HostLapackBackend la;
  for (double percdamp : {0.0, 0.01}) {
    CAPTURE(percdamp);
    for (int pn : {0, 2}) {
      for (int bits : {0, 4}) {
        CAPTURE(pn);
        CAPTURE(bits);
        llmk::obs::SparseGptOptions so;
        so.damping.percdamp = percdamp;
        so.prune_n = pn;
        so.prune_m = pn ? 4 : 0;
        so.bits = bits;
        so.group_size = bits ? 8 : 0;
        so.block_size = 12;
        llmk::obs::SparseGptResult sg;
        const llmk::Status s = llmk::obs::sparsegpt_prune(base.w.data(), n, k, k, h.data(), k, so, la, &sg);
        REQUIRE_MESSAGE(s.ok(), s.message());
        CHECK(sg.damping.dead_columns == 1);
        if (percdamp == 0.0) CHECK(sg.damping.retries >= 1);
        CHECK(sg.damping.percdamp > 0.0);
        for (float v : sg.weights) CHECK(std::isfinite(v));
        for (std::int64_t r = 0; r < n; ++r) CHECK(sg.weights[static_cast<std::size_t>(r * k + 9)] == 0.0f);
        CHECK(std::isfinite(sg.loss));
        CHECK(std::isfinite(sg.loss_estimate));
        if (pn) {
          CHECK(llmk::obs::check_n_m(sg.mask.data(), n, k, k, 2, 4).ok());
        } else {
          CHECK(std::count(sg.mask.begin(), sg.mask.end(), 0) == n * k / 2);
        }
      }
    }
  }
}

TEST_CASE("sparsegpt / wanda / magnitude: bad arguments name the argument") {
  const std::int64_t n = 4, k = 16;
  std::vector<float> w(static_cast<std::size_t>(n * k)), h(static_cast<std::size_t>(k * k), 0.0f);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (float& v : w) v = nd(rng);
  for (std::int64_t i = 0; i < k; ++i)
    h[static_cast<std::size_t>(i * k + i)] = 1.0f + 0.1f * static_cast<float>(i);
  llmk::obs::HostLapackBackend la;
  llmk::obs::SparseGptResult out;
  auto run = [&](llmk::obs::SparseGptOptions o, std::int64_t rows = 4, std::int64_t cols = 16,
                 std::int64_t ldw = 16, std::int64_t ldh = 16) {
    return llmk::obs::sparsegpt_prune(w.data(), rows, cols, ldw, h.data(), ldh, o, la, &out);
  };
  llmk::obs::SparseGptOptions o;
  REQUIRE(run(o).ok());
  for (double sp : {-0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    o = {};
    o.sparsity = sp;
    CHECK(has(run(o), "sparsity"));
  }
  o = {};
  o.prune_n = 4;
  o.prune_m = 4;  // n >= m
  CHECK(has(run(o), "prune_m"));
  o.prune_n = 5;
  CHECK(has(run(o), "prune_m"));
  o.prune_n = 2;
  o.prune_m = 3;  // 16 % 3 != 0
  CHECK(has(run(o), "prune_m"));
  o.prune_n = 0;
  o.prune_m = 4;
  CHECK(has(run(o), "prune_n"));
  o.prune_n = -1;
  CHECK(has(run(o), "prune_n"));
  o = {};
  o.count = static_cast<llmk::obs::PruneCount>(2);
  CHECK(has(run(o), "count"));
  o = {};
  o.bits = 4;
  o.symmetric_grid = static_cast<llmk::obs::SymmetricGrid>(9);
  CHECK(has(run(o), "symmetric_grid"));
  o = {};
  o.dead_column_grid = static_cast<llmk::obs::DeadColumnGrid>(9);
  CHECK(has(run(o), "dead_column_grid"));
  o = {};
  o.block_size = 0;
  CHECK(has(run(o), "block_size"));
  o = {};
  o.bits = 5;
  CHECK(has(run(o), "bits"));
  o.bits = 1;
  CHECK(has(run(o), "bits"));
  o = {};
  o.bits = 4;
  o.group_size = 5;
  CHECK(has(run(o), "group_size"));
  o = {};
  o.group_size = 8;  // without bits
  CHECK(has(run(o), "group_size"));
  o = {};
  o.bits = 4;
  o.mse_clip = true;
  o.mse_grid = 0;
  CHECK(has(run(o), "mse_grid"));
  o.mse_grid = 100;
  o.mse_norm = std::numeric_limits<double>::infinity();
  CHECK(has(run(o), "mse_norm"));
  o = {};
  o.damping.percdamp = -1.0;
  CHECK(has(run(o), "percdamp"));
  o = {};
  o.damping.damp_growth = 1.0;
  CHECK(has(run(o), "damp_growth"));
  o = {};
  o.damping.max_retries = -1;
  CHECK(has(run(o), "max_retries"));
  o = {};
  CHECK(has(run(o, 0), "rows"));
  CHECK(has(run(o, 4, 0), "cols"));
  CHECK(has(run(o, 4, 16, 8), "ldw"));
  CHECK(has(run(o, 4, 16, 16, 8), "ldh"));
  CHECK(has(llmk::obs::sparsegpt_prune(nullptr, n, k, k, h.data(), k, o, la, &out), "w"));
  CHECK(has(llmk::obs::sparsegpt_prune(w.data(), n, k, k, nullptr, k, o, la, &out), "h"));
  CHECK(has(llmk::obs::sparsegpt_prune(w.data(), n, k, k, h.data(), k, o, la, nullptr), "out"));
  w[7] = std::numeric_limits<float>::infinity();
  CHECK(has(run(o), "w"));
  w[7] = 0.25f;
  h[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(has(run(o), "h"));
  h[3] = 0.0f;
  REQUIRE(run(o).ok());

  llmk::obs::PruneResult pr;
  const llmk::obs::PruneOptions ok{0.5, 0, 0};
  CHECK(llmk::obs::wanda_prune(w.data(), n, k, k, h.data(), k, ok, nullptr, &pr).ok());
  CHECK(has(llmk::obs::wanda_prune(w.data(), n, k, k, nullptr, k, ok, nullptr, &pr), "h"));
  CHECK(has(llmk::obs::wanda_prune(w.data(), n, k, k, h.data(), k, {1.0, 0, 0}, nullptr, &pr), "sparsity"));
  CHECK(has(llmk::obs::wanda_prune(w.data(), n, k, k, h.data(), k, {0.5, 2, 2}, nullptr, &pr), "prune_m"));
  CHECK(has(llmk::obs::wanda_prune(w.data(), n, k, k, h.data(), k, ok, nullptr, nullptr), "out"));
  CHECK(has(llmk::obs::wanda_prune(w.data(), n, k, 8, h.data(), k, ok, nullptr, &pr), "ldw"));
  CHECK(has(llmk::obs::magnitude_prune(nullptr, n, k, k, nullptr, 0, ok, nullptr, &pr), "w"));
  CHECK(has(llmk::obs::magnitude_prune(w.data(), 0, k, k, nullptr, 0, ok, nullptr, &pr), "rows"));
  CHECK(has(llmk::obs::magnitude_prune(w.data(), n, k, k - 1, nullptr, 0, ok, nullptr, &pr), "ldw"));
  CHECK(has(llmk::obs::magnitude_prune(w.data(), n, k, k, h.data(), 3, ok, nullptr, &pr), "ldh"));
  CHECK(has(llmk::obs::magnitude_prune(w.data(), n, k, k, nullptr, 0, {std::nan(""), 0, 0}, nullptr, &pr),
            "sparsity"));
  CHECK(has(llmk::obs::magnitude_prune(w.data(), n, k, k, nullptr, 0, {0.5, 3, 6}, nullptr, &pr), "prune_m"));
  // Non-finite inputs are rejected by name (the host entries; pruning_gpu.cu checks the GPU ones).
  w[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK(has(llmk::obs::wanda_prune(w.data(), n, k, k, h.data(), k, ok, nullptr, &pr), "w"));
  CHECK(has(llmk::obs::magnitude_prune(w.data(), n, k, k, nullptr, 0, ok, nullptr, &pr), "w"));
  w[5] = -std::numeric_limits<float>::infinity();
  CHECK(has(llmk::obs::magnitude_prune(w.data(), n, k, k, nullptr, 0, ok, nullptr, &pr), "w"));
  w[5] = 0.5f;
  h[2 * k + 2] = std::numeric_limits<float>::infinity();  // a diagonal entry: Wanda's score reads it
  CHECK(has(llmk::obs::wanda_prune(w.data(), n, k, k, h.data(), k, ok, nullptr, &pr), "h"));
  h[2 * k + 2] = 1.2f;
  CHECK(llmk::obs::wanda_prune(w.data(), n, k, k, h.data(), k, ok, nullptr, &pr).ok());
}

TEST_CASE("n:m format: 2:4 and 4:8 compress / decompress round trip; groups short of zeros are rejected") {
  const std::int64_t n = 9, k = 48;
  const Layer l = make_layer(n, k, 2 * k, 43);
  llmk::obs::HostLapackBackend la;
  llmk::obs::SparseGptOptions so;
  so.prune_n = 2;
  so.prune_m = 4;
  llmk::obs::SparseGptResult sg;
  REQUIRE(llmk::obs::sparsegpt_prune(l.w.data(), n, k, k, l.h.data(), k, so, la, &sg).ok());
  llmk::obs::NmCompressed c;
  REQUIRE(llmk::obs::compress_n_m(sg.weights.data(), n, k, k, 2, 4, &c).ok());
  CHECK(c.ld == k / 2);
  REQUIRE(c.values.size() == static_cast<std::size_t>(n * k / 2));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t g = 0; g < k / 4; ++g)
      for (int s = 0; s < 2; ++s) {
        const std::size_t i = static_cast<std::size_t>(r * c.ld + g * 2 + s);
        CHECK(c.index[i] < 4);
        CHECK(c.values[i] == sg.weights[static_cast<std::size_t>(r * k + g * 4 + c.index[i])]);
        CHECK(sg.mask[static_cast<std::size_t>(r * k + g * 4 + c.index[i])] == 1);
        if (s == 1) CHECK(c.index[i] > c.index[i - 1]);
      }
  const std::int64_t ld = k + 5;  // padded output, poisoned
  std::vector<float> back(static_cast<std::size_t>(n * ld), std::numeric_limits<float>::quiet_NaN());
  REQUIRE(llmk::obs::decompress_n_m(c, back.data(), ld).ok());
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t col = 0; col < k; ++col)
      CHECK(back[static_cast<std::size_t>(r * ld + col)] ==
            sg.weights[static_cast<std::size_t>(r * k + col)]);
  for (std::int64_t r = 0; r < n; ++r)
    CHECK(std::isnan(back[static_cast<std::size_t>(r * ld + k)]));  // untouched

  // 4:8 with groups holding more than n zeros (the padding slots) and a padded input
  std::mt19937 rng(47);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> extra(4, 8);
  const std::int64_t rows = 3, cols = 24, ldw = 26;
  std::vector<float> w(static_cast<std::size_t>(rows * ldw), std::numeric_limits<float>::quiet_NaN());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols / 8; ++g) {
      std::vector<int> pos{0, 1, 2, 3, 4, 5, 6, 7};
      std::shuffle(pos.begin(), pos.end(), rng);
      const int zeros = extra(rng);
      for (int t = 0; t < 8; ++t)
        w[static_cast<std::size_t>(r * ldw + g * 8 + pos[static_cast<std::size_t>(t)])] =
            t < zeros ? 0.0f : nd(rng) + 3.0f;
    }
  w[static_cast<std::size_t>(1 * ldw + 9)] = -0.0f;  // negative zero counts as a zero (it may already be one)
  REQUIRE(llmk::obs::check_n_m(w.data(), rows, cols, ldw, 4, 8).ok());
  llmk::obs::NmCompressed c8;
  REQUIRE(llmk::obs::compress_n_m(w.data(), rows, cols, ldw, 4, 8, &c8).ok());
  CHECK(c8.ld == 12);
  std::vector<float> back8(static_cast<std::size_t>(rows * cols), 1.0f);
  REQUIRE(llmk::obs::decompress_n_m(c8, back8.data(), cols).ok());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t col = 0; col < cols; ++col)
      CHECK(back8[static_cast<std::size_t>(r * cols + col)] == w[static_cast<std::size_t>(r * ldw + col)]);

  // a 2:4 group with only one zero is rejected, naming w; nothing written
  std::vector<float> bad = sg.weights;
  for (std::int64_t t = 0; t < 4; ++t)
    if (bad[static_cast<std::size_t>(2 * k + 20 + t)] == 0.0f) {
      bad[static_cast<std::size_t>(2 * k + 20 + t)] = 1.0f;
      break;
    }
  llmk::obs::NmCompressed untouched;
  const llmk::Status s = llmk::obs::compress_n_m(bad.data(), n, k, k, 2, 4, &untouched);
  CHECK(has(s, "w"));
  CHECK(s.message().find("row 2") != std::string::npos);
  CHECK(untouched.values.empty());
  CHECK(has(llmk::obs::check_n_m(bad.data(), n, k, k, 2, 4), "w"));
  std::vector<std::uint8_t> mask = sg.mask;
  mask[static_cast<std::size_t>(5 * k + 8)] = mask[static_cast<std::size_t>(5 * k + 9)] =
      mask[static_cast<std::size_t>(5 * k + 10)] = mask[static_cast<std::size_t>(5 * k + 11)] = 1;
  CHECK(has(llmk::obs::check_n_m(mask.data(), n, k, k, 2, 4), "mask"));
  // argument errors
  CHECK(has(llmk::obs::compress_n_m(sg.weights.data(), n, k, k, 2, 4, nullptr), "out"));
  CHECK(has(llmk::obs::compress_n_m(sg.weights.data(), n, k, k, 4, 4, &untouched), "n"));
  CHECK(has(llmk::obs::compress_n_m(sg.weights.data(), n, k, k, 2, 5, &untouched), "m"));
  CHECK(has(llmk::obs::compress_n_m(sg.weights.data(), n, k, k, 2, 300, &untouched), "m"));
  CHECK(has(llmk::obs::compress_n_m(sg.weights.data(), n, k, k - 1, 2, 4, &untouched), "ld"));
  CHECK(has(llmk::obs::compress_n_m(nullptr, n, k, k, 2, 4, &untouched), "w"));
  llmk::obs::NmCompressed broken = c;
  broken.index[3] = broken.index[2];  // not strictly increasing within its group
  CHECK(has(llmk::obs::decompress_n_m(broken, back.data(), ld), "c"));
  broken = c;
  broken.index[0] = 4;
  CHECK(has(llmk::obs::decompress_n_m(broken, back.data(), ld), "c"));
  broken = c;
  broken.values.pop_back();
  CHECK(has(llmk::obs::decompress_n_m(broken, back.data(), ld), "c"));
  CHECK(has(llmk::obs::decompress_n_m(c, nullptr, ld), "w"));
  CHECK(has(llmk::obs::decompress_n_m(c, back.data(), k - 1), "ld"));
}

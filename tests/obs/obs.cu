// Tests of llmk/obs/linalg.hpp (host LAPACK/BLAS backend) and llmk/obs/obs.hpp (OBS pruning against the
// brute-force constrained least squares, damping retry).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "llmk/obs/obs.hpp"
#include "support/test_env.hpp"

namespace {

// H = (2/n) X X^T from n random samples of d correlated features (n >= d: positive definite).
std::vector<float> random_hessian(std::int64_t d, std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n * d));
  for (std::int64_t s = 0; s < n; ++s) {
    double common = nd(rng);
    for (std::int64_t i = 0; i < d; ++i) x[static_cast<std::size_t>(s * d + i)] = nd(rng) + 0.5 * common;
  }
  std::vector<float> h(static_cast<std::size_t>(d * d));
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      double a = 0.0;
      for (std::int64_t s = 0; s < n; ++s)
        a += x[static_cast<std::size_t>(s * d + i)] * x[static_cast<std::size_t>(s * d + j)];
      h[static_cast<std::size_t>(i * d + j)] = static_cast<float>(2.0 * a / n);
    }
  return h;
}

// Solves A x = b (fp64, Gaussian elimination with partial pivoting), A [m, m].
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const std::size_t m = b.size();
  for (std::size_t k = 0; k < m; ++k) {
    std::size_t p = k;
    for (std::size_t i = k + 1; i < m; ++i)
      if (std::fabs(a[i * m + k]) > std::fabs(a[p * m + k])) p = i;
    for (std::size_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[p * m + j]);
    std::swap(b[k], b[p]);
    for (std::size_t i = k + 1; i < m; ++i) {
      const double f = a[i * m + k] / a[k * m + k];
      for (std::size_t j = k; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
      b[i] -= f * b[k];
    }
  }
  std::vector<double> x(m);
  for (std::size_t i = m; i-- > 0;) {
    double s = b[i];
    for (std::size_t j = i + 1; j < m; ++j) s -= a[i * m + j] * x[j];
    x[i] = s / a[i * m + i];
  }
  return x;
}

// Brute force: min over dw with w'_S = 0 (S = pruned set) of 1/2 dw H dw^T, solved directly: the free part
// F minimizes 1/2 (w' - w) H (w' - w)^T with w'_S = 0  =>  H_FF w'_F = H_F: w (the normal equations).
// Returns the error and fills w_new.
double brute_force(const std::vector<float>& h, const std::vector<double>& w, const std::vector<int>& pruned,
                   std::vector<double>& w_new) {
  const std::size_t d = w.size();
  std::vector<std::size_t> free;
  for (std::size_t i = 0; i < d; ++i)
    if (std::find(pruned.begin(), pruned.end(), static_cast<int>(i)) == pruned.end()) free.push_back(i);
  const std::size_t m = free.size();
  std::vector<double> a(m * m), b(m);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < m; ++j) a[i * m + j] = h[free[i] * d + free[j]];
    double s = 0.0;
    for (std::size_t k = 0; k < d; ++k) s += h[free[i] * d + k] * w[k];
    b[i] = s;
  }
  const std::vector<double> wf = m > 0 ? solve(a, b) : std::vector<double>{};
  w_new.assign(d, 0.0);
  for (std::size_t i = 0; i < m; ++i) w_new[free[i]] = wf[i];
  double e = 0.0;
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = 0; j < d; ++j) e += (w_new[i] - w[i]) * h[i * d + j] * (w_new[j] - w[j]);
  return 0.5 * e;
}

bool has(const llmk::Status& s, const char* arg) {
  return !s.ok() && s.message().find(std::string("'") + arg + "'") != std::string::npos;
}

}  // namespace

TEST_CASE("linalg: host LAPACK backend (Cholesky, inverse, triangular solve/inverse, GEMM) row-major") {
  std::mt19937 rng(1);
  const std::int64_t d = 9;
  const std::vector<float> h = random_hessian(d, 40, rng);
  llmk::obs::HostLapackBackend la;
  std::int64_t failed = -1;
  // lower Cholesky: L L^T == H
  std::vector<float> l = h;
  REQUIRE(la.cholesky(llmk::obs::Uplo::kLower, d, l.data(), d, &failed).ok());
  REQUIRE(failed == 0);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (std::int64_t k = 0; k <= j; ++k) s += static_cast<double>(l[i * d + k]) * l[j * d + k];
      CHECK(s == doctest::Approx(h[i * d + j]).epsilon(1e-4));
    }
  // inverse: H H^-1 == I via the backend GEMM
  std::vector<float> inv = l, prod(static_cast<std::size_t>(d * d));
  REQUIRE(la.cholesky_inverse(llmk::obs::Uplo::kLower, d, inv.data(), d, &failed).ok());
  REQUIRE(la.gemm(llmk::obs::Op::kNone, llmk::obs::Op::kNone, d, d, d, 1.0f, h.data(), d, inv.data(), d, 0.0f,
                  prod.data(), d)
              .ok());
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) CHECK(std::fabs(prod[i * d + j] - (i == j ? 1.0f : 0.0f)) < 1e-3);
  // transposed GEMM operands: C = A^T B^T with A [3, 2], B [4, 3]
  std::vector<float> A = {1, 2, 3, 4, 5, 6}, B = {1, 0, 2, 0, 1, 1, 3, 1, 0, 2, 2, 2}, C(8);
  REQUIRE(la.gemm(llmk::obs::Op::kTranspose, llmk::obs::Op::kTranspose, 2, 4, 3, 1.0f, A.data(), 2, B.data(),
                  3, 0.0f, C.data(), 4)
              .ok());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      float s = 0.0f;
      for (int k = 0; k < 3; ++k) s += A[k * 2 + i] * B[j * 3 + k];
      CHECK(C[i * 4 + j] == doctest::Approx(s));
    }
  // triangular solve L X = B, L^T X = B and triangular inverse
  std::vector<float> b(static_cast<std::size_t>(d * 2)), x;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2.0f;
  for (auto op : {llmk::obs::Op::kNone, llmk::obs::Op::kTranspose}) {
    x = b;
    REQUIRE(la.triangular_solve(llmk::obs::Uplo::kLower, op, d, 2, l.data(), d, x.data(), 2).ok());
    for (std::int64_t i = 0; i < d; ++i)
      for (int c = 0; c < 2; ++c) {
        double s = 0.0;
        for (std::int64_t k = 0; k < d; ++k) {
          const bool in = op == llmk::obs::Op::kNone ? k <= i : k >= i;
          const float t = op == llmk::obs::Op::kNone ? l[i * d + k] : l[k * d + i];
          if (in) s += static_cast<double>(t) * x[k * 2 + c];
        }
        CHECK(s == doctest::Approx(b[i * 2 + c]).epsilon(1e-3).scale(1.0));
      }
  }
  std::vector<float> linv = l;
  REQUIRE(la.triangular_inverse(llmk::obs::Uplo::kLower, d, linv.data(), d, &failed).ok());
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (std::int64_t k = j; k <= i; ++k) s += static_cast<double>(l[i * d + k]) * linv[k * d + j];
      CHECK(std::fabs(s - (i == j ? 1.0 : 0.0)) < 1e-3);
    }
  // not positive definite: reported through `failed`, not as an error
  std::vector<float> bad = {1, 2, 2, 1};
  REQUIRE(la.cholesky(llmk::obs::Uplo::kLower, 2, bad.data(), 2, &failed).ok());
  CHECK(failed == 2);
  CHECK(has(la.cholesky(llmk::obs::Uplo::kLower, 2, bad.data(), 1, &failed), "lda"));
  CHECK(has(la.gemm(llmk::obs::Op::kNone, llmk::obs::Op::kNone, 2, 2, 2, 1.0f, A.data(), 1, B.data(), 2, 0.0f,
                    C.data(), 2),
            "lda"));
}

TEST_CASE("linalg: both triangles, every GEMM transpose, padded leading dimensions") {
  using llmk::obs::Op;
  using llmk::obs::Uplo;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const std::int64_t d = 7, ld = 10;  // padding columns hold a sentinel that must survive every call
  const float sentinel = -777.0f;
  const std::vector<float> h = random_hessian(d, 30, rng);
  llmk::obs::HostLapackBackend la;
  auto padded = [&](const std::vector<float>& dense) {
    std::vector<float> p(static_cast<std::size_t>(d * ld), sentinel);
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t j = 0; j < d; ++j)
        p[static_cast<std::size_t>(i * ld + j)] = dense[static_cast<std::size_t>(i * d + j)];
    return p;
  };
  auto padding_intact = [&](const std::vector<float>& p) {
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t j = d; j < ld; ++j)
        if (p[static_cast<std::size_t>(i * ld + j)] != sentinel) return false;
    return true;
  };
  for (Uplo uplo : {Uplo::kLower, Uplo::kUpper}) {
    CAPTURE(uplo == Uplo::kLower);
    const bool lower = uplo == Uplo::kLower;
    auto in_tri = [&](std::int64_t i, std::int64_t j) { return lower ? j <= i : j >= i; };
    std::int64_t failed = -1;
    std::vector<float> f = padded(h);
    REQUIRE(la.cholesky(uplo, d, f.data(), ld, &failed).ok());
    REQUIRE(failed == 0);
    CHECK(padding_intact(f));
    auto fac = [&](std::int64_t i, std::int64_t j) {  // the factor F with H = F F^T (lower) or F^T F (upper)
      return in_tri(i, j) ? static_cast<double>(f[static_cast<std::size_t>(i * ld + j)]) : 0.0;
    };
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t j = 0; j < d; ++j) {
        double s = 0.0;
        for (std::int64_t k = 0; k < d; ++k) s += lower ? fac(i, k) * fac(j, k) : fac(k, i) * fac(k, j);
        CHECK(s == doctest::Approx(h[static_cast<std::size_t>(i * d + j)]).epsilon(1e-4).scale(1.0));
        if (!in_tri(i, j))  // the other triangle is left as it was
          CHECK(f[static_cast<std::size_t>(i * ld + j)] == h[static_cast<std::size_t>(i * d + j)]);
      }
    // triangular solve with the factor, both ops: op(F) X = B
    std::vector<float> b(static_cast<std::size_t>(d * 5), sentinel), x;
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t c = 0; c < 3; ++c) b[static_cast<std::size_t>(i * 5 + c)] = u(rng);
    for (Op op : {Op::kNone, Op::kTranspose}) {
      x = b;
      REQUIRE(la.triangular_solve(uplo, op, d, 3, f.data(), ld, x.data(), 5).ok());
      for (std::int64_t i = 0; i < d; ++i) {
        for (std::int64_t c = 0; c < 3; ++c) {
          double s = 0.0;
          for (std::int64_t k = 0; k < d; ++k)
            s += (op == Op::kNone ? fac(i, k) : fac(k, i)) * x[static_cast<std::size_t>(k * 5 + c)];
          CHECK(s == doctest::Approx(b[static_cast<std::size_t>(i * 5 + c)]).epsilon(1e-3).scale(1.0));
        }
        for (std::int64_t c = 3; c < 5; ++c) CHECK(x[static_cast<std::size_t>(i * 5 + c)] == sentinel);
      }
    }
    // triangular inverse of the factor
    std::vector<float> t = f;
    REQUIRE(la.triangular_inverse(uplo, d, t.data(), ld, &failed).ok());
    REQUIRE(failed == 0);
    CHECK(padding_intact(t));
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t j = 0; j < d; ++j) {
        double s = 0.0;
        for (std::int64_t k = 0; k < d; ++k)
          s +=
              fac(i, k) * (in_tri(k, j) ? static_cast<double>(t[static_cast<std::size_t>(k * ld + j)]) : 0.0);
        CHECK(std::fabs(s - (i == j ? 1.0 : 0.0)) < 1e-3);
        if (!in_tri(i, j))
          CHECK(t[static_cast<std::size_t>(i * ld + j)] == f[static_cast<std::size_t>(i * ld + j)]);
      }
    // Cholesky inverse: both triangles of H^-1
    std::vector<float> inv = f;
    REQUIRE(la.cholesky_inverse(uplo, d, inv.data(), ld, &failed).ok());
    REQUIRE(failed == 0);
    CHECK(padding_intact(inv));
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t j = 0; j < d; ++j) {
        double s = 0.0;
        for (std::int64_t k = 0; k < d; ++k)
          s += static_cast<double>(h[static_cast<std::size_t>(i * d + k)]) *
               inv[static_cast<std::size_t>(k * ld + j)];
        CHECK(std::fabs(s - (i == j ? 1.0 : 0.0)) < 1e-3);
      }
  }
  // GEMM: every transpose pair, padded lda / ldb / ldc, beta accumulating into C
  const std::int64_t m = 3, n = 5, k = 4;
  for (Op oa : {Op::kNone, Op::kTranspose})
    for (Op ob : {Op::kNone, Op::kTranspose}) {
      CAPTURE(oa == Op::kNone);
      CAPTURE(ob == Op::kNone);
      const std::int64_t a_rows = oa == Op::kNone ? m : k, a_cols = oa == Op::kNone ? k : m;
      const std::int64_t b_rows = ob == Op::kNone ? k : n, b_cols = ob == Op::kNone ? n : k;
      const std::int64_t lda = a_cols + 2, ldb = b_cols + 3, ldc = n + 1;
      std::vector<float> a(static_cast<std::size_t>(a_rows * lda)), b(static_cast<std::size_t>(b_rows * ldb)),
          c(static_cast<std::size_t>(m * ldc));
      for (float& v : a) v = u(rng);
      for (float& v : b) v = u(rng);
      for (float& v : c) v = u(rng);
      const std::vector<float> c0 = c;
      REQUIRE(la.gemm(oa, ob, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, 0.5f, c.data(), ldc).ok());
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0.0;
          for (std::int64_t t = 0; t < k; ++t) {
            const double av = oa == Op::kNone ? a[static_cast<std::size_t>(i * lda + t)]
                                              : a[static_cast<std::size_t>(t * lda + i)];
            const double bv = ob == Op::kNone ? b[static_cast<std::size_t>(t * ldb + j)]
                                              : b[static_cast<std::size_t>(j * ldb + t)];
            s += av * bv;
          }
          const double want = 1.5 * s + 0.5 * c0[static_cast<std::size_t>(i * ldc + j)];
          CHECK(c[static_cast<std::size_t>(i * ldc + j)] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
        }
        CHECK(c[static_cast<std::size_t>(i * ldc + n)] ==
              c0[static_cast<std::size_t>(i * ldc + n)]);  // padding
      }
    }
}

TEST_CASE("obs: one prune is the brute-force optimum and its saliency is the error") {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  llmk::obs::HostLapackBackend la;
  for (std::int64_t d = 2; d <= 8; ++d) {
    const std::vector<float> h = random_hessian(d, 3 * d, rng);
    const std::int64_t rows = 3;
    std::vector<float> w(static_cast<std::size_t>(rows * d));
    for (float& v : w) v = nd(rng);
    llmk::obs::ObsPruneOptions opt;
    opt.prune_per_row = 1;
    opt.damping.percdamp = 0.0;  // the exact H, as the brute force uses
    llmk::obs::ObsPruneResult res;
    llmk::Status s = llmk::obs::obs_prune(w.data(), rows, d, d, h.data(), d, opt, la, &res);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(res.damping.retries == 0);
    double total = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<double> wr(w.begin() + r * d, w.begin() + (r + 1) * d), best_w, cand;
      double best = 1e300;
      int best_q = -1;
      for (int q = 0; q < d; ++q) {
        const double e = brute_force(h, wr, {q}, cand);
        if (e < best) {
          best = e;
          best_q = q;
          best_w = cand;
        }
      }
      total += best;
      CHECK(res.mask[static_cast<std::size_t>(r * d + best_q)] == 0);
      CHECK(res.row_loss[static_cast<std::size_t>(r)] == doctest::Approx(best).epsilon(1e-3).scale(1e-6));
      for (std::int64_t c = 0; c < d; ++c)
        CHECK(res.weights[static_cast<std::size_t>(r * d + c)] ==
              doctest::Approx(best_w[c]).epsilon(1e-3).scale(1e-4));
      CHECK(res.weights[static_cast<std::size_t>(r * d + best_q)] == 0.0f);
    }
    CHECK(res.loss == doctest::Approx(total).epsilon(1e-3).scale(1e-6));
  }
}

TEST_CASE("obs: several prunes: the saliency sum equals the constrained optimum for the chosen set") {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  llmk::obs::HostLapackBackend la;
  const std::int64_t d = 8, rows = 4;
  const std::vector<float> h = random_hessian(d, 30, rng);
  std::vector<float> w(static_cast<std::size_t>(rows * d));
  for (float& v : w) v = nd(rng);
  for (std::int64_t k : {2, 4, 7}) {
    llmk::obs::ObsPruneOptions opt;
    opt.prune_per_row = k;
    opt.damping.percdamp = 0.0;
    llmk::obs::ObsPruneResult res;
    REQUIRE(llmk::obs::obs_prune(w.data(), rows, d, d, h.data(), d, opt, la, &res).ok());
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<int> pruned;
      for (int c = 0; c < d; ++c)
        if (!res.mask[static_cast<std::size_t>(r * d + c)]) pruned.push_back(c);
      REQUIRE(static_cast<std::int64_t>(pruned.size()) == k);
      std::vector<double> wr(w.begin() + r * d, w.begin() + (r + 1) * d), opt_w;
      const double e = brute_force(h, wr, pruned, opt_w);
      CHECK(res.row_loss[static_cast<std::size_t>(r)] == doctest::Approx(e).epsilon(2e-3).scale(1e-6));
      for (std::int64_t c = 0; c < d; ++c)
        CHECK(res.weights[static_cast<std::size_t>(r * d + c)] ==
              doctest::Approx(opt_w[c]).epsilon(2e-3).scale(1e-4));
    }
  }
}

TEST_CASE("obs: the public OBS step (obs_update, obs_downdate) on a 3 x 3 inverse; bad arguments named") {
  // H^-1 = [[2, 1, 0], [1, 2, 1], [0, 1, 2]] (positive definite), w = (1, -2, 3): prune q = 1.
  std::vector<double> hinv = {2, 1, 0, 1, 2, 1, 0, 1, 2}, w = {1, -2, 3};
  double loss = -1.0;
  REQUIRE(llmk::obs::obs_update(w.data(), 3, hinv.data(), 3, 1, 0.0, &loss).ok());
  CHECK(loss == doctest::Approx(1.0));  // (0 - -2)^2 / (2 * 2)
  CHECK(w[0] == doctest::Approx(2.0));  // w + (2 / 2) H^-1[1, :] = (2, 0, 4)
  CHECK(w[1] == 0.0);
  CHECK(w[2] == doctest::Approx(4.0));
  REQUIRE(llmk::obs::obs_downdate(hinv.data(), 3, 3, 1).ok());
  CHECK(hinv[0] == doctest::Approx(1.5));  // 2 - 1 * 1 / 2
  CHECK(hinv[2] == doctest::Approx(-0.5));
  CHECK(hinv[1] == 0.0);
  CHECK(hinv[4] == 0.0);
  auto named = [](const llmk::Status& s, const char* arg) {
    CHECK(!s.ok());
    CHECK_MESSAGE(s.message().find(arg) != std::string::npos, s.message());
  };
  const std::vector<double> keep = w;
  named(llmk::obs::obs_update<double>(nullptr, 3, hinv.data(), 3, 0), "'w'");
  named(llmk::obs::obs_update<double>(w.data(), 3, nullptr, 3, 0), "'hinv'");
  named(llmk::obs::obs_update(w.data(), 0, hinv.data(), 3, 0), "'d'");
  named(llmk::obs::obs_update(w.data(), 3, hinv.data(), 2, 0), "'ldh'");
  named(llmk::obs::obs_update(w.data(), 3, hinv.data(), 3, 3), "'q'");
  named(llmk::obs::obs_update(w.data(), 3, hinv.data(), 3, 1), "'hinv'");  // row 1 was downdated: 0 pivot
  named(llmk::obs::obs_downdate(hinv.data(), 3, 3, -1), "'q'");
  named(llmk::obs::obs_downdate(hinv.data(), 3, 3, 1), "'hinv'");
  CHECK(w == keep);  // nothing changed on error
}

TEST_CASE("obs: damped inverse retries a singular Hessian and reports it; bad arguments") {
  llmk::obs::HostLapackBackend la;
  // rank 1: H = 2 x x^T
  const std::int64_t d = 4;
  std::vector<float> h(16);
  const float x[4] = {1, 2, -1, 0.5f};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) h[i * 4 + j] = 2 * x[i] * x[j];
  std::vector<float> inv;
  llmk::obs::DampingReport rep;
  llmk::obs::DampingOptions opt;
  opt.percdamp = 0.0;
  llmk::Status s =
      llmk::obs::damped_inverse(h.data(), d, d, opt, llmk::obs::InverseForm::kFull, la, &inv, &rep);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(rep.retries >= 1);
  CHECK(rep.percdamp > 0.0);
  for (float v : inv) CHECK(std::isfinite(v));
  // every attempt fails: an error, no output
  opt.max_retries = 0;
  s = llmk::obs::damped_inverse(h.data(), d, d, opt, llmk::obs::InverseForm::kFull, la, &inv, &rep);
  CHECK(has(s, "h"));
  CHECK(inv.empty());
  opt = {};
  opt.damp_growth = 1.0;
  CHECK(has(llmk::obs::damped_inverse(h.data(), d, d, opt, llmk::obs::InverseForm::kFull, la, &inv, &rep),
            "damp_growth"));

  std::vector<float> w(8, 1.0f);
  llmk::obs::ObsPruneResult res;
  llmk::obs::ObsPruneOptions po;
  po.prune_per_row = 5;
  CHECK(has(llmk::obs::obs_prune(w.data(), 2, 4, 4, h.data(), 4, po, la, &res), "prune_per_row"));
  po.prune_per_row = 1;
  CHECK(has(llmk::obs::obs_prune(w.data(), 2, 4, 3, h.data(), 4, po, la, &res), "ldw"));
  CHECK(has(llmk::obs::obs_prune(w.data(), 2, 4, 4, h.data(), 3, po, la, &res), "ldh"));
  CHECK(has(llmk::obs::obs_prune(w.data(), 0, 4, 4, h.data(), 4, po, la, &res), "rows"));
  CHECK(has(llmk::obs::obs_prune(nullptr, 2, 4, 4, h.data(), 4, po, la, &res), "w"));
  CHECK(has(llmk::obs::obs_prune(w.data(), 2, 4, 4, h.data(), 4, po, la, nullptr), "out"));
  w[3] = std::nanf("");
  CHECK(has(llmk::obs::obs_prune(w.data(), 2, 4, 4, h.data(), 4, po, la, &res), "w"));
}

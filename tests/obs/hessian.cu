// Tests of llmk/obs/hessian.cuh: the running-average Hessian (host fp64, the SIMT kernel and the tensor-core
// kernel, in the simulator and on a GPU), the kernel dispatch rule, dead columns and dampening; and
// linalg_cuda.cuh's mirror_triangle kernel.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/linalg_cuda.cuh"
#include "support/test_env.hpp"

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_batch(std::int64_t rows, std::int64_t ld, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * ld));
  for (float& v : x) v = nd(rng);
  return x;
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "fp32";
  if constexpr (std::is_same_v<T, llmk::half>) return "fp16";
  return "bf16";
}

template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return T(v);
}

template <class T>
double to_double(T v) {
  return static_cast<double>(llmk::quant::load_as_float(v));
}

// One streamed-batch case: batches of `batch_rows` rows of X [rows, d] with row stride ldx (columns d..ldx
// are NaN: no kernel may read them), stored `offset` elements into their device buffer (to misalign x). The
// kernel's H [d, ldh] starts as NaN (samples == 0 must not read it); its padding columns hold 123.
template <class T>
void check_streamed(std::int64_t d, std::int64_t ldx, std::int64_t offset,
                    const std::vector<std::int64_t>& batch_rows, llmk::obs::HessianKernel expected,
                    std::mt19937& rng) {
  const std::string type = type_name<T>();
  CAPTURE(type);
  CAPTURE(d);
  CAPTURE(ldx);
  CAPTURE(offset);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<T>> xs;
  for (std::int64_t r : batch_rows) {
    std::vector<T> x(static_cast<std::size_t>(offset + r * ldx), from_float<T>(kNaN));
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t c = 0; c < d; ++c)
        x[static_cast<std::size_t>(offset + i * ldx + c)] = from_float<T>(nd(rng));
    xs.push_back(std::move(x));
  }
  // fp64 reference over all rows (of the values as stored), and S_ij = sum |x_i x_j| for the error bound.
  const std::size_t dd = static_cast<std::size_t>(d * d);
  std::vector<double> want(dd, 0.0), mag(dd, 0.0);
  std::int64_t total = 0, r_max = 0;
  for (std::size_t b = 0; b < xs.size(); ++b) {
    total += batch_rows[b];
    r_max = std::max(r_max, batch_rows[b]);
    for (std::int64_t r = 0; r < batch_rows[b]; ++r)
      for (std::int64_t i = 0; i < d; ++i)
        for (std::int64_t j = 0; j < d; ++j) {
          const double p = to_double(xs[b][static_cast<std::size_t>(offset + r * ldx + i)]) *
                           to_double(xs[b][static_cast<std::size_t>(offset + r * ldx + j)]);
          want[static_cast<std::size_t>(i * d + j)] += p;
          mag[static_cast<std::size_t>(i * d + j)] += std::fabs(p);
        }
  }
  for (std::size_t e = 0; e < dd; ++e) {
    want[e] *= 2.0 / static_cast<double>(total);
    mag[e] *= 2.0 / static_cast<double>(total);
  }

  const std::int64_t ldh = d + 3;
  llmk::DeviceBuffer<float> dh(static_cast<std::size_t>(d * ldh));
  std::vector<float> h0(static_cast<std::size_t>(d * ldh), kNaN);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t c = d; c < ldh; ++c) h0[static_cast<std::size_t>(i * ldh + c)] = 123.0f;
  dh.upload(h0);
  std::int64_t n = 0;
  for (std::size_t b = 0; b < xs.size(); ++b) {
    llmk::DeviceBuffer<T> dx(xs[b]);
    const T* x = dx.data() + offset;
    CHECK(llmk::obs::hessian_update_kernel_for(x, ldx) == expected);
    const llmk::Status s = llmk::obs::hessian_update(dh.data(), d, ldh, n, x, batch_rows[b], ldx, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    n += batch_rows[b];
  }
  REQUIRE(llmk::device_synchronize().ok());
  const std::vector<float> hk = dh.to_host();
  // fp32 accumulation: each batch's sums carry <= r 2^-23 S_ij (2 ulps a step: GPU tensor cores may
  // truncate), the running average 3 roundings per batch; relative to the fp64 value's scale (2/n) S_ij.
  const double steps = static_cast<double>(r_max) + 3.0 * static_cast<double>(xs.size());
  int bad = 0;
  for (std::int64_t i = 0; i < d; ++i) {
    for (std::int64_t c = d; c < ldh; ++c) CHECK(hk[static_cast<std::size_t>(i * ldh + c)] == 123.0f);
    for (std::int64_t j = 0; j < d; ++j) {
      const double w = want[static_cast<std::size_t>(i * d + j)];
      const double tol = mag[static_cast<std::size_t>(i * d + j)] * steps * std::ldexp(1.0, -22) + 1e-30;
      const float got = hk[static_cast<std::size_t>(i * ldh + j)];
      if (!(std::fabs(got - w) <= tol) && bad++ < 5)
        FAIL_CHECK("H[" << i << ", " << j << "] = " << got << ", want " << w << " +- " << tol);
      if (got != hk[static_cast<std::size_t>(j * ldh + i)] && bad++ < 5)
        FAIL_CHECK("H not symmetric at [" << i << ", " << j << "]");
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("hessian: streamed fp32 batches equal (2/n) X^T X of all rows, host and SIMT kernel") {
  std::mt19937 rng(7);
  for (std::int64_t d :
       {std::int64_t{1}, std::int64_t{7}, std::int64_t{17}, llmk::test::pick<std::int64_t>(40, 20)}) {
    const std::int64_t ldx = d + 3;
    const std::vector<std::int64_t> batches = {5, 1, 16, 23};
    std::vector<std::vector<float>> xs;
    for (std::int64_t r : batches) xs.push_back(random_batch(r, ldx, rng));
    // fp64 reference over all rows
    std::vector<double> want(static_cast<std::size_t>(d * d), 0.0);
    std::int64_t total = 0;
    for (std::size_t b = 0; b < xs.size(); ++b) {
      total += batches[b];
      for (std::int64_t r = 0; r < batches[b]; ++r)
        for (std::int64_t i = 0; i < d; ++i)
          for (std::int64_t j = 0; j < d; ++j)
            want[static_cast<std::size_t>(i * d + j)] +=
                static_cast<double>(xs[b][r * ldx + i]) * xs[b][r * ldx + j];
    }
    for (double& v : want) v *= 2.0 / static_cast<double>(total);

    llmk::obs::HessianAccumulator acc(d);
    for (std::size_t b = 0; b < xs.size(); ++b) REQUIRE(acc.add_batch(xs[b].data(), batches[b], ldx).ok());
    CHECK(acc.samples() == total);

    const std::int64_t ldh = d + 1;
    llmk::DeviceBuffer<float> dh(static_cast<std::size_t>(d * ldh));
    std::vector<float> h0(static_cast<std::size_t>(d * ldh), kNaN);  // samples == 0: not read
    for (std::int64_t i = 0; i < d; ++i) h0[static_cast<std::size_t>(i * ldh + d)] = 123.0f;  // padding
    dh.upload(h0);
    std::int64_t n = 0;
    for (std::size_t b = 0; b < xs.size(); ++b) {
      llmk::DeviceBuffer<float> dx(xs[b]);
      CHECK(llmk::obs::hessian_update_kernel_for(dx.data(), ldx) == llmk::obs::HessianKernel::kSimt);
      const llmk::Status s =
          llmk::obs::hessian_update(dh.data(), d, ldh, n, dx.data(), batches[b], ldx, nullptr);
      REQUIRE_MESSAGE(s.ok(), s.message());
      n += batches[b];
    }
    const std::vector<float> hk = dh.to_host();
    for (std::int64_t i = 0; i < d; ++i) {
      CHECK(hk[static_cast<std::size_t>(i * ldh + d)] == 123.0f);
      for (std::int64_t j = 0; j < d; ++j) {
        const double w = want[static_cast<std::size_t>(i * d + j)];
        // host: fp64 per batch, one fp32 rounding per batch (4 batches) -> a few ulps of the running value
        CHECK(std::fabs(acc.hessian()[static_cast<std::size_t>(i * d + j)] - w) <=
              1e-5 * (std::fabs(w) + 2.0));
        // kernel: fp32 accumulation over <= 23 rows of |x_i x_j| ~ 1 per batch -> <= 1e-4 relative to the
        // scale
        CHECK(std::fabs(hk[static_cast<std::size_t>(i * ldh + j)] - w) <= 1e-4 * (std::fabs(w) + 2.0));
        CHECK(hk[static_cast<std::size_t>(i * ldh + j)] == hk[static_cast<std::size_t>(j * ldh + i)]);
      }
    }
  }
}

TEST_CASE("hessian: the host version does not read H on the first batch") {
  const std::int64_t d = 5, rows = 3;
  std::mt19937 rng(3);
  const std::vector<float> x = random_batch(rows, d, rng);
  std::vector<float> h(static_cast<std::size_t>(d * d), kNaN);
  REQUIRE(llmk::obs::hessian_update_host(h.data(), d, d, 0, x.data(), rows, d).ok());
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      double want = 0.0;
      for (std::int64_t r = 0; r < rows; ++r)
        want += static_cast<double>(x[static_cast<std::size_t>(r * d + i)]) *
                x[static_cast<std::size_t>(r * d + j)];
      want *= 2.0 / rows;
      CHECK(h[static_cast<std::size_t>(i * d + j)] == doctest::Approx(want).epsilon(1e-6));
    }
}

TEST_CASE("hessian: tensor-core kernel, fp16 and bf16, odd d and rows, several batches") {
  std::mt19937 rng(11);
  // Rows 1 .. 200 (a partial mma k16 step, exactly one, a partial 32-row slice, several slices) as five
  // batches of one layer; d from one column to two 128-wide tiles plus a tail (off-diagonal tiles).
  const std::vector<std::int64_t> rows = {1, 15, 16, 33, llmk::test::pick<std::int64_t>(200, 40)};
  std::vector<std::int64_t> dims = {1, 7, 16, 17, 63, 65, 130};
  if (!llmk::test::fast()) dims.push_back(257);  // three tile rows: two off-diagonal tiles per row
  for (std::int64_t d : dims) {
    // ldx: a multiple of 8 (the tensor-core rule), == d when d allows it, > d otherwise (and always for odd
    // d: 8 more columns of NaN padding).
    const std::int64_t ldx = (d + 7) / 8 * 8 + (d % 2 == 1 ? 8 : 0);
    const std::vector<std::int64_t> batches = d == 257 ? std::vector<std::int64_t>{33, 7} : rows;
    check_streamed<llmk::half>(d, ldx, 0, batches, llmk::obs::HessianKernel::kTensorCore, rng);
    check_streamed<llmk::bfloat16>(d, ldx, 0, batches, llmk::obs::HessianKernel::kTensorCore, rng);
  }
}

TEST_CASE("hessian: unaligned 16-bit batches take the SIMT kernel and match") {
  std::mt19937 rng(13);
  const std::vector<std::int64_t> batches = {15, 33};
  // ldx not a multiple of 8
  check_streamed<llmk::half>(17, 18, 0, batches, llmk::obs::HessianKernel::kSimt, rng);
  check_streamed<llmk::bfloat16>(17, 17, 0, batches, llmk::obs::HessianKernel::kSimt, rng);
  // x not 16-byte aligned (ldx fine)
  check_streamed<llmk::half>(20, 24, 1, batches, llmk::obs::HessianKernel::kSimt, rng);
  check_streamed<llmk::bfloat16>(20, 24, 3, batches, llmk::obs::HessianKernel::kSimt, rng);
  // fp32 always takes the SIMT kernel
  check_streamed<float>(20, 24, 0, batches, llmk::obs::HessianKernel::kSimt, rng);
}

TEST_CASE("hessian: the dispatch rule") {
  alignas(16) static llmk::half xh[32];
  alignas(16) static llmk::bfloat16 xb[32];
  alignas(16) static float xf[32];
  CHECK(llmk::obs::hessian_update_kernel_for(xh, 8) == llmk::obs::HessianKernel::kTensorCore);
  CHECK(llmk::obs::hessian_update_kernel_for(xb, 4096) == llmk::obs::HessianKernel::kTensorCore);
  CHECK(llmk::obs::hessian_update_kernel_for(xh, 12) == llmk::obs::HessianKernel::kSimt);
  CHECK(llmk::obs::hessian_update_kernel_for(xh + 4, 16) == llmk::obs::HessianKernel::kSimt);
  CHECK(llmk::obs::hessian_update_kernel_for(xb + 8, 16) == llmk::obs::HessianKernel::kTensorCore);
  CHECK(llmk::obs::hessian_update_kernel_for(xf, 16) == llmk::obs::HessianKernel::kSimt);
}

TEST_CASE("hessian: dead columns and dampening") {
  const std::int64_t d = 4, rows = 2;
  std::vector<float> h = {2, 1, 0, 0, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
  std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8};
  std::int64_t dead = -1;
  REQUIRE(llmk::obs::fix_dead_columns(h.data(), d, d, w.data(), rows, d, &dead).ok());
  CHECK(dead == 1);
  CHECK(h[10] == 1.0f);
  CHECK(w[2] == 0.0f);
  CHECK(w[6] == 0.0f);
  CHECK(w[3] == 4.0f);
  double damp = 0.0;
  REQUIRE(llmk::obs::dampen(h.data(), d, d, 0.1, &damp).ok());
  CHECK(damp == doctest::Approx(0.1 * (2 + 3 + 1 + 5) / 4.0));
  CHECK(h[0] == doctest::Approx(2 + damp));
  CHECK(h[1] == 1.0f);
}

TEST_CASE("hessian: bad arguments name the argument") {
  std::vector<float> h(16, 0.0f), x(16, 1.0f);
  std::vector<llmk::half> xh(16, llmk::half(1.0f));
  auto msg = [](const llmk::Status& s) { return s.message(); };
  CHECK(msg(llmk::obs::hessian_update_host(h.data(), 0, 4, 0, x.data(), 4, 4)).find("'d'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::hessian_update_host(h.data(), 4, 3, 0, x.data(), 4, 4)).find("'ldh'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::hessian_update_host(h.data(), 4, 4, 0, x.data(), 4, 3)).find("'ldx'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::hessian_update_host<float>(h.data(), 4, 4, 0, nullptr, 4, 4)).find("'x'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::hessian_update_host(h.data(), 4, 4, -1, x.data(), 4, 4)).find("'samples'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::hessian_update<float>(nullptr, 4, 4, 0, x.data(), 4, 4, nullptr)).find("'h'") !=
        std::string::npos);
  // the 16-bit launcher validates before it dispatches
  CHECK(msg(llmk::obs::hessian_update(h.data(), 4, 4, 0, xh.data(), -1, 8, nullptr)).find("'rows'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::hessian_update(h.data(), 8, 8, 0, xh.data(), 2, 4, nullptr)).find("'ldx'") !=
        std::string::npos);
  // misaligned element pointers (checked before anything is launched)
  auto shifted = [](auto* p, int bytes) {
    return reinterpret_cast<decltype(p)>(reinterpret_cast<unsigned char*>(p) + bytes);
  };
  CHECK(msg(llmk::obs::hessian_update(shifted(h.data(), 2), 4, 4, 0, xh.data(), 4, 4, nullptr)).find("'h'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::hessian_update(h.data(), 4, 4, 0, shifted(xh.data(), 1), 4, 4, nullptr)).find("'x'") !=
        std::string::npos);
  CHECK(msg(llmk::obs::dampen(h.data(), 4, 4, -0.1, nullptr)).find("'percdamp'") != std::string::npos);
  CHECK(msg(llmk::obs::fix_dead_columns(h.data(), 4, 4, nullptr, 2, 4, nullptr)).find("'w'") !=
        std::string::npos);
}

TEST_CASE("hessian: non-finite batches are rejected by the host update, a non-finite diagonal by dampen") {
  const std::int64_t d = 4;
  llmk::obs::HessianAccumulator acc(d);
  std::vector<float> x = {1, 2, 3, 4, 0.5f, -1, 2, 0};
  REQUIRE(acc.add_batch(x.data(), 2, d).ok());
  const std::vector<float> before = acc.hessian();
  for (const float bad :
       {kNaN, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    std::vector<float> y = x;
    y[6] = bad;  // row 1, column 2
    const llmk::Status s = acc.add_batch(y.data(), 2, d);
    CHECK(s.message().find("'x': must be finite (x[1, 2]") != std::string::npos);
    CHECK(acc.samples() == 2);       // the rejected batch is not counted
    CHECK(acc.hessian() == before);  // nor folded in
  }
  std::vector<llmk::half> xh(8, llmk::half(0.5f));
  xh[3] = llmk::half(kNaN);
  CHECK(acc.add_batch(xh.data(), 2, d).message().find("'x'") != std::string::npos);
  // dampen: one NaN or Inf on the diagonal would spread to every entry through the mean
  std::vector<float> h = before;
  h[5] = kNaN;
  const std::vector<float> h_bad = h;
  CHECK(llmk::obs::dampen(h.data(), d, d, 0.01, nullptr).message().find("'h': must have a finite diagonal") !=
        std::string::npos);
  for (std::size_t i = 0; i < h.size(); ++i) CHECK(std::memcmp(&h[i], &h_bad[i], 4) == 0);  // unchanged
}

// mirror_triangle (llmk/obs/linalg_cuda.cuh) is the symmetric fill of CudaLinalgBackend::cholesky_inverse;
// its cuSOLVER test runs only on a GPU, so the kernel is also checked here, in the simulator.
TEST_CASE("mirror_triangle: fills the other triangle of a symmetric matrix exactly") {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::int64_t n :
       {std::int64_t{1}, std::int64_t{2}, std::int64_t{31}, std::int64_t{33}, std::int64_t{70}})
    for (llmk::obs::Uplo uplo : {llmk::obs::Uplo::kLower, llmk::obs::Uplo::kUpper}) {
      CAPTURE(n);
      const bool lower = uplo == llmk::obs::Uplo::kLower;
      CAPTURE(lower);
      const std::int64_t ld = n + 3;
      std::vector<float> a(static_cast<std::size_t>(n * ld), kNaN);  // other triangle: poison
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < ld; ++j)
          if (j >= n || (lower ? j <= i : j >= i)) a[static_cast<std::size_t>(i * ld + j)] = nd(rng);
      llmk::DeviceBuffer<float> d(a);
      const llmk::Status s = llmk::obs::mirror_triangle(uplo, n, d.data(), ld, nullptr);
      REQUIRE_MESSAGE(s.ok(), s.message());
      const std::vector<float> got = d.to_host();
      int bad = 0;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < ld; ++j) {
          const bool keep = j >= n || (lower ? j <= i : j >= i);
          const float want =
              keep ? a[static_cast<std::size_t>(i * ld + j)] : a[static_cast<std::size_t>(j * ld + i)];
          bad += got[static_cast<std::size_t>(i * ld + j)] != want;
        }
      CHECK(bad == 0);
    }
  std::vector<float> h(4, 0.0f);
  CHECK(
      llmk::obs::mirror_triangle(llmk::obs::Uplo::kLower, 2, h.data(), 1, nullptr).message().find("'lda'") !=
      std::string::npos);
  CHECK(llmk::obs::mirror_triangle(llmk::obs::Uplo::kLower, -1, h.data(), 1, nullptr).message().find("'n'") !=
        std::string::npos);
  float* misaligned = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(h.data()) + 2);
  CHECK(
      llmk::obs::mirror_triangle(llmk::obs::Uplo::kLower, 1, misaligned, 1, nullptr).message().find("'a'") !=
      std::string::npos);
}

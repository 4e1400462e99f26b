// Tests of llmk::quant::column_amax, find_outlier_columns and split_outlier_columns against the host
// references (llmk/reference/outliers.hpp), bit for bit, in the simulator (and on a GPU).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/quant/outliers.cuh"
#include "llmk/quant/reduce_columns.cuh"
#include "llmk/reference/outliers.hpp"
#include "support/test_env.hpp"

namespace {

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Random non-zero values with |x| in [0.25, 4) (well below the default threshold), fixed seed.
template <class T>
std::vector<T> random_matrix(std::int64_t rows, std::int64_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(0.25f, 4.0f);
  std::vector<T> v(static_cast<std::size_t>(rows * ld));
  for (auto& x : v) x = llmk::quant::convert_output<T>(rng() % 2 ? mag(rng) : -mag(rng));
  return v;
}

void expect_invalid(const llmk::Status& s, const char* needle) {
  CHECK_FALSE(s.ok());
  CHECK(s.code() == llmk::Status::Code::kInvalidArgument);
  CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
}

// M x K shapes: every combination of M in {1, 7, 65} and K in {24, 200}; under LLMK_TEST_FAST (the sanitizer
// builds) three of them, still covering both K and the extreme M.
std::vector<std::pair<std::int64_t, std::int64_t>> shapes() {
  if (llmk::test::fast()) return {{1, 200}, {7, 24}, {65, 200}};
  return {{1, 24}, {1, 200}, {7, 24}, {7, 200}, {65, 24}, {65, 200}};
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

template <class T>
void check_column_amax(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::mt19937& rng,
                       bool poison_inputs) {
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(ld);
  std::vector<T> x = random_matrix<T>(rows, ld, rng);
  // Plant a few large finite values, NaN and +-Inf (skipped), and a column of only NaN / Inf (amax 0).
  x[static_cast<std::size_t>((rows - 1) * ld + cols / 2)] = llmk::quant::convert_output<T>(-300.0f);
  if (poison_inputs) {
    x[static_cast<std::size_t>(cols - 1)] = llmk::quant::convert_output<T>(kNaN);
    x[static_cast<std::size_t>((rows / 2) * ld + 1)] = llmk::quant::convert_output<T>(kInf);
    x[static_cast<std::size_t>((rows / 2) * ld + 2)] = llmk::quant::convert_output<T>(-kInf);
    for (std::int64_t r = 0; r < rows; ++r)
      x[static_cast<std::size_t>(r * ld + 3)] = llmk::quant::convert_output<T>(r % 2 ? kNaN : kInf);
  }
  llmk::DeviceBuffer<T> d_x(x);
  llmk::DeviceBuffer<float> d_amax(static_cast<std::size_t>(cols));  // poisoned
  llmk::Status s = llmk::quant::column_amax(d_x.data(), ld, rows, cols, d_amax.data(), nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  std::vector<float> got = d_amax.to_host(), want(static_cast<std::size_t>(cols));
  llmk::reference::column_amax(x.data(), ld, rows, cols, want.data());
  int bad = 0;
  for (std::int64_t j = 0; j < cols; ++j)
    if (!same_bits(got[static_cast<std::size_t>(j)], want[static_cast<std::size_t>(j)]) && bad++ < 5)
      MESSAGE("amax[" << j << "] = " << got[static_cast<std::size_t>(j)] << ", want "
                      << want[static_cast<std::size_t>(j)]);
  CHECK(bad == 0);
  if (poison_inputs) CHECK(got[3] == 0.0f);
}

// Runs find_outlier_columns; checks the list, the -1 tail and the count against the reference; returns the
// list.
template <class T>
std::vector<std::int32_t> check_find(const std::vector<T>& x, std::int64_t ld, std::int64_t rows,
                                     std::int64_t cols, float threshold) {
  llmk::DeviceBuffer<T> d_x(x);
  llmk::DeviceBuffer<std::int32_t> d_cols(static_cast<std::size_t>(cols)), d_count(1);  // poisoned (-1 bytes)
  llmk::Status s = llmk::quant::find_outlier_columns(d_x.data(), ld, rows, cols, threshold, d_cols.data(),
                                                     d_count.data(), nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  const std::vector<std::int32_t> want =
      llmk::reference::outlier_columns(x.data(), ld, rows, cols, threshold);
  const std::vector<std::int32_t> got = d_cols.to_host();
  REQUIRE(d_count.to_host()[0] == static_cast<std::int32_t>(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
  for (std::size_t i = want.size(); i < got.size(); ++i) CHECK(got[i] == -1);
  // The workspace form (CUB's select on a GPU) writes the same list, tail and count.
  std::size_t bytes = 0;
  REQUIRE(llmk::quant::find_outlier_columns(nullptr, &bytes, d_x.data(), ld, rows, cols, threshold,
                                            d_cols.data(), d_count.data(), nullptr)
              .ok());
  llmk::DeviceBuffer<unsigned char> temp(bytes);
  temp.poison();
  d_cols.poison();
  d_count.poison();
  const llmk::Status ws = llmk::quant::find_outlier_columns(
      temp.data(), &bytes, d_x.data(), ld, rows, cols, threshold, d_cols.data(), d_count.data(), nullptr);
  REQUIRE_MESSAGE(ws.ok(), ws.message());
  CHECK(d_cols.to_host() == got);
  CHECK(d_count.to_host()[0] == static_cast<std::int32_t>(want.size()));
  return want;
}

template <class T>
void check_split(const std::vector<T>& x, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                 const std::vector<std::int32_t>& idx, std::int64_t ld_reg, std::int64_t ld_out,
                 std::vector<T>* reg_out = nullptr, std::vector<T>* out_out = nullptr) {
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(ld_reg);
  CAPTURE(ld_out);
  const int n_out = static_cast<int>(idx.size());
  llmk::DeviceBuffer<T> d_x(x);
  llmk::DeviceBuffer<std::int32_t> d_idx(idx.empty() ? std::vector<std::int32_t>{0} : idx);
  llmk::DeviceBuffer<T> d_reg(static_cast<std::size_t>(rows * ld_reg)),
      d_out(static_cast<std::size_t>(rows * ld_out));
  llmk::Status s = llmk::quant::split_outlier_columns(d_x.data(), ld, rows, cols, d_idx.data(), n_out,
                                                      d_reg.data(), ld_reg, d_out.data(), ld_out, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  std::vector<T> got_reg = d_reg.to_host(), got_out = d_out.to_host();
  std::vector<T> want_reg = got_reg;  // padding columns keep the poison
  std::vector<T> want_out(got_out.size());
  llmk::reference::split_outlier_columns(x.data(), ld, rows, cols, idx.data(), n_out, want_reg.data(), ld_reg,
                                         want_out.data(), ld_out);
  T poison;
  std::memset(&poison, 0xFF, sizeof(T));
  int bad = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < ld_reg; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * ld_reg + j);
      const bool ok = j < cols ? same_bits(got_reg[i], want_reg[i]) : same_bits(got_reg[i], poison);
      if (!ok && bad++ < 5) MESSAGE("regular[" << r << "][" << j << "] differs");
    }
  for (std::size_t i = 0; i < got_out.size(); ++i)
    if (!same_bits(got_out[i], want_out[i]) && bad++ < 10) MESSAGE("outlier[" << i << "] differs");
  CHECK(bad == 0);
  if (reg_out) *reg_out = got_reg;
  if (out_out) *out_out = got_out;
}

template <class T>
void check_find_and_split(std::int64_t m, std::int64_t k, std::int64_t ld, std::mt19937& rng) {
  CAPTURE(m);
  CAPTURE(k);
  std::vector<T> x = random_matrix<T>(m, ld, rng);
  // Outliers (|x| >= 6) in a few columns, in random rows, with both signs; one at exactly the threshold.
  const std::int64_t planted[] = {0, 5, k / 2, k / 2 + 1, k - 1};
  for (std::int64_t c : planted) {
    const std::int64_t r = static_cast<std::int64_t>(rng() % static_cast<unsigned>(m));
    x[static_cast<std::size_t>(r * ld + c)] = llmk::quant::convert_output<T>(c % 2 ? -60.0f : 6.5f);
  }
  x[static_cast<std::size_t>((m - 1) * ld + 7)] =
      llmk::quant::convert_output<T>(-6.0f);  // |x| == threshold counts
  const std::vector<std::int32_t> idx = check_find(x, ld, m, k, 6.0f);
  CHECK(idx.size() == 6);
  check_split(x, ld, m, k, idx, ld, static_cast<std::int64_t>(idx.size()));
  check_split(x, ld, m, k, idx, ld + 3,
              llmk::round_up<std::int64_t>(static_cast<std::int64_t>(idx.size()), 8));
}

}  // namespace

TEST_CASE("column_amax matches the reference bit for bit (fp32, fp16, bf16, odd shapes, strides, NaN/Inf)") {
  std::mt19937 rng(31);
  const bool fast = llmk::test::fast();  // under LLMK_TEST_FAST one dtype per shape, rotating
  int s = 0;
  for (const auto& [m, k] : shapes()) {
    if (!fast || s % 3 == 0) check_column_amax<float>(m, k, k, rng, m > 1);
    if (!fast || s % 3 == 1) check_column_amax<llmk::half>(m, k, k, rng, m > 1);
    if (!fast || s % 3 == 2) check_column_amax<llmk::bfloat16>(m, k, k, rng, m > 1);
    if (!fast || s == 0)
      check_column_amax<llmk::half>(m, k, k + 3, rng, m > 1);  // unaligned rows: scalar path
    ++s;
  }
  check_column_amax<float>(300, 130, 132, rng, true);  // several row slabs (grid.y > 1), a partial vector
  check_column_amax<llmk::bfloat16>(3, 1, 1, rng, false);
}

TEST_CASE("column_amax: all-zero, empty and misaligned base pointers") {
  std::vector<float> zeros(7 * 24, 0.0f);
  llmk::DeviceBuffer<float> d_x(zeros), d_amax(24);
  REQUIRE(llmk::quant::column_amax(d_x.data(), 24, 7, 24, d_amax.data(), nullptr).ok());
  for (float v : d_amax.to_host()) CHECK(v == 0.0f);
  // rows == 0: amax of nothing is 0
  llmk::DeviceBuffer<float> d_amax2(24);
  REQUIRE(llmk::quant::column_amax(d_x.data(), 24, 0, 24, d_amax2.data(), nullptr).ok());
  for (float v : d_amax2.to_host()) CHECK(v == 0.0f);
  // cols == 0: nothing written, null output allowed
  CHECK(llmk::quant::column_amax(d_x.data(), 24, 7, 0, static_cast<float*>(nullptr), nullptr).ok());
  // A base pointer off the 16-byte grid falls back to scalar loads and still matches.
  std::mt19937 rng(5);
  std::vector<float> x = random_matrix<float>(9, 40, rng);
  llmk::DeviceBuffer<float> d_y(x), d_out(39);
  REQUIRE(llmk::quant::column_amax(d_y.data() + 1, 40, 9, 39, d_out.data(), nullptr).ok());
  std::vector<float> want(39);
  llmk::reference::column_amax(x.data() + 1, 40, 9, 39, want.data());
  CHECK(d_out.to_host() == want);
}

TEST_CASE(
    "find_outlier_columns and split_outlier_columns match the reference (fp32, fp16, bf16, odd shapes)") {
  std::mt19937 rng(77);
  const bool fast = llmk::test::fast();  // under LLMK_TEST_FAST one dtype per shape, rotating
  int s = 0;
  for (const auto& [m, k] : shapes()) {
    if (!fast || s % 3 == 0) check_find_and_split<float>(m, k, k, rng);
    if (!fast || s % 3 == 1) check_find_and_split<llmk::half>(m, k, k, rng);
    if (!fast || s % 3 == 2) check_find_and_split<llmk::bfloat16>(m, k, k, rng);
    ++s;
  }
  check_find_and_split<llmk::half>(7, 200, 203, rng);                         // unaligned stride: scalar path
  if (!llmk::test::fast()) check_find_and_split<float>(40, 8200, 8200, rng);  // two bitmap chunks
}

TEST_CASE("find_outlier_columns: none, all, threshold edge, Inf counts, NaN does not") {
  std::mt19937 rng(3);
  const std::int64_t m = 7, k = 24;
  std::vector<llmk::half> x = random_matrix<llmk::half>(m, k, rng);            // |x| < 4
  CHECK(check_find(x, k, m, k, 6.0f).empty());                                 // no outliers
  CHECK(check_find(x, k, m, k, 0.25f).size() == static_cast<std::size_t>(k));  // every column: all outliers
  std::vector<std::int32_t> all = check_find(x, k, m, k, 0.25f);
  check_split(x, k, m, k, all, k, k);  // regular becomes all zero, outlier == x
  // threshold edge: 6.0 counts, the largest half below 6 (5.996) does not
  x[2] = llmk::half(6.0f);
  x[k + 9] = llmk::half(std::nextafter(6.0f, 0.0f));  // 5.99999964 rounds to 6.0 in half: counts
  x[2 * k + 11] = llmk::half::from_bits(0x45FF);      // 5.99609375, the largest half below 6
  x[3 * k + 13] = llmk::half(kInf);
  x[4 * k + 15] = llmk::half(kNaN);
  std::vector<std::int32_t> got = check_find(x, k, m, k, 6.0f);
  CHECK(got == std::vector<std::int32_t>{2, 9, 13});
  // fp32 exactly at and just below the threshold
  std::vector<float> xf = random_matrix<float>(m, k, rng);
  xf[5] = 6.0f;
  xf[k + 6] = std::nextafter(6.0f, 0.0f);
  xf[2 * k + 7] = -kInf;
  CHECK(check_find(xf, k, m, k, 6.0f) == std::vector<std::int32_t>{5, 7});
  CHECK(check_find(xf, k, m, k, kInf) == std::vector<std::int32_t>{7});  // +Inf threshold: only infinities
  // rows == 0 and cols == 0: count 0
  check_find(xf, k, 0, k, 6.0f);
  llmk::DeviceBuffer<std::int32_t> d_count(1);
  REQUIRE(llmk::quant::find_outlier_columns(static_cast<const float*>(nullptr), 0, 5, 0, 6.0f,
                                            static_cast<std::int32_t*>(nullptr), d_count.data(), nullptr)
              .ok());
  CHECK(d_count.to_host()[0] == 0);
  d_count.poison();
  std::size_t bytes = 0;
  REQUIRE(llmk::quant::find_outlier_columns(nullptr, &bytes, static_cast<const float*>(nullptr), 0, 5, 0,
                                            6.0f, static_cast<std::int32_t*>(nullptr), d_count.data(),
                                            nullptr)
              .ok());
  llmk::DeviceBuffer<unsigned char> temp(bytes);
  REQUIRE(llmk::quant::find_outlier_columns(temp.data(), &bytes, static_cast<const float*>(nullptr), 0, 5, 0,
                                            6.0f, static_cast<std::int32_t*>(nullptr), d_count.data(),
                                            nullptr)
              .ok());
  CHECK(d_count.to_host()[0] == 0);
}

TEST_CASE("split: X W^T == X_reg W_reg^T + X_out W_out^T (fp64), and an in-place split") {
  std::mt19937 rng(11);
  const std::int64_t m = 17, n = 9, k = 200;
  std::vector<llmk::half> x = random_matrix<llmk::half>(m, k, rng), w = random_matrix<llmk::half>(n, k, rng);
  for (std::int64_t c : {3, 64, 65, 150, 199})
    x[static_cast<std::size_t>((c % m) * k + c)] = llmk::half(c % 2 ? 80.0f : -7.0f);
  const std::vector<std::int32_t> idx = check_find(x, k, m, k, 6.0f);
  REQUIRE(idx.size() == 5);
  const std::int64_t ld_out = 8;
  std::vector<llmk::half> xr, xo, wr, wo;
  check_split(x, k, m, k, idx, k, ld_out, &xr, &xo);
  check_split(w, k, n, k, idx, k, ld_out, &wr, &wo);
  const auto d = [](llmk::half h) { return static_cast<double>(static_cast<float>(h)); };
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double full = 0.0, split = 0.0, mag = 0.0;
      for (std::int64_t c = 0; c < k; ++c) {
        const double p = d(x[i * k + c]) * d(w[j * k + c]);
        full += p;
        mag += std::fabs(p);
        split += d(xr[i * k + c]) * d(wr[j * k + c]);
      }
      for (std::int64_t o = 0; o < ld_out; ++o)  // the zero padding is part of the padded GEMM
        split += d(xo[i * ld_out + o]) * d(wo[j * ld_out + o]);
      // fp16 products are exact in fp64; only the two summation orders differ: k roundings of 2^-53.
      CHECK(std::fabs(full - split) <= k * std::ldexp(mag, -52));
    }
  // In place: regular == x.
  llmk::DeviceBuffer<llmk::half> d_x(x), d_out(static_cast<std::size_t>(m * ld_out));
  llmk::DeviceBuffer<std::int32_t> d_idx(idx);
  REQUIRE(llmk::quant::split_outlier_columns(d_x.data(), k, m, k, d_idx.data(), 5, d_x.data(), k,
                                             d_out.data(), ld_out, nullptr)
              .ok());
  std::vector<llmk::half> in_place = d_x.to_host(), out = d_out.to_host();
  for (std::size_t i = 0; i < xr.size(); ++i) CHECK(same_bits(in_place[i], xr[i]));
  for (std::size_t i = 0; i < xo.size(); ++i) CHECK(same_bits(out[i], xo[i]));
}

TEST_CASE("outlier kernels reject bad arguments with a message naming the argument") {
  llmk::DeviceBuffer<float> x(64 * 64), amax(64), reg(64 * 64), out(64 * 64);
  llmk::DeviceBuffer<std::int32_t> cols(64), count(1);
  using llmk::quant::column_amax;
  using llmk::quant::find_outlier_columns;
  using llmk::quant::split_outlier_columns;
  expect_invalid(column_amax(x.data(), 64, -1, 64, amax.data(), nullptr), "'rows': must be >= 0");
  expect_invalid(column_amax(x.data(), 64, 4, -2, amax.data(), nullptr), "'cols': must be >= 0");
  expect_invalid(column_amax(x.data(), 32, 4, 64, amax.data(), nullptr),
                 "'ldx': must be >= cols (cols=64, ldx=32)");
  expect_invalid(column_amax(static_cast<const float*>(nullptr), 64, 4, 64, amax.data(), nullptr),
                 "'x': must not be null");
  expect_invalid(column_amax(x.data(), 64, 4, 64, static_cast<float*>(nullptr), nullptr),
                 "'amax_out': must not be null");

  expect_invalid(find_outlier_columns(x.data(), 64, -1, 64, 6.0f, cols.data(), count.data(), nullptr),
                 "'rows'");
  expect_invalid(find_outlier_columns(x.data(), 64, 4, -1, 6.0f, cols.data(), count.data(), nullptr),
                 "'cols'");
  expect_invalid(find_outlier_columns(x.data(), 63, 4, 64, 6.0f, cols.data(), count.data(), nullptr),
                 "'ldx'");
  expect_invalid(find_outlier_columns(static_cast<const float*>(nullptr), 64, 4, 64, 6.0f, cols.data(),
                                      count.data(), nullptr),
                 "'x'");
  expect_invalid(find_outlier_columns(x.data(), std::int64_t{1} << 32, 1, std::int64_t{1} << 31, 6.0f,
                                      cols.data(), count.data(), nullptr),
                 "'cols': must be < 2^31");
  expect_invalid(find_outlier_columns(x.data(), 64, 4, 64, 0.0f, cols.data(), count.data(), nullptr),
                 "'threshold': must be > 0");
  expect_invalid(find_outlier_columns(x.data(), 64, 4, 64, kNaN, cols.data(), count.data(), nullptr),
                 "'threshold'");
  expect_invalid(find_outlier_columns(x.data(), 64, 4, 64, 6.0f, nullptr, count.data(), nullptr),
                 "'outlier_cols': must not be null");
  expect_invalid(find_outlier_columns(x.data(), 64, 4, 64, 6.0f, cols.data(), nullptr, nullptr),
                 "'num_outliers': must not be null");
  // The workspace form: its own rules, then the same argument checks.
  std::size_t bytes = 0;
  expect_invalid(
      find_outlier_columns(nullptr, nullptr, x.data(), 64, 4, 64, 6.0f, cols.data(), count.data(), nullptr),
      "'temp_bytes': must not be null");
  REQUIRE(find_outlier_columns(nullptr, &bytes, x.data(), 64, 4, 64, 6.0f, cols.data(), count.data(), nullptr)
              .ok());
  llmk::DeviceBuffer<unsigned char> temp(bytes + 16);
  std::size_t small = bytes - 1, enough = bytes + 8;
  expect_invalid(find_outlier_columns(temp.data(), &small, x.data(), 64, 4, 64, 6.0f, cols.data(),
                                      count.data(), nullptr),
                 "'temp_bytes'");
  expect_invalid(find_outlier_columns(temp.data() + 4, &enough, x.data(), 64, 4, 64, 6.0f, cols.data(),
                                      count.data(), nullptr),
                 "'temp': must be 16-byte aligned");
  expect_invalid(find_outlier_columns(temp.data(), &bytes, x.data(), 64, 4, 64, 0.0f, cols.data(),
                                      count.data(), nullptr),
                 "'threshold': must be > 0");
  expect_invalid(
      find_outlier_columns(temp.data(), &bytes, x.data(), 64, 4, 64, 6.0f, cols.data(), nullptr, nullptr),
      "'num_outliers': must not be null");

  auto split = [&](const float* px, std::int64_t ldx, std::int64_t rows, std::int64_t k,
                   const std::int32_t* idx, int n, float* r, std::int64_t ldr, float* o, std::int64_t ldo) {
    return split_outlier_columns(px, ldx, rows, k, idx, n, r, ldr, o, ldo, nullptr);
  };
  expect_invalid(split(x.data(), 64, -1, 64, cols.data(), 2, reg.data(), 64, out.data(), 2), "'rows'");
  expect_invalid(split(x.data(), 64, 4, -1, cols.data(), 2, reg.data(), 64, out.data(), 2), "'cols'");
  expect_invalid(split(x.data(), 60, 4, 64, cols.data(), 2, reg.data(), 64, out.data(), 2), "'ldx'");
  expect_invalid(split(nullptr, 64, 4, 64, cols.data(), 2, reg.data(), 64, out.data(), 2),
                 "'x': must not be null");
  expect_invalid(split(x.data(), std::int64_t{1} << 32, 1, std::int64_t{1} << 31, cols.data(), 2, reg.data(),
                       std::int64_t{1} << 32, out.data(), 2),
                 "'cols': must be < 2^31");
  expect_invalid(split(x.data(), 64, 4, 64, cols.data(), 2, reg.data(), 32, out.data(), 2),
                 "'ld_regular': must be >= cols");
  expect_invalid(split(x.data(), 64, 4, 64, cols.data(), -1, reg.data(), 64, out.data(), 2),
                 "'n_out': must be in [0, cols]");
  expect_invalid(split(x.data(), 64, 4, 64, cols.data(), 65, reg.data(), 64, out.data(), 65), "'n_out'");
  expect_invalid(split(x.data(), 64, 4, 64, cols.data(), 3, reg.data(), 64, out.data(), 2),
                 "'ld_outlier': must be >= n_out");
  expect_invalid(split(x.data(), 64, 4, 64, cols.data(), 2, nullptr, 64, out.data(), 2),
                 "'regular': must not be null");
  expect_invalid(split(x.data(), 64, 4, 64, nullptr, 2, reg.data(), 64, out.data(), 2),
                 "'outlier_cols': must not be null");
  expect_invalid(split(x.data(), 64, 4, 64, cols.data(), 2, reg.data(), 64, nullptr, 2),
                 "'outlier': must not be null");
  expect_invalid(split(x.data(), 32, 4, 32, cols.data(), 2, x.data(), 64, out.data(), 2),
                 "'regular': may alias x only");
  // Valid corner cases: no outliers and no outlier buffer; empty tensors.
  CHECK(split(x.data(), 64, 4, 64, nullptr, 0, reg.data(), 64, nullptr, 0).ok());
  CHECK(split(nullptr, 64, 0, 64, nullptr, 0, nullptr, 64, nullptr, 0).ok());
}

// Tests of the quantization kernels (llmk/quant/kernels.cuh) against the host references
// (llmk/reference/quant.hpp): bit for bit (raw bytes of codes, scales, zero points and dequantized outputs,
// padding included), every storage x scheme x granularity, odd shapes, strides wider than the row, aligned
// and unaligned (scalar) paths, edge values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/int4.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/quant/kernels.cuh"
#include "llmk/quant/outliers.cuh"
#include "llmk/reference/quant.hpp"
#include "support/test_env.hpp"

namespace {

namespace q = llmk::quant;
namespace ref = llmk::reference;

constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
std::vector<T> poisoned(std::size_t count) {
  std::vector<T> v(count);
  std::memset(static_cast<void*>(v.data()), 0xFF, count * sizeof(T));
  return v;
}

// Compares raw bytes; reports the first differing element.
template <class T>
bool same_bytes(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::uint64_t g = 0, w = 0;
      std::memcpy(&g, &got[i], sizeof(T));
      std::memcpy(&w, &want[i], sizeof(T));
      MESSAGE(what << "[" << i << "] bits 0x" << std::hex << g << ", want 0x" << w << std::dec);
      return false;
    }
  }
  return true;
}

// Random data, never zero: row r has its own magnitude and (for asymmetric ranges) offset, so scales differ
// per row. Padding between cols and ld holds 1e6: a kernel that reads it gets different scales.
template <class In>
std::vector<In> random_input(int rows, int cols, std::int64_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<In> x(static_cast<std::size_t>(rows) * ld + 1, llmk::quant::convert_output<In>(1e6f));
  for (int r = 0; r < rows; ++r) {
    const float magnitude = std::ldexp(1.0f, r % 7 - 3),
                offset = 0.4f * static_cast<float>(r % 3 - 1) * magnitude;
    for (int c = 0; c < cols; ++c) {
      float v = offset + magnitude * dist(rng);
      if (v == 0.0f) v = magnitude * 0.5f;
      x[static_cast<std::size_t>(r) * ld + c] = llmk::quant::convert_output<In>(v);
    }
  }
  return x;
}

struct Strides {
  std::int64_t ldx, ldq, ldy;
};

// aligned: every row stride a multiple of 16 bytes (and wider than the row): the 16-byte vector paths.
// Otherwise odd strides: the scalar paths.
template <class Q, class In, class Out>
Strides make_strides(int cols, bool aligned) {
  using S = typename Q::storage_type;
  const std::int64_t row_bytes = q::storage_row_bytes<S>(cols);
  constexpr std::int64_t kIn = 16 / sizeof(In), kOut = 16 / sizeof(Out);
  if (aligned)
    return {llmk::round_up<std::int64_t>(cols, kIn) + kIn, llmk::round_up<std::int64_t>(row_bytes, 16) + 16,
            llmk::round_up<std::int64_t>(cols, kOut) + kOut};
  return {cols + 3, row_bytes + 3, cols + 1};
}

// Runs quantize_dynamic, quantize (static, with clipping parameters) and dequantize on one problem and
// compares every output byte with the reference. `x` may be given (edge values); otherwise random.
template <class Q, class In, class Out = float>
void check_problem(int rows, int cols, int group_size, bool aligned, std::mt19937& rng,
                   const std::vector<In>* given = nullptr, std::int64_t given_ldx = 0) {
  using S = typename Q::storage_type;
  CAPTURE(q::StorageTraits<S>::kName);
  CAPTURE(Q::scheme::kName);
  CAPTURE(Q::granularity::kName);
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(group_size);
  CAPTURE(aligned);
  Strides st = make_strides<Q, In, Out>(cols, aligned);
  if (given != nullptr) st.ldx = given_ldx;
  const std::vector<In> x = given != nullptr ? *given : random_input<In>(rows, cols, st.ldx, rng);
  const std::size_t np =
      static_cast<std::size_t>(q::param_count<typename Q::granularity>(rows, cols, group_size));
  const std::size_t q_size = static_cast<std::size_t>(rows) * st.ldq;

  // dynamic
  std::vector<std::uint8_t> want_q = poisoned<std::uint8_t>(q_size);
  std::vector<float> want_s = poisoned<float>(np);
  std::vector<std::int32_t> want_z = poisoned<std::int32_t>(np);
  ref::quantize_dynamic<Q>(x.data(), st.ldx, want_q.data(), st.ldq, rows, cols, want_s.data(), want_z.data(),
                           group_size);
  llmk::DeviceBuffer<In> d_x(x);
  llmk::DeviceBuffer<std::uint8_t> d_q(q_size);
  llmk::DeviceBuffer<float> d_s(np);
  llmk::DeviceBuffer<std::int32_t> d_z(np);
  std::size_t ws_bytes = 0;
  REQUIRE(q::quantize_dynamic<Q, In>(nullptr, st.ldx, nullptr, st.ldq, rows, cols, nullptr, nullptr,
                                     group_size, nullptr, &ws_bytes, nullptr)
              .ok());
  REQUIRE(ws_bytes > 0);
  llmk::DeviceBuffer<std::uint32_t> d_ws((ws_bytes + 3) / 4);
  llmk::Status s = q::quantize_dynamic<Q>(d_x.data(), st.ldx, d_q.data(), st.ldq, rows, cols, d_s.data(),
                                          Q::kAsymmetric ? d_z.data() : nullptr, group_size, d_ws.data(),
                                          &ws_bytes, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  CHECK(same_bytes(d_s.to_host(), want_s, "dynamic scales"));
  if (Q::kAsymmetric) CHECK(same_bytes(d_z.to_host(), want_z, "dynamic zero points"));
  CHECK(same_bytes(d_q.to_host(), want_q, "dynamic codes"));

  // static, with parameters that clip (scales * 0.75) so saturation is exercised
  std::vector<float> scales = want_s;
  for (float& v : scales) v *= 0.75f;
  std::vector<std::uint8_t> want_sq = poisoned<std::uint8_t>(q_size);
  ref::quantize<Q>(x.data(), st.ldx, want_sq.data(), st.ldq, rows, cols, scales.data(), want_z.data(),
                   group_size);
  llmk::DeviceBuffer<float> d_scales(scales);
  llmk::DeviceBuffer<std::int32_t> d_zeros(want_z);
  d_q.poison();
  const llmk::Status s_static =
      q::quantize<Q>(d_x.data(), st.ldx, d_q.data(), st.ldq, rows, cols, d_scales.data(),
                     Q::kAsymmetric ? d_zeros.data() : nullptr, group_size, nullptr);
  REQUIRE_MESSAGE(s_static.ok(), s_static.message());
  REQUIRE(llmk::device_synchronize().ok());
  CHECK(same_bytes(d_q.to_host(), want_sq, "static codes"));

  // dequantize the reference's dynamic codes
  const std::size_t y_size = static_cast<std::size_t>(rows) * st.ldy;
  std::vector<Out> want_y = poisoned<Out>(y_size);
  ref::dequantize<Q>(want_q.data(), st.ldq, want_y.data(), st.ldy, rows, cols, want_s.data(), want_z.data(),
                     group_size);
  llmk::DeviceBuffer<std::uint8_t> d_codes(want_q);
  llmk::DeviceBuffer<float> d_ws_scales(want_s);
  llmk::DeviceBuffer<Out> d_y(y_size);
  const llmk::Status s_dequant =
      q::dequantize<Q>(d_codes.data(), st.ldq, d_y.data(), st.ldy, rows, cols, d_ws_scales.data(),
                       Q::kAsymmetric ? d_zeros.data() : nullptr, group_size, nullptr);
  REQUIRE_MESSAGE(s_dequant.ok(), s_dequant.message());
  REQUIRE(llmk::device_synchronize().ok());
  CHECK(same_bytes(d_y.to_host(), want_y, "dequantized"));
}

struct Shape {
  int rows, cols;
};

// Every granularity of one storage x scheme, fp32 in and out.
template <class S, class Sch>
void check_all_granularities(std::mt19937& rng) {
  using llmk::test::pick;
  const std::vector<Shape> shapes =
      pick(std::vector<Shape>{{1, 200}, {7, 24}, {17, 257}, {63, 97}}, std::vector<Shape>{{7, 24}, {17, 97}});
  int i = 0;
  for (const Shape& sh : shapes) {
    const bool aligned = i++ % 2 == 0;
    check_problem<q::Quantizer<S, Sch, q::PerTensor>, float>(sh.rows, sh.cols, 0, aligned, rng);
    check_problem<q::Quantizer<S, Sch, q::PerChannel>, float>(sh.rows, sh.cols, 0, !aligned, rng);
    check_problem<q::Quantizer<S, Sch, q::PerToken>, float>(sh.rows, sh.cols, 0, aligned, rng);
  }
  // Group-wise: 768 = 3 * 256 = 32 * 24, so every group size divides it; 24 and 7 straddle 16-byte chunks
  // (and 7 straddles int4 bytes).
  const int group_rows = pick(5, 2);
  for (int g : pick(std::vector<int>{32, 64, 128, 256, 24}, std::vector<int>{64, 24}))
    check_problem<q::Quantizer<S, Sch, q::GroupWise<>>, float>(group_rows, 768, g, g != 64, rng);
  check_problem<q::Quantizer<S, Sch, q::GroupWise<128>>, float>(3, 384, 128, true, rng);
  check_problem<q::Quantizer<S, Sch, q::GroupWise<>>, float>(3, 21, 7, false, rng);
  check_problem<q::Quantizer<S, Sch, q::GroupWise<>>, float>(2, 48, 48, true, rng);
}

}  // namespace

TEST_CASE("int8: kernels match the reference bit for bit, every scheme and granularity (fp32)") {
  std::mt19937 rng(101);
  check_all_granularities<int8_t, q::Symmetric>(rng);
  check_all_granularities<int8_t, q::Asymmetric>(rng);
  check_all_granularities<uint8_t, q::Asymmetric>(rng);
}

TEST_CASE("int4: kernels match the reference bit for bit, every scheme and granularity, odd lengths (fp32)") {
  std::mt19937 rng(102);
  check_all_granularities<llmk::int4_t, q::Symmetric>(rng);
  check_all_granularities<llmk::int4_t, q::Asymmetric>(rng);
  check_all_granularities<llmk::uint4_t, q::Asymmetric>(rng);
}

TEST_CASE("fp8: kernels match the reference bit for bit, every granularity (fp32)") {
  std::mt19937 rng(103);
  check_all_granularities<llmk::float8_e4m3, q::Symmetric>(rng);
  check_all_granularities<llmk::float8_e5m2, q::Symmetric>(rng);
}

TEST_CASE("fp16 and bf16 inputs and outputs match the reference bit for bit") {
  std::mt19937 rng(104);
  using llmk::bfloat16;
  using llmk::half;
  for (bool aligned : {true, false}) {
    check_problem<q::Quantizer<int8_t, q::Symmetric, q::PerToken>, half, half>(17, 200, 0, aligned, rng);
    check_problem<q::Quantizer<llmk::int4_t, q::Asymmetric, q::GroupWise<>>, half, half>(5, 264, 24, aligned,
                                                                                         rng);
    check_problem<q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::PerTensor>, half, half>(7, 129, 0, aligned,
                                                                                           rng);
    check_problem<q::Quantizer<int8_t, q::Asymmetric, q::PerChannel>, bfloat16, bfloat16>(9, 72, 0, aligned,
                                                                                          rng);
    check_problem<q::Quantizer<llmk::uint4_t, q::Asymmetric, q::GroupWise<64>>, bfloat16, bfloat16>(
        3, 256, 64, aligned, rng);
    check_problem<q::Quantizer<llmk::float8_e5m2, q::Symmetric, q::PerToken>, bfloat16, bfloat16>(
        4, 33, 0, aligned, rng);
  }
}

TEST_CASE("quantize_dynamic: rows longer than the shared-memory limit take the two-read path") {
  std::mt19937 rng(105);
  const int cols = llmk::test::pick(16400, 16400);  // 65600 bytes of fp32 > 64 KiB
  check_problem<q::Quantizer<int8_t, q::Symmetric, q::PerToken>, float>(2, cols, 0, true, rng);
  check_problem<q::Quantizer<llmk::int4_t, q::Asymmetric, q::GroupWise<>>, float>(2, cols, 400, false, rng);
}

TEST_CASE("a base pointer that is not 16-byte aligned takes the scalar path with the same results") {
  std::mt19937 rng(106);
  using Q = q::Quantizer<int8_t, q::Asymmetric, q::PerToken>;
  const int rows = 5, cols = 64;
  const std::vector<float> x = random_input<float>(rows, cols, cols, rng);
  llmk::DeviceBuffer<float> d_x(x.size() + 1);
  d_x.upload(std::vector<float>(1, 0.0f));
  REQUIRE(llmk::device_copy(d_x.data() + 1, x.data(), x.size() * sizeof(float), llmk::CopyKind::kHostToDevice)
              .ok());
  std::vector<std::uint8_t> want_q(static_cast<std::size_t>(rows) * cols);
  std::vector<float> want_s(rows);
  std::vector<std::int32_t> want_z(rows);
  ref::quantize_dynamic<Q>(x.data(), cols, want_q.data(), cols, rows, cols, want_s.data(), want_z.data(), 0);
  llmk::DeviceBuffer<std::uint8_t> d_q(want_q.size() + 1);
  llmk::DeviceBuffer<float> d_s(rows);
  llmk::DeviceBuffer<std::int32_t> d_z(rows);
  llmk::DeviceBuffer<std::uint32_t> ws(4);
  std::size_t ws_bytes = ws.bytes();
  llmk::Status s = q::quantize_dynamic<Q>(d_x.data() + 1, cols, d_q.data() + 1, cols, rows, cols, d_s.data(),
                                          d_z.data(), 0, ws.data(), &ws_bytes, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  std::vector<std::uint8_t> got = d_q.to_host();
  CHECK(got[0] == 0xFF);
  got.erase(got.begin());
  CHECK(same_bytes(got, want_q, "codes"));
  CHECK(same_bytes(d_s.to_host(), want_s, "scales"));
  CHECK(same_bytes(d_z.to_host(), want_z, "zero points"));
}

namespace {

// Rows with the edge values of the policy in scheme.cuh: all zero, constant, NaN / Inf mixed in, all
// non-finite, subnormal (the scale underflows), huge values and signed zeros.
std::vector<float> edge_rows(int cols, std::int64_t ld) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(static_cast<std::size_t>(8) * ld, 7.0f);
  for (int c = 0; c < cols; ++c) {
    auto at = [&](int r) -> float& { return x[static_cast<std::size_t>(r) * ld + c]; };
    at(0) = 0.0f;
    at(1) = 2.5f;
    at(2) = -3.0f;
    at(3) = c % 5 == 0 ? nan : (c % 5 == 1 ? kInf : (c % 5 == 2 ? -kInf : 0.1f * static_cast<float>(c - 10)));
    at(4) = c % 3 == 0 ? nan : (c % 3 == 1 ? kInf : -kInf);
    at(5) = (c % 2 ? -1.0f : 1.0f) * 1e-44f;
    at(6) = c % 4 == 0 ? 3e38f : (c % 4 == 1 ? -3e38f : 1.0f);
    at(7) = c % 2 ? -0.0f : 0.0f;
  }
  return x;
}

template <class S, class Sch>
void check_edges(std::mt19937& rng) {
  const int cols = 40;
  const std::int64_t ld = 48;
  const std::vector<float> x = edge_rows(cols, ld);
  check_problem<q::Quantizer<S, Sch, q::PerToken>, float>(8, cols, 0, true, rng, &x, ld);
  check_problem<q::Quantizer<S, Sch, q::GroupWise<>>, float>(8, cols, 8, true, rng, &x, ld);
  check_problem<q::Quantizer<S, Sch, q::PerTensor>, float>(8, cols, 0, true, rng, &x, ld);
  // Per tensor over the all-non-finite row alone behaves like an all-zero tensor.
  const std::vector<float> row4(x.begin() + 4 * ld, x.begin() + 5 * ld);
  check_problem<q::Quantizer<S, Sch, q::PerTensor>, float>(1, cols, 0, true, rng, &row4, ld);
}

}  // namespace

TEST_CASE("edge values (zero, constant, NaN, Inf, subnormal, huge rows) match the reference, every storage") {
  std::mt19937 rng(107);
  check_edges<int8_t, q::Symmetric>(rng);
  check_edges<int8_t, q::Asymmetric>(rng);
  check_edges<uint8_t, q::Asymmetric>(rng);
  check_edges<llmk::int4_t, q::Symmetric>(rng);
  check_edges<llmk::int4_t, q::Asymmetric>(rng);
  check_edges<llmk::uint4_t, q::Asymmetric>(rng);
  check_edges<llmk::float8_e4m3, q::Symmetric>(rng);
  check_edges<llmk::float8_e5m2, q::Symmetric>(rng);
}

TEST_CASE("edge values: the documented outcomes (int8 symmetric and e4m3, per token)") {
  const int cols = 40;
  const std::int64_t ld = 48;
  const std::vector<float> x = edge_rows(cols, ld);
  llmk::DeviceBuffer<float> d_x(x);
  llmk::DeviceBuffer<std::uint8_t> d_q(8 * ld);
  llmk::DeviceBuffer<float> d_s(8);
  llmk::DeviceBuffer<std::uint32_t> ws(4);
  std::size_t ws_bytes = ws.bytes();
  using Q8 = q::Quantizer<int8_t, q::Symmetric, q::PerToken>;
  REQUIRE(q::quantize_dynamic<Q8>(d_x.data(), ld, d_q.data(), ld, 8, cols, d_s.data(), nullptr, 0, ws.data(),
                                  &ws_bytes, nullptr)
              .ok());
  const std::vector<float> s = d_s.to_host();
  const std::vector<std::uint8_t> codes = d_q.to_host();
  auto code = [&](int r, int c) { return static_cast<int>(static_cast<std::int8_t>(codes[r * ld + c])); };
  CHECK(s[0] == 1.0f);  // all zero: scale 1, codes 0
  CHECK(code(0, 3) == 0);
  CHECK(s[1] == 2.5f / 127);  // constant: scale amax / 127, code 127
  CHECK(code(1, 0) == 127);
  CHECK(code(2, 0) == -127);
  CHECK(s[3] == (0.1f * 29.0f) / 127.0f);  // finite range of row 3 skips NaN and Inf: amax = |0.1 * 29|
  CHECK(code(3, 0) == 0);                  // NaN -> the zero point
  CHECK(code(3, 1) == 127);                // +Inf -> qmax
  CHECK(code(3, 2) == -128);               // -Inf -> qmin
  CHECK(s[4] == 1.0f);                     // nothing finite: like all zero
  CHECK(s[5] == 1.0f);                     // 1e-44 / 127 underflows to 0: scale 1
  CHECK(std::isfinite(s[6]));
  CHECK(s[7] == 1.0f);

  using E4 = q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::PerToken>;
  d_q.poison();
  REQUIRE(q::quantize_dynamic<E4>(d_x.data(), ld, d_q.data(), ld, 8, cols, d_s.data(), nullptr, 0, ws.data(),
                                  &ws_bytes, nullptr)
              .ok());
  const std::vector<std::uint8_t> f8 = d_q.to_host();
  CHECK(llmk::float8_e4m3::from_bits(f8[3 * ld + 0]).is_nan());               // NaN stays NaN
  CHECK(llmk::float8_e4m3::from_bits(f8[3 * ld + 1]).to_float() == 448.0f);   // +Inf saturates
  CHECK(llmk::float8_e4m3::from_bits(f8[3 * ld + 2]).to_float() == -448.0f);  // -Inf saturates
  CHECK(llmk::float8_e4m3::from_bits(f8[1 * ld + 0]).to_float() == 448.0f);   // constant row: amax -> 448
}

namespace {

// Subnormal groups (scheme.cuh, "Edge cases", and params_from_absmax / params_from_range: "all-zero group (or
// underflow): every code is 0", "a range so narrow that the division underflowed"): the scale is amax / qmax
// (fp8: amax / max finite; asymmetric: (hi - lo) / (qmax - qmin)) in fp32 with subnormals kept, so a group of
// fp16 subnormals (2^-24 and up) gets a normal scale and quantizes like any group, a float group below
// FLT_MIN a subnormal scale (fewer significant bits) while the division does not underflow, and a scale that
// underflows to 0 becomes 1: every code the zero point (0 symmetric and fp8; asymmetric: qmin, since
// round(-lo / 1) = 0), every value dequantizing to exactly 0.

// What quantize_dynamic and dequantize (of its own codes) produced: raw bytes.
struct TinyOutputs {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
  std::vector<std::int32_t> zeros;
  std::vector<float> y;  // dequantized, as fp32
};

template <class Q, class In, class Out>
TinyOutputs tiny_device(const std::vector<In>& x, std::int64_t ldx, int rows, int cols, int group_size) {
  const std::size_t np =
      static_cast<std::size_t>(q::param_count<typename Q::granularity>(rows, cols, group_size));
  const std::int64_t ldq = q::storage_row_bytes<typename Q::storage_type>(cols);
  llmk::DeviceBuffer<In> d_x(x);
  llmk::DeviceBuffer<std::uint8_t> d_q(static_cast<std::size_t>(rows * ldq));  // poisoned
  llmk::DeviceBuffer<float> d_s(np);
  llmk::DeviceBuffer<std::int32_t> d_z(np);
  llmk::DeviceBuffer<Out> d_y(static_cast<std::size_t>(rows) * cols);
  llmk::DeviceBuffer<std::uint32_t> ws(4);
  std::size_t ws_bytes = ws.bytes();
  llmk::Status s = q::quantize_dynamic<Q>(d_x.data(), ldx, d_q.data(), ldq, rows, cols, d_s.data(),
                                          Q::kAsymmetric ? d_z.data() : nullptr, group_size, ws.data(),
                                          &ws_bytes, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  s = q::dequantize<Q>(d_q.data(), ldq, d_y.data(), cols, rows, cols, d_s.data(),
                       Q::kAsymmetric ? d_z.data() : nullptr, group_size, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  TinyOutputs out{
      d_q.to_host(), d_s.to_host(), Q::kAsymmetric ? d_z.to_host() : std::vector<std::int32_t>(np), {}};
  for (const Out& v : d_y.to_host()) out.y.push_back(q::load_as_float(v));
  return out;
}

template <class Q, class In, class Out>
TinyOutputs tiny_reference(const std::vector<In>& x, std::int64_t ldx, int rows, int cols, int group_size) {
  const std::size_t np =
      static_cast<std::size_t>(q::param_count<typename Q::granularity>(rows, cols, group_size));
  const std::int64_t ldq = q::storage_row_bytes<typename Q::storage_type>(cols);
  TinyOutputs out{poisoned<std::uint8_t>(static_cast<std::size_t>(rows * ldq)),
                  poisoned<float>(np),
                  std::vector<std::int32_t>(np),
                  {}};
  ref::quantize_dynamic<Q>(x.data(), ldx, out.codes.data(), ldq, rows, cols, out.scales.data(),
                           out.zeros.data(), group_size);
  std::vector<Out> y = poisoned<Out>(static_cast<std::size_t>(rows) * cols);
  ref::dequantize<Q>(out.codes.data(), ldq, y.data(), cols, rows, cols, out.scales.data(), out.zeros.data(),
                     group_size);
  for (const Out& v : y) out.y.push_back(q::load_as_float(v));
  return out;
}

// Checks every group of `o` against the rules above, from the values alone; returns the number of groups
// whose scale underflowed.
template <class Q, class In, class Out>
int check_tiny_groups(const std::vector<In>& x, std::int64_t ldx, int rows, int cols, int group_size,
                      const TinyOutputs& o, const char* who) {
  INFO(who);
  using T = typename Q::traits;
  const ref::quant_detail::ParamLayout<Q> layout(cols, group_size);
  const std::int64_t ldq = q::storage_row_bytes<typename Q::storage_type>(cols);
  const std::size_t np = o.scales.size();
  // Half an ulp of the output type at y (fp16: 2^-25 in the subnormals).
  auto out_round = [](float y) {
    if constexpr (std::is_same_v<Out, llmk::half>) return std::max(std::ldexp(std::fabs(y), -11), 0x1p-25f);
    if constexpr (std::is_same_v<Out, llmk::bfloat16>) return std::ldexp(std::fabs(y), -8) + 0x1p-134f;
    return 0.0f;
  };
  int underflowed = 0, bad = 0;
  for (std::size_t g = 0; g < np; ++g) {
    std::vector<std::pair<int, int>> at;  // the group's elements (row, col)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        if (static_cast<std::size_t>(layout.index(r, c)) == g) at.emplace_back(r, c);
    float lo = 0.0f, hi = 0.0f, amax = 0.0f;
    for (auto [r, c] : at) {
      const float v = q::load_as_float(x[static_cast<std::size_t>(r * ldx + c)]);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      amax = std::max(amax, std::fabs(v));
    }
    float want;
    if constexpr (Q::kIsFloat)
      want = amax / T::kMaxFinite;
    else if constexpr (Q::kAsymmetric)
      want = (hi - lo) / static_cast<float>(T::kQmax - T::kQmin);
    else
      want = amax / static_cast<float>(T::kQmax);
    const bool underflow = !(want > 0.0f);
    underflowed += underflow;
    if (underflow) want = 1.0f;
    const float s = o.scales[g];
    const int z = o.zeros[g];
    CAPTURE(g);
    CAPTURE(amax);
    CHECK(std::memcmp(&s, &want, sizeof s) == 0);
    if constexpr (Q::kAsymmetric)
      if (underflow) CHECK(z == T::kQmin);
    int nonzero = 0;
    for (auto [r, c] : at) {
      const float v = q::load_as_float(x[static_cast<std::size_t>(r * ldx + c)]);
      const auto code = ref::quant_detail::code_at<Q>(o.codes.data() + r * ldq, c);
      const float y = o.y[static_cast<std::size_t>(r) * cols + c];
      bool ok;
      float k;  // the code in units of s
      if constexpr (Q::kIsFloat)
        k = code.to_float();
      else
        k = static_cast<float>(code - z);
      nonzero += k != 0.0f;
      if (underflow) {
        ok = k == 0.0f && y == 0.0f;
      } else {
        // Inside the clipping range: the round trip's error bound; past it (a subnormal scale rounded
        // down): the end code.
        double k_lo, k_hi, tol;
        if constexpr (Q::kIsFloat) {
          k_lo = -T::kMaxFinite;
          k_hi = T::kMaxFinite;
          const float sub = std::is_same_v<typename Q::storage_type, llmk::float8_e4m3> ? 0x1p-10f : 0x1p-17f;
          tol = std::ldexp(std::fabs(v),
                           std::is_same_v<typename Q::storage_type, llmk::float8_e4m3> ? -4 : -3) +
                sub * s;
        } else {
          k_lo = T::kQmin - z;
          k_hi = T::kQmax - z;
          tol = 0.5 * s;
        }
        tol += std::ldexp(std::fabs(v), -22) + out_round(y) + 0x1p-149;
        const double quotient = static_cast<double>(v) / s;
        if (quotient >= k_lo - 0.5 && quotient <= k_hi + 0.5)
          ok = std::fabs(static_cast<double>(v) - y) <= tol;
        else
          ok = k == (quotient < 0 ? k_lo : k_hi);
      }
      if (!ok && bad++ < 5)
        MESSAGE("element [" << r << "][" << c << "] = " << v << ": code " << k << " (scale " << s
                            << ", zero point " << z << "), dequantized " << y
                            << (underflow ? ", want code 0 / 0" : ""));
    }
    if (!underflow) CHECK(nonzero > 0);
  }
  CHECK(bad == 0);
  return underflowed;
}

// check_problem (kernel == reference, bit for bit: dynamic, static, dequantized) and the rules on the
// kernel's and the reference's outputs; returns the number of groups whose scale underflowed.
template <class Q, class In, class Out>
int check_tiny(const std::vector<In>& x, std::int64_t ldx, int rows, int cols, int group_size,
               std::mt19937& rng) {
  check_problem<Q, In, Out>(rows, cols, group_size, true, rng, &x, ldx);
  const TinyOutputs dev = tiny_device<Q, In, Out>(x, ldx, rows, cols, group_size);
  const TinyOutputs host = tiny_reference<Q, In, Out>(x, ldx, rows, cols, group_size);
  const int under = check_tiny_groups<Q, In, Out>(x, ldx, rows, cols, group_size, dev, "kernel");
  CHECK(check_tiny_groups<Q, In, Out>(x, ldx, rows, cols, group_size, host, "reference") == under);
  return under;
}

}  // namespace

// Float groups of 16 (2 rows of 64, row pitch 68 with 1e6 in the padding) below FLT_MIN = 2^-126: g0 normal
// values (a control), g1 in +-[2^-131, 2^-127], g2 multiples k 2^-149 with k in [-127, 127] and both +-127
// present, g3 +-[1, 8] 2^-149, g4 +-2^-149 only, g5 +-[2^-140, 2^-138], g6 2^-149 and one value 1e-38, g7
// +-[64, 128) 2^-149 and 128 2^-149 (the int8 scale rounds to 2^-149, so 128 2^-149 clips to code 127: a
// subnormal scale has few significant bits). Int8 symmetric, uint8 asymmetric and e4m3, group-wise.
TEST_CASE(
    "subnormal groups: float values below FLT_MIN, a subnormal scale or (underflow) scale 1 and code 0") {
  std::mt19937 rng(108);
  const int rows = 2, cols = 64, group = 16;
  const std::int64_t ld = 68;
  std::vector<float> x(static_cast<std::size_t>(rows) * ld, 1e6f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> k127(1, 127), k8(1, 8);
  auto sign = [&] { return unit(rng) < 0.5f ? -1.0f : 1.0f; };
  auto between = [&](float lo, float hi) { return sign() * (lo + (hi - lo) * unit(rng)); };
  for (int g = 0; g < 8; ++g)
    for (int e = 0; e < group; ++e) {
      float& v = x[static_cast<std::size_t>(g / 4) * ld + (g % 4) * group + e];
      switch (g) {
        case 0:
          v = between(0.25f, 1.0f);
          break;
        case 1:
          v = between(0x1p-131f, 0x1p-127f);
          break;
        case 2:
          v = e < 2 ? (e == 0 ? 127.0f : -127.0f) * 0x1p-149f : sign() * k127(rng) * 0x1p-149f;
          break;
        case 3:
          v = sign() * k8(rng) * 0x1p-149f;
          break;
        case 4:
          v = sign() * 0x1p-149f;
          break;
        case 5:
          v = between(0x1p-140f, 0x1p-138f);
          break;
        case 6:
          v = e == 5 ? 1e-38f : sign() * 0x1p-149f;
          break;
        default:
          v = e == 0 ? 0x1p-142f : between(0x1p-143f, 0x1p-142f);
          break;
      }
      REQUIRE(v != 0.0f);
    }
  using I8 = q::Quantizer<int8_t, q::Symmetric, q::GroupWise<>>;
  using U8 = q::Quantizer<uint8_t, q::Asymmetric, q::GroupWise<>>;
  using E4 = q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::GroupWise<>>;
  const int under_i8 = check_tiny<I8, float, float>(x, ld, rows, cols, group, rng);
  const int under_u8 = check_tiny<U8, float, float>(x, ld, rows, cols, group, rng);
  const int under_e4 = check_tiny<E4, float, float>(x, ld, rows, cols, group, rng);
  CHECK(under_i8 == 2);  // g3, g4
  CHECK(under_u8 == 2);
  CHECK(under_e4 == 4);  // g2 and g7 too: 128 2^-149 / 448 rounds to 0
  // g2, int8 and uint8: the scale is exactly 2^-149 and every value survives the round trip exactly.
  for (const TinyOutputs& o : {tiny_device<I8, float, float>(x, ld, rows, cols, group),
                               tiny_reference<I8, float, float>(x, ld, rows, cols, group),
                               tiny_device<U8, float, float>(x, ld, rows, cols, group)}) {
    CHECK(o.scales[2] == 0x1p-149f);
    for (int e = 0; e < group; ++e)
      CHECK(o.y[static_cast<std::size_t>(2 * group + e)] == x[static_cast<std::size_t>(2 * group + e)]);
  }
}

// fp16 subnormals (multiples of 2^-24 below 2^-14): the scale amax / qmax is a normal float, so these
// groups quantize like any other (no underflow): per token int8 (rows of k 2^-24 with k up to 1023, up to 8,
// and +-2^-24 alone, which round-trips exactly), per tensor e4m3 and group-wise int4 asymmetric (groups of
// 24), fp16 out. The fp16 instantiations of the tests above.
TEST_CASE("subnormal groups: fp16 subnormals get a normal scale and quantize like any group") {
  using llmk::half;
  std::mt19937 rng(109);
  const int rows = 3, cols = 48;
  std::vector<half> x(static_cast<std::size_t>(rows) * cols);
  std::uniform_int_distribution<int> k1023(1, 1023), k8(1, 8), coin(0, 1);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int k = r == 0 ? k1023(rng) : (r == 1 ? k8(rng) : 1);
      x[static_cast<std::size_t>(r) * cols + c] =
          half::from_bits(static_cast<std::uint16_t>((coin(rng) ? 0x8000 : 0) | k));
    }
  for (const half& v : x) REQUIRE((v.to_float() != 0.0f && std::fabs(v.to_float()) < 0x1p-14f));
  using I8 = q::Quantizer<int8_t, q::Symmetric, q::PerToken>;
  using E4 = q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::PerTensor>;
  using A4 = q::Quantizer<llmk::int4_t, q::Asymmetric, q::GroupWise<>>;
  CHECK(check_tiny<I8, half, half>(x, cols, rows, cols, 0, rng) == 0);
  CHECK(check_tiny<E4, half, half>(x, cols, rows, cols, 0, rng) == 0);
  CHECK(check_tiny<A4, half, half>(x, cols, rows, cols, 24, rng) == 0);
  // Row 2 (+-2^-24 only): int8 codes +-127, back to +-2^-24 exactly in fp16.
  const TinyOutputs o = tiny_device<I8, half, half>(x, cols, rows, cols, 0);
  CHECK(o.scales[2] == 0x1p-24f / 127.0f);
  for (int c = 0; c < cols; ++c) {
    CHECK(std::abs(static_cast<int>(
              static_cast<std::int8_t>(o.codes[static_cast<std::size_t>(2 * cols + c)]))) == 127);
    CHECK(o.y[static_cast<std::size_t>(2 * cols + c)] ==
          x[static_cast<std::size_t>(2 * cols + c)].to_float());
  }
}

TEST_CASE("empty tensors: ok, nothing launched, nothing written") {
  llmk::DeviceBuffer<float> x(64), s(4), amax(4);
  llmk::DeviceBuffer<std::uint8_t> qb(64);
  llmk::DeviceBuffer<std::uint32_t> ws(4);
  std::size_t ws_bytes = ws.bytes();
  using Q = q::Quantizer<llmk::int4_t, q::Asymmetric, q::GroupWise<>>;
  using QT = q::Quantizer<int8_t, q::Symmetric, q::PerTensor>;
  llmk::DeviceBuffer<std::int32_t> z(4);
  for (auto [rows, cols] : {std::pair{0, 8}, std::pair{3, 0}, std::pair{0, 0}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    CHECK(q::quantize_dynamic<Q>(x.data(), 8, qb.data(), 4, rows, cols, s.data(), z.data(), 4, ws.data(),
                                 &ws_bytes, nullptr)
              .ok());
    CHECK(q::quantize_dynamic<QT>(x.data(), 8, qb.data(), 8, rows, cols, s.data(), nullptr, 0, ws.data(),
                                  &ws_bytes, nullptr)
              .ok());
    CHECK(q::quantize<Q>(x.data(), 8, qb.data(), 4, rows, cols, s.data(), z.data(), 4, nullptr).ok());
    CHECK(q::dequantize<Q>(qb.data(), 4, x.data(), 8, rows, cols, s.data(), z.data(), 4, nullptr).ok());
    CHECK(q::row_amax(x.data(), 8, rows, cols, amax.data(), nullptr).ok());
    CHECK(q::tensor_amax(x.data(), 8, rows, cols, amax.data(), nullptr).ok());
    CHECK(q::pack_int4<llmk::int4_t>(reinterpret_cast<const std::int8_t*>(qb.data()), 8, qb.data(), 4, rows,
                                     cols, nullptr)
              .ok());
    // null pointers are fine for an empty tensor
    CHECK(q::quantize<Q, float>(nullptr, 8, nullptr, 4, rows, cols, nullptr, nullptr, 4, nullptr).ok());
  }
  for (const auto& buf : {x.to_host(), s.to_host(), amax.to_host()})
    for (float v : buf) CHECK(std::isnan(v));  // still poison
  for (std::uint8_t b : qb.to_host()) CHECK(b == 0xFF);
}

namespace {

template <class In>
void check_amax(int rows, int cols, std::int64_t ld, std::mt19937& rng) {
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(ld);
  std::vector<In> x = random_input<In>(rows, cols, ld, rng);
  // NaN and Inf are skipped; put them where they would win
  x[0] = llmk::quant::convert_output<In>(std::numeric_limits<float>::quiet_NaN());
  if (cols > 1) x[1] = llmk::quant::convert_output<In>(-kInf);
  if (rows > 1) x[static_cast<std::size_t>(ld) + cols - 1] = llmk::quant::convert_output<In>(kInf);
  llmk::DeviceBuffer<In> d_x(x);
  llmk::DeviceBuffer<float> d_amax(rows), d_t(1);
  std::vector<float> want(rows);
  ref::row_amax(x.data(), ld, rows, cols, want.data());
  llmk::Status s = q::row_amax(d_x.data(), ld, rows, cols, d_amax.data(), nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(same_bytes(d_amax.to_host(), want, "row amax"));
  const llmk::Status s_tensor = q::tensor_amax(d_x.data(), ld, rows, cols, d_t.data(), nullptr);
  REQUIRE_MESSAGE(s_tensor.ok(), s_tensor.message());
  CHECK(same_bytes(d_t.to_host(), std::vector<float>{ref::tensor_amax(x.data(), ld, rows, cols)},
                   "tensor amax"));
}

}  // namespace

TEST_CASE("row_amax and tensor_amax match the reference, skipping NaN and Inf") {
  std::mt19937 rng(108);
  check_amax<float>(1, 200, 200, rng);
  check_amax<float>(17, 257, 264, rng);
  check_amax<float>(63, 24, 27, rng);
  check_amax<float>(llmk::test::pick(300, 8), 1000, 1000, rng);  // several blocks fold into the atomic
  check_amax<llmk::half>(9, 100, 104, rng);
  check_amax<llmk::bfloat16>(10, 33, 33, rng);
}

namespace {

template <class S>
void check_int4_pack(int rows, int cols, bool aligned, std::mt19937& rng) {
  using Code = std::conditional_t<std::is_same_v<S, llmk::int4_t>, std::int8_t, std::uint8_t>;
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(aligned);
  const std::int64_t ldc = aligned ? llmk::round_up(cols, 16) + 16 : cols + 1;
  const std::int64_t packed_bytes = (cols + 1) / 2;
  const std::int64_t ldp = aligned ? llmk::round_up<std::int64_t>(packed_bytes, 16) + 16 : packed_bytes + 3;
  // codes include out-of-range values, which saturate
  std::uniform_int_distribution<int> dist(std::is_same_v<S, llmk::int4_t> ? -12 : 0,
                                          std::is_same_v<S, llmk::int4_t> ? 11 : 20);
  std::vector<Code> codes(static_cast<std::size_t>(rows) * ldc, Code(3));
  for (auto& c : codes) c = static_cast<Code>(dist(rng));
  std::vector<std::uint8_t> want = poisoned<std::uint8_t>(static_cast<std::size_t>(rows) * ldp);
  ref::pack_int4<S>(codes.data(), ldc, want.data(), ldp, rows, cols);
  llmk::DeviceBuffer<Code> d_codes(codes);
  llmk::DeviceBuffer<std::uint8_t> d_packed(want.size());
  llmk::Status s = q::pack_int4<S>(d_codes.data(), ldc, d_packed.data(), ldp, rows, cols, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(same_bytes(d_packed.to_host(), want, "packed"));

  // unpack random bytes (an odd row's padding nibble is garbage and must be ignored)
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(rows) * ldp);
  for (auto& b : packed) b = static_cast<std::uint8_t>(byte(rng));
  std::vector<Code> want_codes = poisoned<Code>(static_cast<std::size_t>(rows) * ldc);
  ref::unpack_int4<S>(packed.data(), ldp, want_codes.data(), ldc, rows, cols);
  llmk::DeviceBuffer<std::uint8_t> d_in(packed);
  llmk::DeviceBuffer<Code> d_out(want_codes.size());
  const llmk::Status s_unpack = q::unpack_int4<S>(d_in.data(), ldp, d_out.data(), ldc, rows, cols, nullptr);
  REQUIRE_MESSAGE(s_unpack.ok(), s_unpack.message());
  CHECK(same_bytes(d_out.to_host(), want_codes, "unpacked"));
}

}  // namespace

TEST_CASE("pack_int4 / unpack_int4: the core nibble order, saturation, odd lengths") {
  std::mt19937 rng(109);
  for (auto [rows, cols] : {std::pair{1, 1}, std::pair{7, 63}, std::pair{17, 64}, std::pair{3, 200}})
    for (bool aligned : {true, false}) {
      check_int4_pack<llmk::int4_t>(rows, cols, aligned, rng);
      check_int4_pack<llmk::uint4_t>(rows, cols, aligned, rng);
    }
  // the documented example: 9 saturates to 7 (int4), not masked to -7
  const std::vector<std::int8_t> codes = {9, -3, -20};
  llmk::DeviceBuffer<std::int8_t> d_codes(codes);
  llmk::DeviceBuffer<std::uint8_t> d_packed(2);
  REQUIRE(q::pack_int4<llmk::int4_t>(d_codes.data(), 3, d_packed.data(), 2, 1, 3, nullptr).ok());
  const std::vector<std::uint8_t> p = d_packed.to_host();
  CHECK(llmk::int4x2::from_bits(p[0]).get(0) == 7);
  CHECK(llmk::int4x2::from_bits(p[0]).get(1) == -3);
  CHECK(p[1] == 0x08);  // -8 in the low nibble, zero padding above
}

namespace {

void expect_error(const llmk::Status& s, const char* needle) {
  CHECK_FALSE(s.ok());
  CHECK(s.code() == llmk::Status::Code::kInvalidArgument);
  CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message(), " (wanted: ", needle, ")");
}

}  // namespace

TEST_CASE("quantize and dequantize reject bad arguments with a message naming the argument") {
  llmk::DeviceBuffer<float> x(1024), s(64);
  llmk::DeviceBuffer<std::int32_t> z(64);
  llmk::DeviceBuffer<std::uint8_t> qb(1024);
  using A = q::Quantizer<int8_t, q::Asymmetric, q::PerToken>;
  using G128 = q::Quantizer<llmk::int4_t, q::Symmetric, q::GroupWise<128>>;
  using G = q::Quantizer<uint8_t, q::Asymmetric, q::GroupWise<>>;
  auto quant = [&](const float* px, std::int64_t ldx, void* pq, std::int64_t ldq, int rows, int cols,
                   const float* ps, const std::int32_t* pz) {
    return q::quantize<A>(px, ldx, pq, ldq, rows, cols, ps, pz, 0, nullptr);
  };
  expect_error(quant(x.data(), 16, qb.data(), 16, -1, 16, s.data(), z.data()), "'rows': must be >= 0");
  expect_error(quant(x.data(), 16, qb.data(), 16, 4, -2, s.data(), z.data()), "'cols': must be >= 0");
  expect_error(quant(x.data(), 15, qb.data(), 16, 4, 16, s.data(), z.data()), "'ldx': must be >=");
  expect_error(quant(x.data(), 16, qb.data(), 15, 4, 16, s.data(), z.data()), "'ldq_bytes': must be >=");
  expect_error(quant(nullptr, 16, qb.data(), 16, 4, 16, s.data(), z.data()), "'x': must not be null");
  expect_error(quant(x.data(), 16, nullptr, 16, 4, 16, s.data(), z.data()), "'q': must not be null");
  expect_error(quant(x.data(), 16, qb.data(), 16, 4, 16, nullptr, z.data()), "'scales': must not be null");
  expect_error(quant(x.data(), 16, qb.data(), 16, 4, 16, s.data(), nullptr),
               "'zero_points': must not be null");
  const float* misaligned = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x.data()) + 2);
  expect_error(quant(misaligned, 16, qb.data(), 16, 4, 16, s.data(), z.data()), "'x': must be aligned");
  // group size rules
  expect_error(q::quantize<G128>(x.data(), 256, qb.data(), 128, 2, 256, s.data(), nullptr, 64, nullptr),
               "'group_size': must equal the quantizer's GroupWise<128>");
  expect_error(q::quantize<G>(x.data(), 256, qb.data(), 256, 2, 256, s.data(), z.data(), 0, nullptr),
               "'group_size': must be >= 1");
  expect_error(q::quantize<G>(x.data(), 100, qb.data(), 100, 2, 100, s.data(), z.data(), 32, nullptr),
               "'group_size': must divide cols (cols=100, group_size=32)");
  // int4 rows are ceil(cols / 2) bytes
  expect_error(q::quantize<G128>(x.data(), 256, qb.data(), 127, 2, 256, s.data(), nullptr, 128, nullptr),
               "'ldq_bytes': must be >=");
  CHECK(q::quantize<G128>(x.data(), 256, qb.data(), 128, 2, 256, s.data(), nullptr, 128, nullptr).ok());

  auto deq = [&](const void* pq, std::int64_t ldq, float* py, std::int64_t ldy, int rows, int cols,
                 const float* ps, const std::int32_t* pz) {
    return q::dequantize<A>(pq, ldq, py, ldy, rows, cols, ps, pz, 0, nullptr);
  };
  expect_error(deq(qb.data(), 16, x.data(), 16, -1, 16, s.data(), z.data()), "'rows'");
  expect_error(deq(qb.data(), 16, x.data(), 16, 4, -1, s.data(), z.data()), "'cols'");
  expect_error(deq(qb.data(), 8, x.data(), 16, 4, 16, s.data(), z.data()), "'ldq_bytes': must be >=");
  expect_error(deq(qb.data(), 16, x.data(), 8, 4, 16, s.data(), z.data()), "'ldy': must be >=");
  expect_error(deq(nullptr, 16, x.data(), 16, 4, 16, s.data(), z.data()), "'q': must not be null");
  expect_error(deq(qb.data(), 16, nullptr, 16, 4, 16, s.data(), z.data()), "'y': must not be null");
  expect_error(deq(qb.data(), 16, x.data(), 16, 4, 16, nullptr, z.data()), "'scales': must not be null");
  expect_error(deq(qb.data(), 16, x.data(), 16, 4, 16, s.data(), nullptr), "'zero_points': must not be null");
  expect_error(deq(qb.data(), 16, const_cast<float*>(misaligned), 16, 4, 16, s.data(), z.data()),
               "'y': must be aligned");
  expect_error(q::dequantize<G>(qb.data(), 100, x.data(), 100, 2, 100, s.data(), z.data(), 30, nullptr),
               "'group_size': must divide cols");
}

TEST_CASE("quantize_dynamic, the amax reductions and int4 packing reject bad arguments naming the argument") {
  llmk::DeviceBuffer<float> x(1024), s(64);
  llmk::DeviceBuffer<std::int32_t> z(64);
  llmk::DeviceBuffer<std::uint8_t> qb(1024);
  llmk::DeviceBuffer<std::uint32_t> ws(8);
  using A = q::Quantizer<uint8_t, q::Asymmetric, q::PerTensor>;
  using G = q::Quantizer<int8_t, q::Symmetric, q::GroupWise<>>;
  std::size_t ws_bytes = ws.bytes();
  auto dyn = [&](const float* px, std::int64_t ldx, std::int64_t ldq, int rows, int cols, float* ps,
                 std::int32_t* pz, void* pws, std::size_t* pbytes) {
    return q::quantize_dynamic<A>(px, ldx, qb.data(), ldq, rows, cols, ps, pz, 0, pws, pbytes, nullptr);
  };
  expect_error(dyn(x.data(), 16, 16, 4, 16, s.data(), z.data(), ws.data(), nullptr),
               "'workspace_bytes': must not be null");
  std::size_t small = 4;
  expect_error(dyn(x.data(), 16, 16, 4, 16, s.data(), z.data(), ws.data(), &small),
               "'workspace_bytes': must be >= 16");
  expect_error(
      dyn(x.data(), 16, 16, 4, 16, s.data(), z.data(), reinterpret_cast<char*>(ws.data()) + 1, &ws_bytes),
      "'workspace': must be 4-byte aligned");
  expect_error(dyn(x.data(), 16, 16, -4, 16, s.data(), z.data(), ws.data(), &ws_bytes), "'rows'");
  expect_error(dyn(x.data(), 16, 16, 4, -16, s.data(), z.data(), ws.data(), &ws_bytes), "'cols'");
  expect_error(dyn(x.data(), 10, 16, 4, 16, s.data(), z.data(), ws.data(), &ws_bytes), "'ldx'");
  expect_error(dyn(x.data(), 16, 10, 4, 16, s.data(), z.data(), ws.data(), &ws_bytes), "'ldq_bytes'");
  expect_error(dyn(nullptr, 16, 16, 4, 16, s.data(), z.data(), ws.data(), &ws_bytes),
               "'x': must not be null");
  expect_error(dyn(x.data(), 16, 16, 4, 16, nullptr, z.data(), ws.data(), &ws_bytes),
               "'scales_out': must not be null");
  expect_error(dyn(x.data(), 16, 16, 4, 16, s.data(), nullptr, ws.data(), &ws_bytes),
               "'zero_points_out': must not be null");
  expect_error(q::quantize_dynamic<A>(x.data(), 16, nullptr, 16, 4, 16, s.data(), z.data(), 0, ws.data(),
                                      &ws_bytes, nullptr),
               "'q': must not be null");
  expect_error(q::quantize_dynamic<G>(x.data(), 100, qb.data(), 100, 2, 100, s.data(), nullptr, 32, ws.data(),
                                      &ws_bytes, nullptr),
               "'group_size': must divide cols (cols=100, group_size=32)");
  expect_error(q::quantize_dynamic<G>(x.data(), 100, qb.data(), 100, 2, 100, s.data(), nullptr, -5, ws.data(),
                                      &ws_bytes, nullptr),
               "'group_size': must be >= 1");
  const float* misaligned = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x.data()) + 1);
  expect_error(dyn(misaligned, 16, 16, 4, 16, s.data(), z.data(), ws.data(), &ws_bytes),
               "'x': must be aligned");
  // the size query writes the size and nothing else
  std::size_t queried = 0;
  CHECK(dyn(nullptr, 0, 0, -1, -1, nullptr, nullptr, nullptr, &queried).ok());
  CHECK(queried == q::kQuantizeDynamicWorkspaceBytes);

  // amax reductions
  llmk::DeviceBuffer<float> amax(64);
  for (int which = 0; which < 2; ++which) {
    auto run = [&](const float* px, std::int64_t ldx, int rows, int cols, float* out) {
      return which == 0 ? q::row_amax(px, ldx, rows, cols, out, nullptr)
                        : q::tensor_amax(px, ldx, rows, cols, out, nullptr);
    };
    expect_error(run(x.data(), 16, -1, 16, amax.data()), "'rows'");
    expect_error(run(x.data(), 16, 1, -1, amax.data()), "'cols'");
    expect_error(run(x.data(), 8, 2, 16, amax.data()), "'ldx': must be >=");
    expect_error(run(nullptr, 16, 2, 16, amax.data()), "'x': must not be null");
    expect_error(run(x.data(), 16, 2, 16, nullptr), "'amax_out': must not be null");
    expect_error(run(misaligned, 16, 2, 16, amax.data()), "'x': must be aligned");
  }
  expect_error(q::tensor_amax(x.data(), 16, 2, 16,
                              reinterpret_cast<float*>(reinterpret_cast<char*>(amax.data()) + 2), nullptr),
               "'amax_out': must be 4-byte aligned");

  // int4 packing
  const auto* codes = reinterpret_cast<const std::int8_t*>(qb.data());
  expect_error(q::pack_int4<llmk::int4_t>(codes, 16, qb.data(), 8, -1, 16, nullptr), "'rows'");
  expect_error(q::pack_int4<llmk::int4_t>(codes, 16, qb.data(), 8, 1, -1, nullptr), "'cols'");
  expect_error(q::pack_int4<llmk::int4_t>(codes, 15, qb.data(), 8, 2, 16, nullptr), "'ld_codes': must be >=");
  expect_error(q::pack_int4<llmk::int4_t>(codes, 17, qb.data(), 8, 2, 17, nullptr),
               "'ld_packed_bytes': must be >=");
  expect_error(q::pack_int4<llmk::int4_t>(nullptr, 16, qb.data(), 8, 2, 16, nullptr),
               "'codes': must not be null");
  expect_error(q::pack_int4<llmk::int4_t>(codes, 16, nullptr, 8, 2, 16, nullptr),
               "'packed': must not be null");
  auto* ucodes = qb.data() + 512;
  expect_error(q::unpack_int4<llmk::uint4_t>(qb.data(), 8, ucodes, 15, 2, 16, nullptr),
               "'ld_codes': must be >=");
  expect_error(q::unpack_int4<llmk::uint4_t>(qb.data(), 7, ucodes, 16, 2, 16, nullptr),
               "'ld_packed_bytes': must be >=");
  expect_error(q::unpack_int4<llmk::uint4_t>(nullptr, 8, ucodes, 16, 2, 16, nullptr),
               "'packed': must not be null");
  expect_error(q::unpack_int4<llmk::uint4_t>(qb.data(), 8, nullptr, 16, 2, 16, nullptr),
               "'codes': must not be null");
}

TEST_CASE("typed pointers must be aligned to their element (a misaligned pointer faults on the GPU)") {
  using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Asymmetric, llmk::quant::PerToken>;
  llmk::DeviceBuffer<float> x(64), scales(8);
  llmk::DeviceBuffer<std::int32_t> zeros(8), cols_out(16);
  llmk::DeviceBuffer<std::uint8_t> q(64);
  auto* bad_scales = reinterpret_cast<float*>(reinterpret_cast<char*>(scales.data()) + 1);
  auto* bad_zeros = reinterpret_cast<std::int32_t*>(reinterpret_cast<char*>(zeros.data()) + 2);
  auto* bad_x = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x.data()) + 1);
  auto message_has = [](const llmk::Status& st, const char* needle) {
    CHECK_FALSE(st.ok());
    CHECK_MESSAGE(st.message().find(needle) != std::string::npos, st.message());
  };
  message_has(llmk::quant::quantize<Q>(x.data(), 8, q.data(), 8, 4, 8, bad_scales, zeros.data(), 0, nullptr),
              "'scales': must be aligned");
  message_has(llmk::quant::quantize<Q>(x.data(), 8, q.data(), 8, 4, 8, scales.data(), bad_zeros, 0, nullptr),
              "'zero_points': must be aligned");
  {  // a symmetric quantizer ignores zero_points, so their alignment is not its business
    using QS = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerToken>;
    llmk::DeviceBuffer<float> ones(std::vector<float>(32, 1.0f)), unit(std::vector<float>(4, 1.0f));
    const llmk::Status st =
        llmk::quant::quantize<QS>(ones.data(), 8, q.data(), 8, 4, 8, unit.data(), bad_zeros, 0, nullptr);
    CHECK_MESSAGE(st.ok(), st.message());
  }
  message_has(
      llmk::quant::dequantize<Q>(q.data(), 8, x.data(), 8, 4, 8, bad_scales, zeros.data(), 0, nullptr),
      "'scales': must be aligned");
  message_has(llmk::quant::row_amax(x.data(), 8, 4, 8, bad_scales, nullptr), "'amax_out': must be aligned");
  message_has(llmk::quant::column_amax(bad_x, 8, 4, 8, scales.data(), nullptr), "'x': must be aligned");
  message_has(llmk::quant::column_amax(x.data(), 8, 4, 8, bad_scales, nullptr),
              "'amax_out': must be aligned");
  message_has(llmk::quant::find_outlier_columns(x.data(), 8, 4, 8, 6.0f, bad_zeros, cols_out.data(), nullptr),
              "'outlier_cols': must be aligned");
}

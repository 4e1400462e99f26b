// Tests for llmk/core/numeric.cuh, int4.cuh and math.cuh (host side; the same source runs in the
// simulator build and in the nvcc build).
//
// Conversions are checked three ways:
//  1. exhaustively over every bit pattern of the small types (decode exactly, re-encode);
//  2. against an independent reference: the nearest value, ties to the even code, found by binary search
//     in a table of every representable magnitude computed in double with std::ldexp (it shares no code
//     with the bit-manipulating implementation);
//  3. against NVIDIA's own host conversion functions (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h): always under
//     nvcc, and in a plain host build (no LLMK_SIM) when the CUDA headers are on the include path. Not in
//     the simulator build: the CUDA headers define dim3/uint3 and __host__/__device__ themselves and clash
//     with the simulator's shim.
#if defined(__CUDACC__)
#define LLMK_TEST_HAVE_NVIDIA_REFERENCE 1
#elif !defined(LLMK_SIM) && __has_include(<cuda_fp8.h>)
#define LLMK_TEST_HAVE_NVIDIA_REFERENCE 1
#endif

#if defined(LLMK_TEST_HAVE_NVIDIA_REFERENCE)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "llmk/core/int4.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"

// Kernels run only where there is a backend that runs them (simulator or nvcc).
#if defined(LLMK_SIM) || defined(__CUDACC__)
#define LLMK_TEST_HAVE_KERNELS 1
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#endif

#include <doctest/doctest.h>

#include "support/test_env.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <ios>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

float as_float(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
uint32_t as_bits(float value) {
  return std::bit_cast<uint32_t>(value);
}

// ---------------------------------------------------------------------------------------------------
// Independent reference: a binary format described by its field widths, decoded with std::ldexp.
struct FormatDescription {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  uint32_t max_finite_code;  // largest positive finite code
};

constexpr FormatDescription kHalfFormat{5, 10, 15, 0x7BFF};
constexpr FormatDescription kBfloat16Format{8, 7, 127, 0x7F7F};
constexpr FormatDescription kE4M3Format{4, 3, 7, 0x7E};
constexpr FormatDescription kE5M2Format{5, 2, 15, 0x7B};

double reference_decode_magnitude(const FormatDescription& format, uint32_t code) {
  const uint32_t mantissa = code & ((1u << format.mantissa_bits) - 1u);
  const int exponent_field = int(code >> format.mantissa_bits);
  if (exponent_field == 0) return std::ldexp(double(mantissa), 1 - format.bias - format.mantissa_bits);
  return std::ldexp(1.0 + std::ldexp(double(mantissa), -format.mantissa_bits), exponent_field - format.bias);
}

// Every finite magnitude, indexed by code, plus one virtual value past the largest (the value the
// format would have with one more code): rounding onto it means overflow.
struct MagnitudeTable {
  FormatDescription format;
  std::vector<double> magnitudes;

  explicit MagnitudeTable(const FormatDescription& description) : format(description) {
    for (uint32_t code = 0; code <= format.max_finite_code + 1; ++code) {
      magnitudes.push_back(reference_decode_magnitude(format, code));
    }
  }

  // Code of the nearest magnitude to |value| (ties to the even code); max_finite_code + 1 = overflow.
  uint32_t nearest_code(double magnitude) const {
    const auto above = std::lower_bound(magnitudes.begin(), magnitudes.end(), magnitude);
    if (above == magnitudes.end()) return format.max_finite_code + 1;
    const uint32_t upper = uint32_t(above - magnitudes.begin());
    if (upper == 0 || *above == magnitude) return upper;
    const uint32_t lower = upper - 1;
    const double distance_up = magnitudes[upper] - magnitude;
    const double distance_down = magnitude - magnitudes[lower];
    if (distance_up < distance_down) return upper;
    if (distance_down < distance_up) return lower;
    return (lower % 2 == 0) ? lower : upper;
  }
};

const MagnitudeTable& half_table() {
  static const MagnitudeTable table(kHalfFormat);
  return table;
}
const MagnitudeTable& bfloat16_table() {
  static const MagnitudeTable table(kBfloat16Format);
  return table;
}
const MagnitudeTable& e4m3_table() {
  static const MagnitudeTable table(kE4M3Format);
  return table;
}
const MagnitudeTable& e5m2_table() {
  static const MagnitudeTable table(kE5M2Format);
  return table;
}

// Reference float -> half / bfloat16 bits (IEEE: overflow to inf, NaN to the canonical 0x7FFF).
uint16_t reference_to_ieee16(const MagnitudeTable& table, float value) {
  if (std::isnan(value)) return 0x7FFF;
  const uint32_t sign = std::signbit(value) ? 0x8000u : 0u;
  const uint32_t inf_code = table.format.max_finite_code + 1;  // the next code after max is inf
  if (std::isinf(value)) return uint16_t(sign | inf_code);
  return uint16_t(sign | table.nearest_code(std::fabs(double(value))));
}

enum class Fp8Mode { kSatFinite, kNonSaturating };

// Reference float -> fp8 bits.
uint8_t reference_to_fp8(const MagnitudeTable& table, float value, Fp8Mode mode, bool has_inf) {
  if (std::isnan(value)) return 0x7F;
  const uint32_t sign = std::signbit(value) ? 0x80u : 0u;
  const uint32_t overflow_code = table.format.max_finite_code + 1;
  const uint32_t code = std::isinf(value) ? overflow_code : table.nearest_code(std::fabs(double(value)));
  if (code == overflow_code) {
    if (mode == Fp8Mode::kSatFinite) return uint8_t(sign | table.format.max_finite_code);
    return has_inf ? uint8_t(sign | 0x7C) : uint8_t(0x7F);
  }
  return uint8_t(sign | code);
}

// Random floats: all bit patterns uniformly, plus values spread over the exponents that matter.
std::vector<float> random_floats(std::size_t count, int min_exponent, int max_exponent, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_int_distribution<int> exponent(min_exponent, max_exponent);
  std::vector<float> values;
  values.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const uint32_t bits = any_bits(engine);
    if (i % 2 == 0) {
      values.push_back(as_float(bits));
    } else {  // keep sign and mantissa, choose the exponent
      values.push_back(as_float((bits & 0x807FFFFFu) | (uint32_t(exponent(engine) + 127) << 23)));
    }
  }
  return values;
}

// Edge cases common to all formats, plus every midpoint between adjacent codes of `table` and the
// floats just around each midpoint.
std::vector<float> edge_floats(const MagnitudeTable& table) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               as_float(0x7F800001u),  // signalling NaN
                               as_float(0xFFC12345u),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               -std::numeric_limits<float>::denorm_min(),
                               1e-30f,
                               1e30f,
                               1.0f,
                               -1.0f};
  const auto& magnitudes = table.magnitudes;
  for (std::size_t code = 0; code + 1 < magnitudes.size(); ++code) {
    const double midpoint = 0.5 * (magnitudes[code] + magnitudes[code + 1]);
    const float midpoint_float = float(midpoint);
    REQUIRE(double(midpoint_float) == midpoint);  // every midpoint here is exact in float
    for (float value : {float(magnitudes[code]), midpoint_float, std::nextafter(midpoint_float, 0.0f),
                        std::nextafter(midpoint_float, std::numeric_limits<float>::infinity())}) {
      values.push_back(value);
      values.push_back(-value);
    }
  }
  return values;
}

}  // namespace

// ===================================================================================================
TEST_CASE("half: every bit pattern decodes exactly and re-encodes to itself") {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const llmk::half value = llmk::half::from_bits(uint16_t(bits));
    const float decoded = float(value);
    const bool is_nan = (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0;
    CHECK(value.is_nan() == is_nan);
    if (is_nan) {
      REQUIRE(std::isnan(decoded));
      CHECK(as_bits(decoded) == 0x7FFFFFFFu);
      CHECK(llmk::half(decoded).bits == 0x7FFF);
      continue;
    }
    const bool is_inf = (bits & 0x7FFF) == 0x7C00;
    const double magnitude = is_inf ? std::numeric_limits<double>::infinity()
                                    : reference_decode_magnitude(kHalfFormat, bits & 0x7FFF);
    const double expected = (bits & 0x8000) ? -magnitude : magnitude;
    REQUIRE_MESSAGE(double(decoded) == expected, "half bits 0x" << std::hex << bits);
    CHECK(std::signbit(decoded) == bool(bits & 0x8000));
    REQUIRE_MESSAGE(llmk::half(decoded).bits == bits, "half bits 0x" << std::hex << bits);
  }
}

TEST_CASE("bfloat16: every bit pattern decodes exactly and re-encodes to itself") {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const llmk::bfloat16 value = llmk::bfloat16::from_bits(uint16_t(bits));
    const float decoded = float(value);
    CHECK(as_bits(decoded) == bits << 16);  // the conversion is a shift, NaN payload included
    const bool is_nan = (bits & 0x7F80) == 0x7F80 && (bits & 0x7F) != 0;
    CHECK(value.is_nan() == is_nan);
    if (is_nan) {
      CHECK(llmk::bfloat16(decoded).bits == 0x7FFF);
      continue;
    }
    const bool is_inf = (bits & 0x7FFF) == 0x7F80;
    const double magnitude = is_inf ? std::numeric_limits<double>::infinity()
                                    : reference_decode_magnitude(kBfloat16Format, bits & 0x7FFF);
    REQUIRE(double(decoded) == ((bits & 0x8000) ? -magnitude : magnitude));
    REQUIRE_MESSAGE(llmk::bfloat16(decoded).bits == bits, "bf16 bits 0x" << std::hex << bits);
  }
}

TEST_CASE("fp8: every bit pattern decodes exactly and re-encodes to itself in both modes") {
  for (uint32_t bits = 0; bits < 0x100; ++bits) {
    CAPTURE(bits);
    const uint32_t magnitude_code = bits & 0x7F;
    const bool sign = bits & 0x80;

    const auto e4m3 = llmk::float8_e4m3::from_bits(uint8_t(bits));
    const float e4m3_value = float(e4m3);
    if (magnitude_code == 0x7F) {  // S.1111.111 is the only NaN
      CHECK(e4m3.is_nan());
      CHECK(std::isnan(e4m3_value));
      CHECK(llmk::float8_e4m3::from_float_satfinite(e4m3_value).bits == 0x7F);
      CHECK(llmk::float8_e4m3::from_float_nonsaturating(e4m3_value).bits == 0x7F);
    } else {
      CHECK_FALSE(e4m3.is_nan());
      const double expected = reference_decode_magnitude(kE4M3Format, magnitude_code);
      CHECK(double(e4m3_value) == (sign ? -expected : expected));
      CHECK(std::signbit(e4m3_value) == sign);
      CHECK(llmk::float8_e4m3::from_float_satfinite(e4m3_value).bits == bits);
      CHECK(llmk::float8_e4m3::from_float_nonsaturating(e4m3_value).bits == bits);
      CHECK(llmk::float8_e4m3(e4m3_value).bits == bits);
    }

    const auto e5m2 = llmk::float8_e5m2::from_bits(uint8_t(bits));
    const float e5m2_value = float(e5m2);
    if (magnitude_code > 0x7C) {
      CHECK(e5m2.is_nan());
      CHECK(std::isnan(e5m2_value));
      CHECK(llmk::float8_e5m2::from_float_nonsaturating(e5m2_value).bits == 0x7F);
    } else if (magnitude_code == 0x7C) {
      CHECK(std::isinf(e5m2_value));
      CHECK(std::signbit(e5m2_value) == sign);
      CHECK(llmk::float8_e5m2::from_float_nonsaturating(e5m2_value).bits == bits);
      CHECK(llmk::float8_e5m2::from_float_satfinite(e5m2_value).bits == ((bits & 0x80) | 0x7B));
    } else {
      const double expected = reference_decode_magnitude(kE5M2Format, magnitude_code);
      CHECK(double(e5m2_value) == (sign ? -expected : expected));
      CHECK(llmk::float8_e5m2::from_float_satfinite(e5m2_value).bits == bits);
      CHECK(llmk::float8_e5m2::from_float_nonsaturating(e5m2_value).bits == bits);
    }
  }
  CHECK(float(llmk::numeric_traits<llmk::float8_e4m3>::max()) == 448.0f);
  CHECK(float(llmk::numeric_traits<llmk::float8_e5m2>::max()) == 57344.0f);
  CHECK(float(llmk::float8_e4m3::from_bits(0x01)) == std::ldexp(1.0f, -9));
  CHECK(float(llmk::float8_e5m2::from_bits(0x01)) == std::ldexp(1.0f, -16));
}

TEST_CASE("float -> half / bfloat16 matches the nearest-even reference") {
  const auto randoms = random_floats(llmk::test::pick<std::size_t>(3'000'000, 200'000), -30, 20, 1234);
  SUBCASE("half") {
    auto values = edge_floats(half_table());
    values.insert(values.end(), randoms.begin(), randoms.end());
    for (float value : values) {
      const uint16_t expected = reference_to_ieee16(half_table(), value);
      const uint16_t got = llmk::half(value).bits;
      if (got != expected) {
        FAIL_CHECK("half(" << value << " = 0x" << std::hex << as_bits(value) << "): got 0x" << got
                           << ", expected 0x" << expected);
      }
    }
  }
  SUBCASE("bfloat16") {
    auto values = edge_floats(bfloat16_table());
    const auto wide = random_floats(llmk::test::pick<std::size_t>(1'000'000, 100'000), -140, 127, 99);
    values.insert(values.end(), randoms.begin(), randoms.end());
    values.insert(values.end(), wide.begin(), wide.end());
    for (float value : values) {
      const uint16_t expected = reference_to_ieee16(bfloat16_table(), value);
      const uint16_t got = llmk::bfloat16(value).bits;
      if (got != expected) {
        FAIL_CHECK("bfloat16(" << value << " = 0x" << std::hex << as_bits(value) << "): got 0x" << got
                               << ", expected 0x" << expected);
      }
    }
  }
}

TEST_CASE("float -> fp8 matches the nearest-even reference in both modes") {
  auto values = random_floats(llmk::test::pick<std::size_t>(2'000'000, 200'000), -20, 18, 77);
  for (const MagnitudeTable* table : {&e4m3_table(), &e5m2_table()}) {
    const auto edges = edge_floats(*table);
    values.insert(values.end(), edges.begin(), edges.end());
  }
  for (float value : values) {
    const uint8_t e4m3_sat = llmk::float8_e4m3::from_float_satfinite(value).bits;
    const uint8_t e4m3_nosat = llmk::float8_e4m3::from_float_nonsaturating(value).bits;
    const uint8_t e5m2_sat = llmk::float8_e5m2::from_float_satfinite(value).bits;
    const uint8_t e5m2_nosat = llmk::float8_e5m2::from_float_nonsaturating(value).bits;
    const uint8_t e4m3_sat_expected = reference_to_fp8(e4m3_table(), value, Fp8Mode::kSatFinite, false);
    const uint8_t e4m3_nosat_expected = reference_to_fp8(e4m3_table(), value, Fp8Mode::kNonSaturating, false);
    const uint8_t e5m2_sat_expected = reference_to_fp8(e5m2_table(), value, Fp8Mode::kSatFinite, true);
    const uint8_t e5m2_nosat_expected = reference_to_fp8(e5m2_table(), value, Fp8Mode::kNonSaturating, true);
    if (e4m3_sat != e4m3_sat_expected || e4m3_nosat != e4m3_nosat_expected || e5m2_sat != e5m2_sat_expected ||
        e5m2_nosat != e5m2_nosat_expected) {
      FAIL_CHECK("fp8(" << value << " = 0x" << std::hex << as_bits(value) << "): e4m3 sat/nosat 0x"
                        << int(e4m3_sat) << "/0x" << int(e4m3_nosat) << " expected 0x"
                        << int(e4m3_sat_expected) << "/0x" << int(e4m3_nosat_expected)
                        << "; e5m2 sat/nosat 0x" << int(e5m2_sat) << "/0x" << int(e5m2_nosat)
                        << " expected 0x" << int(e5m2_sat_expected) << "/0x" << int(e5m2_nosat_expected));
    }
  }
  // Hand-checked boundaries: e4m3 ties at 464 go to the even code 448; e5m2 ties at 61440 go to inf.
  CHECK(llmk::float8_e4m3::from_float_nonsaturating(464.0f).bits == 0x7E);
  CHECK(llmk::float8_e4m3::from_float_nonsaturating(464.0001f).bits == 0x7F);
  CHECK(llmk::float8_e4m3::from_float_satfinite(1e9f).bits == 0x7E);
  CHECK(llmk::float8_e4m3::from_float_satfinite(-1e9f).bits == 0xFE);
  CHECK(llmk::float8_e4m3::from_float_satfinite(-INFINITY).bits == 0xFE);
  CHECK(llmk::float8_e5m2::from_float_nonsaturating(61440.0f).bits == 0x7C);
  CHECK(llmk::float8_e5m2::from_float_nonsaturating(61439.0f).bits == 0x7B);
  CHECK(llmk::float8_e5m2::from_float_satfinite(-61440.0f).bits == 0xFB);
  CHECK(llmk::float8_e5m2::from_float_nonsaturating(-INFINITY).bits == 0xFC);
  CHECK(llmk::float8_e4m3::from_float_satfinite(-0.0f).bits == 0x80);
  CHECK(llmk::float8_e4m3::from_float_satfinite(std::ldexp(1.0f, -10)).bits == 0x00);  // tie to 0
  CHECK(llmk::float8_e4m3::from_float_satfinite(std::ldexp(1.5f, -10)).bits == 0x01);
}

TEST_CASE("half / bfloat16 edge values") {
  CHECK(llmk::half(65504.0f).bits == 0x7BFF);
  CHECK(llmk::half(65519.99f).bits == 0x7BFF);
  CHECK(llmk::half(65520.0f).bits == 0x7C00);  // the tie above max rounds to inf
  CHECK(llmk::half(-1e10f).bits == 0xFC00);
  CHECK(llmk::half(std::ldexp(1.0f, -24)).bits == 0x0001);
  CHECK(llmk::half(std::ldexp(1.0f, -25)).bits == 0x0000);  // tie to even (zero)
  CHECK(llmk::half(std::ldexp(3.0f, -26)).bits == 0x0001);
  CHECK(llmk::half(-std::ldexp(1.0f, -25)).bits == 0x8000);
  CHECK(llmk::half(-0.0f).bits == 0x8000);
  CHECK(llmk::half(std::numeric_limits<float>::quiet_NaN()).bits == 0x7FFF);
  CHECK(llmk::bfloat16(3.14159f).bits == 0x4049);
  CHECK(llmk::bfloat16(std::numeric_limits<float>::max()).bits == 0x7F80);
  CHECK(llmk::bfloat16(-std::numeric_limits<float>::denorm_min()).bits == 0x8000);
  CHECK(llmk::bfloat16(-std::numeric_limits<float>::quiet_NaN()).bits == 0x7FFF);
}

TEST_CASE("packed half2 / bfloat16x2: the first element is in the low 16 bits") {
  CHECK(llmk::pack_half_x2(1.0f, 2.0f) == 0x40003C00u);
  CHECK(llmk::pack_bfloat16_x2(1.0f, 2.0f) == 0x40003F80u);
  const llmk::FloatPair halves = llmk::unpack_half_x2(0xC0003C00u);
  CHECK(halves.first == 1.0f);
  CHECK(halves.second == -2.0f);
  const auto [first, second] = llmk::unpack_bfloat16_x2(llmk::pack_bfloat16_x2(0.5f, -3.0f));
  CHECK(first == 0.5f);
  CHECK(second == -3.0f);
}

TEST_CASE("numeric_traits") {
  using llmk::numeric_traits;
  CHECK(numeric_traits<float>::max() == std::numeric_limits<float>::max());
  CHECK(numeric_traits<float>::lowest() == std::numeric_limits<float>::lowest());
  CHECK(float(numeric_traits<llmk::half>::max()) == 65504.0f);
  CHECK(float(numeric_traits<llmk::half>::lowest()) == -65504.0f);
  CHECK(float(numeric_traits<llmk::bfloat16>::max()) == as_float(0x7F7F0000u));
  CHECK(float(numeric_traits<llmk::bfloat16>::lowest()) == -as_float(0x7F7F0000u));
  CHECK(float(numeric_traits<llmk::float8_e4m3>::lowest()) == -448.0f);
  CHECK(float(numeric_traits<llmk::float8_e5m2>::lowest()) == -57344.0f);
  CHECK(numeric_traits<int8_t>::max() == 127);
  CHECK(numeric_traits<int8_t>::lowest() == -128);
  CHECK(numeric_traits<uint8_t>::max() == 255);
  CHECK(numeric_traits<int32_t>::lowest() == std::numeric_limits<int32_t>::lowest());
  CHECK(numeric_traits<llmk::int4_t>::max().value == 7);
  CHECK(numeric_traits<llmk::int4_t>::lowest().value == -8);
  CHECK(numeric_traits<llmk::uint4_t>::max().value == 15);
  static_assert(numeric_traits<llmk::int4_t>::bits == 4 && numeric_traits<llmk::half>::bits == 16);
  static_assert(numeric_traits<llmk::float8_e5m2>::max().bits == 0x7B);  // usable in constant expressions
  CHECK(std::string(numeric_traits<llmk::bfloat16>::name) == "bfloat16");
  CHECK(std::string(numeric_traits<llmk::uint4_t>::name) == "uint4");
  static_assert(std::is_trivially_copyable_v<llmk::half> && std::is_trivially_copyable_v<llmk::bfloat16>);
  static_assert(std::is_trivially_copyable_v<llmk::float8_e4m3> &&
                std::is_trivially_copyable_v<llmk::float8_e5m2>);
  static_assert(std::is_trivial_v<llmk::half>);
}

#if defined(LLMK_TEST_HAVE_NVIDIA_REFERENCE)
TEST_CASE("conversions agree bit for bit with NVIDIA's host conversion functions") {
  auto values = random_floats(llmk::test::pick<std::size_t>(2'000'000, 200'000), -30, 20, 4321);
  for (const MagnitudeTable* table : {&half_table(), &bfloat16_table(), &e4m3_table(), &e5m2_table()}) {
    const auto edges = edge_floats(*table);
    values.insert(values.end(), edges.begin(), edges.end());
  }
  std::size_t mismatches = 0;
  for (float value : values) {
    const uint16_t nv_half = __half_as_ushort(__float2half_rn(value));
    const uint16_t nv_bf16 = __bfloat16_as_ushort(__float2bfloat16_rn(value));
    if (llmk::half(value).bits != nv_half || llmk::bfloat16(value).bits != nv_bf16) {
      if (++mismatches < 10) FAIL_CHECK("half/bf16 differ from NVIDIA for 0x" << std::hex << as_bits(value));
    }
    struct Fp8Case {
      uint8_t llmk_bits;
      __nv_fp8_storage_t nvidia_bits;
    };
    const Fp8Case cases[] = {
        {llmk::float8_e4m3::from_float_satfinite(value).bits,
         __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3)},
        {llmk::float8_e4m3::from_float_nonsaturating(value).bits,
         __nv_cvt_float_to_fp8(value, __NV_NOSAT, __NV_E4M3)},
        {llmk::float8_e5m2::from_float_satfinite(value).bits,
         __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E5M2)},
        {llmk::float8_e5m2::from_float_nonsaturating(value).bits,
         __nv_cvt_float_to_fp8(value, __NV_NOSAT, __NV_E5M2)},
    };
    for (const Fp8Case& c : cases) {
      // NVIDIA's host emulation keeps the sign (and for e5m2 one payload bit) of a NaN; llmk returns the
      // canonical 0x7F. Both are NaN; every other result must match exactly.
      const bool both_nan = (c.llmk_bits & 0x7F) == 0x7F && (c.nvidia_bits & 0x7F) >= 0x7E &&
                            (std::isnan(value) || (c.nvidia_bits & 0x7F) == 0x7F);
      if (c.llmk_bits != c.nvidia_bits && !both_nan) {
        if (++mismatches < 10) {
          FAIL_CHECK("fp8 differs from NVIDIA for 0x" << std::hex << as_bits(value) << ": llmk 0x"
                                                      << int(c.llmk_bits) << ", NVIDIA 0x"
                                                      << int(c.nvidia_bits));
        }
      }
    }
  }
  CHECK(mismatches == 0);
  // Decoding: every half and fp8 pattern through NVIDIA's functions.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float ours = float(llmk::half::from_bits(uint16_t(bits)));
    const float theirs = __half2float(__ushort_as_half(uint16_t(bits)));
    REQUIRE(as_bits(ours) == as_bits(theirs));
    const float ours_bf16 = float(llmk::bfloat16::from_bits(uint16_t(bits)));
    const float theirs_bf16 = __bfloat162float(__ushort_as_bfloat16(uint16_t(bits)));
    REQUIRE(
        (as_bits(ours_bf16) == as_bits(theirs_bf16) || (std::isnan(ours_bf16) && std::isnan(theirs_bf16))));
  }
  for (uint32_t bits = 0; bits < 0x100; ++bits) {
    for (auto [format, ours] : {std::pair{__NV_E4M3, float(llmk::float8_e4m3::from_bits(uint8_t(bits)))},
                                std::pair{__NV_E5M2, float(llmk::float8_e5m2::from_bits(uint8_t(bits)))}}) {
      const __half_raw theirs = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(bits), format);
      const float theirs_float = __half2float(__half(theirs));
      CHECK((as_bits(ours) == as_bits(theirs_float) || (std::isnan(ours) && std::isnan(theirs_float))));
    }
  }
}
#endif

#if defined(LLMK_TEST_HAVE_KERNELS)
// The same conversions executed in a kernel: under nvcc this exercises the device pass (hardware cvt for
// half/bfloat16, __umulhi), which must give the host's bits exactly; in the simulator it checks that the
// headers work inside kernels.
constexpr int kEncodingsPerInput = 6;

__global__ void encode_on_device(const float* inputs, int count, uint32_t* encoded) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const float value = inputs[i];
    uint32_t* out = encoded + kEncodingsPerInput * int64_t(i);
    out[0] = llmk::half(value).bits;
    out[1] = llmk::bfloat16(value).bits;
    out[2] = llmk::float8_e4m3::from_float_satfinite(value).bits;
    out[3] = llmk::float8_e4m3::from_float_nonsaturating(value).bits;
    out[4] = llmk::float8_e5m2::from_float_satfinite(value).bits;
    out[5] = llmk::float8_e5m2::from_float_nonsaturating(value).bits;
  }
}

// For every 16-bit pattern: the float bits of half, bfloat16, and (below 256) e4m3 and e5m2; then a
// fast division and an int4 unpack of the pattern, so math.cuh and int4.cuh run on the device too.
constexpr int kDecodingsPerPattern = 6;

__global__ void decode_on_device(llmk::FastDivisor divisor, uint32_t* decoded) {
  for (uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x; bits < 0x10000u;
       bits += gridDim.x * blockDim.x) {
    uint32_t* out = decoded + kDecodingsPerPattern * bits;
    out[0] = llmk::detail::float_to_bits(float(llmk::half::from_bits(uint16_t(bits))));
    out[1] = llmk::detail::float_to_bits(float(llmk::bfloat16::from_bits(uint16_t(bits))));
    out[2] = llmk::detail::float_to_bits(float(llmk::float8_e4m3::from_bits(uint8_t(bits))));
    out[3] = llmk::detail::float_to_bits(float(llmk::float8_e5m2::from_bits(uint8_t(bits))));
    const uint32_t dividend = bits * 65599u + 0x9E3779B9u * (bits & 7u);
    out[4] = divisor.divide(dividend);
    out[5] = uint32_t(llmk::int4x8_get(dividend, int(bits & 7u)));
  }
}

TEST_CASE("conversions inside a kernel give the host's bits") {
  auto inputs = random_floats(llmk::test::pick<std::size_t>(400'000, 40'000), -30, 20, 555);
  for (const MagnitudeTable* table : {&half_table(), &bfloat16_table(), &e4m3_table(), &e5m2_table()}) {
    const auto edges = edge_floats(*table);
    inputs.insert(inputs.end(), edges.begin(), edges.end());
  }
  llmk::DeviceBuffer<float> device_inputs(inputs);
  llmk::DeviceBuffer<uint32_t> device_encoded(inputs.size() * kEncodingsPerInput);
  const int count = int(inputs.size());
  REQUIRE(llmk::launch(encode_on_device, dim3(64), dim3(128), 0, nullptr, device_inputs.data(), count,
                       device_encoded.data())
              .ok());
  const std::vector<uint32_t> encoded = device_encoded.to_host();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float value = inputs[i];
    const uint32_t expected[kEncodingsPerInput] = {llmk::half(value).bits,
                                                   llmk::bfloat16(value).bits,
                                                   llmk::float8_e4m3::from_float_satfinite(value).bits,
                                                   llmk::float8_e4m3::from_float_nonsaturating(value).bits,
                                                   llmk::float8_e5m2::from_float_satfinite(value).bits,
                                                   llmk::float8_e5m2::from_float_nonsaturating(value).bits};
    for (int k = 0; k < kEncodingsPerInput; ++k) {
      if (encoded[kEncodingsPerInput * i + k] != expected[k] && ++mismatches < 10) {
        FAIL_CHECK("encoding " << k << " of 0x" << std::hex << as_bits(value) << ": device 0x"
                               << encoded[kEncodingsPerInput * i + k] << ", host 0x" << expected[k]);
      }
    }
  }
  CHECK(mismatches == 0);

  const llmk::FastDivisor divisor(12345);
  llmk::DeviceBuffer<uint32_t> device_decoded(0x10000 * kDecodingsPerPattern);
  REQUIRE(
      llmk::launch(decode_on_device, dim3(64), dim3(128), 0, nullptr, divisor, device_decoded.data()).ok());
  const std::vector<uint32_t> decoded = device_decoded.to_host();
  mismatches = 0;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const uint32_t dividend = bits * 65599u + 0x9E3779B9u * (bits & 7u);
    const uint32_t expected[kDecodingsPerPattern] = {
        as_bits(float(llmk::half::from_bits(uint16_t(bits)))),
        as_bits(float(llmk::bfloat16::from_bits(uint16_t(bits)))),
        as_bits(float(llmk::float8_e4m3::from_bits(uint8_t(bits)))),
        as_bits(float(llmk::float8_e5m2::from_bits(uint8_t(bits)))),
        dividend / 12345u,
        uint32_t(llmk::int4x8_get(dividend, int(bits & 7u)))};
    for (int k = 0; k < kDecodingsPerPattern; ++k) {
      if (decoded[kDecodingsPerPattern * bits + k] != expected[k] && ++mismatches < 10) {
        FAIL_CHECK("decoding " << k << " of pattern 0x" << std::hex << bits << ": device 0x"
                               << decoded[kDecodingsPerPattern * bits + k] << ", host 0x" << expected[k]);
      }
    }
  }
  CHECK(mismatches == 0);
}
#endif

// ===================================================================================================
TEST_CASE("int4 nibble order: element 2i in the low nibble of byte i") {
  const int8_t values[8] = {0, 1, 2, 3, -1, -2, -3, -8};
  const uint32_t word = llmk::pack_int4x8(values);
  CHECK(word == 0x8DEF3210u);
  // The same word read as bytes (little-endian) is four int4x2 whose get(0) is the even element.
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&word);
  for (int i = 0; i < 4; ++i) {
    const auto pair = llmk::int4x2::from_bits(bytes[i]);
    CHECK(pair.get(0) == values[2 * i]);
    CHECK(pair.get(1) == values[2 * i + 1]);
    CHECK((bytes[i] & 0xF) == (uint32_t(values[2 * i]) & 0xF));
  }
  int8_t unpacked[8];
  llmk::unpack_int4x8(word, unpacked);
  for (int j = 0; j < 8; ++j) CHECK(unpacked[j] == values[j]);

  const uint8_t unsigned_values[8] = {1, 2, 3, 4, 5, 6, 7, 15};
  CHECK(llmk::pack_uint4x8(unsigned_values) == 0xF7654321u);
  uint8_t unsigned_unpacked[8];
  llmk::unpack_uint4x8(0xF7654321u, unsigned_unpacked);
  for (int j = 0; j < 8; ++j) CHECK(unsigned_unpacked[j] == unsigned_values[j]);
  CHECK(llmk::uint4x2::pack(3, 12).bits == 0xC3);
  CHECK(llmk::int4x2::pack(-8, 7).bits == 0x78);
}

TEST_CASE("int4 round trip over every value, masking and saturation") {
  for (int first = -8; first <= 7; ++first) {
    for (int second = -8; second <= 7; ++second) {
      llmk::int4x2 pair{};
      pair.set(0, first);
      pair.set(1, second);
      CHECK(pair.get(0) == first);
      CHECK(pair.get(1) == second);
      CHECK(pair.bits == llmk::int4x2::pack(first, second).bits);
      pair.set(0, second);  // overwrite keeps the other nibble
      CHECK(pair.get(0) == second);
      CHECK(pair.get(1) == second);
    }
  }
  for (int value = 0; value <= 15; ++value) {
    llmk::uint4x2 pair{};
    pair.set(1, value);
    CHECK(pair.get(1) == value);
    CHECK(pair.get(0) == 0);
  }
  llmk::int4x2 masked{};
  masked.set(0, 9);  // out of range: masked, documented
  CHECK(masked.get(0) == -7);
  CHECK(llmk::int4x2::pack_saturate(-100, 100).bits == llmk::int4x2::pack(-8, 7).bits);
  CHECK(llmk::uint4x2::pack_saturate(-1, 16).bits == llmk::uint4x2::pack(0, 15).bits);
  const int wide[8] = {-9, -8, 7, 8, 100, -100, 0, 3};
  CHECK(llmk::pack_int4x8_saturate(wide) == 0x30877788u);
  const int wide_unsigned[8] = {-1, 0, 15, 16, 100, 7, 0, 3};
  CHECK(llmk::pack_uint4x8_saturate(wide_unsigned) == 0x307FFF00u);
  for (int j = 0; j < 8; ++j) CHECK(llmk::int4x8_get(0x30877788u, j) == std::clamp(wide[j], -8, 7));
  static_assert(llmk::int4x2::pack(-1, 2).get(0) == -1, "usable in constant expressions");
}

// ===================================================================================================
TEST_CASE("integer helpers") {
  static_assert(llmk::ceil_div(100, 32) == 4 && llmk::ceil_div(96, 32) == 3 && llmk::ceil_div(0, 32) == 0);
  // Near the type's maximum (value + divisor - 1 would wrap: the 16-bit GEMM's K bytes at K = 2^30 - 8).
  static_assert(llmk::ceil_div(2147483632, 128) == 16777216 && llmk::ceil_div(INT32_MAX, 64) == 33554432 &&
                llmk::ceil_div(4294967295u, 2u) == 2147483648u);
  static_assert(llmk::round_up(100, 32) == 128 && llmk::round_up(int64_t(1) << 40, int64_t(3)) % 3 == 0);
  static_assert(llmk::is_pow2(1) && llmk::is_pow2(64) && !llmk::is_pow2(0) && !llmk::is_pow2(-4) &&
                !llmk::is_pow2(12));
  static_assert(llmk::log2_pow2(1) == 0 && llmk::log2_pow2(64) == 6 &&
                llmk::log2_pow2(uint64_t(1) << 40) == 40);
  static_assert(llmk::min(3, -2) == -2 && llmk::max(3, -2) == 3);
  CHECK(llmk::kLog2e == doctest::Approx(1.4426950408889634));
  CHECK(llmk::exp2(3.0f) == 8.0f);
  CHECK(llmk::exp2(1.0f * llmk::kLog2e) == doctest::Approx(std::exp(1.0)).epsilon(1e-6));
}

TEST_CASE("FastDivisor is exact for every divisor class and edge dividend") {
  std::mt19937_64 engine(2024);
  std::uniform_int_distribution<uint32_t> any_uint32;
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= llmk::test::pick(5000u, 1000u); ++d) divisors.push_back(d);
  for (int shift = 0; shift < 32; ++shift) {
    const uint64_t pow2 = uint64_t(1) << shift;
    for (int64_t delta : {-2, -1, 0, 1, 2}) {
      const int64_t d = int64_t(pow2) + delta;
      if (d >= 1 && d <= 0xFFFFFFFFll) divisors.push_back(uint32_t(d));
    }
  }
  for (uint32_t d :
       {0xFFFFFFFFu, 0xFFFFFFFEu, 0x80000001u, 0xAAAAAAABu, 7u, 641u, 6700417u, 0x55555555u, 0x7FFFFFFFu})
    divisors.push_back(d);
  for (int i = 0; i < llmk::test::pick(20000, 2000); ++i)
    divisors.push_back(std::max<uint32_t>(1, any_uint32(engine) >> (i % 32)));

  std::size_t mismatches = 0;
  for (uint32_t d : divisors) {
    const llmk::FastDivisor fast(d);
    std::vector<uint32_t> dividends = {0u, 1u, d - 1, d, 0xFFFFFFFFu, 0xFFFFFFFEu, 0x80000000u, 0x7FFFFFFFu};
    if (d < 0x80000000u) dividends.insert(dividends.end(), {d + 1, 2 * d - 1, 2 * d});
    const uint32_t top_quotient = 0xFFFFFFFFu / d;  // multiples near the top of the range
    for (uint64_t q : {uint64_t(top_quotient), uint64_t(top_quotient) - 1}) {
      const uint64_t multiple = q * d;
      for (int64_t delta : {-1, 0, 1}) {
        const int64_t n = int64_t(multiple) + delta;
        if (n >= 0 && n <= 0xFFFFFFFFll) dividends.push_back(uint32_t(n));
      }
    }
    for (int i = 0; i < 64; ++i) dividends.push_back(any_uint32(engine));
    for (uint32_t n : dividends) {
      const auto [quotient, remainder] = fast.divmod(n);
      if (quotient != n / d || remainder != n % d || fast.divide(n) != n / d) {
        if (++mismatches < 10) FAIL_CHECK("FastDivisor(" << d << ") of " << n << " gave " << quotient);
      }
    }
  }
  CHECK(mismatches == 0);

  // Every dividend for a few divisors whose magic numbers are the hardest (largest multiplier error).
  for (uint32_t d : {3u, 7u, 641u, 0x80000001u, 0xFFFFFFFFu}) {
    const llmk::FastDivisor fast(d);
    const uint64_t step = llmk::test::pick<uint64_t>(997, 99991);
    uint64_t wrong = 0;
    for (uint64_t n = 0; n <= 0xFFFFFFFFull; n += (n < (1u << 24) || n > 0xFF000000ull) ? 1 : step) {
      wrong += fast.divide(uint32_t(n)) != uint32_t(n) / d;
    }
    CHECK_MESSAGE(wrong == 0, "divisor " << d);
  }
}

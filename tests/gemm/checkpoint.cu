// Tests of llmk/gemm/checkpoint.cuh: GPTQ v1 / v2 and AWQ checkpoint tensors built in the test from the
// formats' definitions, imported on the host and on the device (identical bytes), then run through
// weight_only_gemm and compared with a dequantize-then-matmul computed from the definition; export of a
// QuantizedLayer and the round trip back; hand-packed words so a bit-order mistake fails; every validation
// rule; outputs poisoned (0xAB) before each call so a missing write fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/checkpoint.cuh"
#include "llmk/gemm/weight_only.cuh"
#include "llmk/obs/obs.hpp"

namespace {

using llmk::gemm::CheckpointFormat;
using llmk::gemm::CheckpointImportInfo;
using llmk::gemm::CheckpointImportOutput;
using llmk::gemm::CheckpointTensors;

constexpr std::uint8_t kPoison = 0xAB;
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // nibble i of an AWQ word holds column 8c + order[i]

// A checkpoint built from its definition (the top of checkpoint.cuh), with the values it encodes.
struct Built {
  CheckpointFormat format = CheckpointFormat::kGptqV1;
  int n = 0, k = 0, bits = 4, group_size = 0;  // group_size as passed (-1 allowed)
  int g = 0;                                   // resolved G
  std::vector<std::uint8_t> q;                 // [N, K] codes, one a byte, original column order
  std::vector<std::uint8_t> z;                 // [groups, N] zero points z as the dequantization uses them
  bool has_zeros = true;
  std::vector<llmk::half> scales;   // [groups, N] fp16
  std::vector<std::int32_t> g_idx;  // [K] or empty
  std::vector<std::int32_t> qweight, qzeros;

  int groups() const { return k / g; }
  CheckpointTensors view(const std::int32_t* qw, const std::int32_t* qz, const llmk::half* s,
                         const std::int32_t* gi) const {
    CheckpointTensors t;
    t.format = format;
    t.qweight = qw;
    t.qzeros = has_zeros ? qz : nullptr;
    t.scales = s;
    t.g_idx = g_idx.empty() ? nullptr : gi;
    t.n = n;
    t.k = k;
    t.bits = bits;
    t.group_size = group_size;
    return t;
  }
  CheckpointTensors host_view() const {
    return view(qweight.data(), qzeros.data(), scales.data(), g_idx.data());
  }
};

enum class GIdx { kNone, kTrivial, kShuffled };

// Random codes, zero points, positive fp16 scales and (optionally) g_idx, packed by the format's definition.
// v1: stored zeros s in [0, 2^b - 1] (8-bit: [0, 254]), z = s + 1, and stored 15 is forced once for 4-bit (z
// = 16).
Built build(CheckpointFormat format, int n, int k, int bits, int group_size, GIdx gidx, bool zeros,
            std::mt19937& rng) {
  Built b;
  b.format = format;
  b.n = n;
  b.k = k;
  b.bits = bits;
  b.group_size = group_size;
  b.g = group_size == -1 ? k : group_size;
  b.has_zeros = zeros;
  const int groups = b.groups();
  const std::uint32_t mask = (1u << bits) - 1u;
  std::uniform_int_distribution<int> code(0, static_cast<int>(mask));
  b.q.resize(static_cast<std::size_t>(n) * k);
  for (auto& c : b.q) c = static_cast<std::uint8_t>(code(rng));
  std::vector<std::uint32_t> stored(static_cast<std::size_t>(groups) * n);
  b.z.resize(stored.size());
  const bool v1 = format == CheckpointFormat::kGptqV1;
  std::uniform_int_distribution<int> zdist(0, static_cast<int>(v1 && bits == 8 ? mask - 1 : mask));
  for (std::size_t i = 0; i < stored.size(); ++i) {
    stored[i] = static_cast<std::uint32_t>(zdist(rng));
    if (v1 && bits == 4 && i == 3) stored[i] = 15;  // the loaders read z = 16
    b.z[i] = static_cast<std::uint8_t>(v1 ? stored[i] + 1 : stored[i]);
  }
  if (!zeros) std::fill(b.z.begin(), b.z.end(), static_cast<std::uint8_t>(1u << (bits - 1)));
  std::uniform_real_distribution<float> sdist(0.25f, 1.0f);
  const float s_hi = bits == 4 ? 0.02f : 0.002f;
  b.scales.resize(static_cast<std::size_t>(groups) * n);
  for (auto& s : b.scales) s = llmk::half(s_hi * sdist(rng));
  if (gidx != GIdx::kNone) {
    b.g_idx.resize(static_cast<std::size_t>(k));
    for (int i = 0; i < k; ++i) b.g_idx[static_cast<std::size_t>(i)] = i / b.g;
    if (gidx == GIdx::kShuffled) std::shuffle(b.g_idx.begin(), b.g_idx.end(), rng);
  }
  // Pack by the definitions.
  if (format == CheckpointFormat::kAwq) {
    b.qweight.assign(static_cast<std::size_t>(k) * (n / 8), 0);
    b.qzeros.assign(static_cast<std::size_t>(groups) * (n / 8), 0);
    for (int kk = 0; kk < k; ++kk)
      for (int c = 0; c < n / 8; ++c) {
        std::uint32_t word = 0;
        for (int i = 0; i < 8; ++i)
          word |= std::uint32_t(b.q[static_cast<std::size_t>(8 * c + kAwqOrder[i]) * k + kk]) << (4 * i);
        b.qweight[static_cast<std::size_t>(kk) * (n / 8) + c] = static_cast<std::int32_t>(word);
      }
    for (int g = 0; g < groups; ++g)
      for (int c = 0; c < n / 8; ++c) {
        std::uint32_t word = 0;
        for (int i = 0; i < 8; ++i)
          word |= stored[static_cast<std::size_t>(g) * n + 8 * c + kAwqOrder[i]] << (4 * i);
        b.qzeros[static_cast<std::size_t>(g) * (n / 8) + c] = static_cast<std::int32_t>(word);
      }
  } else {
    const int per = 32 / bits;
    std::vector<std::uint32_t> qw(static_cast<std::size_t>(k / per) * n, 0u);
    for (int nn = 0; nn < n; ++nn)
      for (int kk = 0; kk < k; ++kk)
        qw[static_cast<std::size_t>(kk / per) * n + nn] |=
            std::uint32_t(b.q[static_cast<std::size_t>(nn) * k + kk]) << (bits * (kk % per));
    b.qweight.assign(qw.begin(), qw.end());
    std::vector<std::uint32_t> qz(static_cast<std::size_t>(groups) * (n / per), 0u);
    if (zeros)
      for (int g = 0; g < groups; ++g)
        for (int nn = 0; nn < n; ++nn)
          qz[static_cast<std::size_t>(g) * (n / per) + nn / per] |=
              stored[static_cast<std::size_t>(g) * n + nn] << (bits * (nn % per));
    b.qzeros.assign(qz.begin(), qz.end());
  }
  if (b.qzeros.empty()) b.qzeros.push_back(0);
  return b;
}

// Plain codes (the repack's input) from one-a-byte codes [N, K].
std::vector<std::uint8_t> plain_of(const std::vector<std::uint8_t>& q, int n, int k, int bits) {
  if (bits == 8) return q;
  std::vector<std::uint8_t> p(static_cast<std::size_t>(n) * (k / 2), 0);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < k; ++c)
      p[static_cast<std::size_t>(r) * (k / 2) + c / 2] |=
          static_cast<std::uint8_t>(q[static_cast<std::size_t>(r) * k + c] << (4 * (c % 2)));
  return p;
}

template <class T>
std::vector<std::uint16_t> bits_of(const std::vector<T>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i].bits;
  return out;
}

template <class T>
std::vector<T> poisoned(std::size_t count) {
  std::vector<T> v(count);
  std::memset(static_cast<void*>(v.data()), kPoison, count * sizeof(T));
  return v;
}

template <class T>
llmk::DeviceBuffer<T> poisoned_device(std::size_t count) {
  llmk::DeviceBuffer<T> d(count);
  llmk::throw_if_error(llmk::device_memset(d.data(), kPoison, d.bytes()));
  return d;
}

// Same tolerance as tests/gemm/weight_only.cu: the mma sees exactly T(s (q - z)) and every product a * w is
// exact in fp32, so the error is fp32 accumulation (K / 16 + 6 roundings of |sum| <= S, doubled for the
// hardware's internal accumulation) plus the final rounding to T.
template <class T>
constexpr double kUnitRoundoff = std::is_same_v<T, llmk::half> ? 0x1p-11 : 0x1p-8;
template <class T>
constexpr double kAbsFloor = std::is_same_v<T, llmk::half> ? 0x1p-24 : 0x1p-120;
template <class T>
double tolerance(double ref, double abs_sum, int k) {
  const double acc = 2.0 * (k / 16 + 6) * std::ldexp(abs_sum, -24);
  return kUnitRoundoff<T> * std::fabs(ref) + (1.0 + kUnitRoundoff<T>)*acc + kAbsFloor<T>;
}

void expect_error(const llmk::Status& s, const std::string& needle,
                  llmk::Status::Code code = llmk::Status::Code::kInvalidArgument) {
  CHECK_FALSE(s.ok());
  CHECK(s.code() == code);
  CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message(), " (want: ", needle, ")");
}

struct ImportCase {
  CheckpointFormat format;
  int n, k, bits, group_size;
  GIdx gidx;
  bool zeros;
};

// Builds the checkpoint, imports it on the host and on the device (outputs poisoned), checks identical bytes
// and the expected contents, then runs the GEMM on the device import against the definition.
template <class T>
void check_import(const ImportCase& c, std::mt19937& rng) {
  CAPTURE(static_cast<int>(c.format));
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.bits);
  CAPTURE(c.group_size);
  CAPTURE(static_cast<int>(c.gidx));
  CAPTURE(c.zeros);
  const Built b = build(c.format, c.n, c.k, c.bits, c.group_size, c.gidx, c.zeros, rng);
  const int groups = b.groups();
  const std::size_t quant = static_cast<std::size_t>(groups) * c.n;
  const std::size_t wbytes = llmk::gemm::weight_only_packed_bytes(c.n, c.k, c.bits);
  const bool act_order = c.gidx == GIdx::kShuffled;

  // Host import.
  std::vector<std::uint8_t> hw = poisoned<std::uint8_t>(wbytes), hz = poisoned<std::uint8_t>(quant);
  std::vector<T> hs = poisoned<T>(quant);
  std::vector<std::int32_t> hp = poisoned<std::int32_t>(static_cast<std::size_t>(c.k));
  CheckpointImportInfo hinfo{!c.zeros, !act_order};  // wrong on purpose: the call must set it
  const CheckpointTensors hsrc = b.host_view();
  llmk::Status s = llmk::gemm::import_checkpoint_host(
      hsrc, CheckpointImportOutput<T>{hw.data(), hs.data(), hz.data(), hp.data()}, &hinfo);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(hinfo.zeros == c.zeros);
  CHECK(hinfo.act_order == act_order);

  // Device import.
  llmk::DeviceBuffer<std::int32_t> dqw(b.qweight), dqz(b.qzeros);
  llmk::DeviceBuffer<llmk::half> dsc(b.scales);
  llmk::DeviceBuffer<std::int32_t> dgi(b.g_idx.empty() ? std::vector<std::int32_t>{0} : b.g_idx);
  const CheckpointTensors dsrc = b.view(dqw.data(), dqz.data(), dsc.data(), dgi.data());
  auto dw = poisoned_device<std::uint8_t>(wbytes);
  auto dz = poisoned_device<std::uint8_t>(quant);
  auto ds = poisoned_device<T>(quant);
  auto dp = poisoned_device<std::int32_t>(static_cast<std::size_t>(c.k));
  const std::size_t ws_bytes = llmk::gemm::import_checkpoint_workspace_bytes(dsrc);
  REQUIRE(ws_bytes > 0);
  llmk::DeviceBuffer<std::uint8_t> ws(ws_bytes);
  const CheckpointImportOutput<T> ddst{dw.data(), ds.data(), dz.data(), dp.data()};
  CheckpointImportInfo dinfo{!c.zeros, !act_order};
  const llmk::Status ds_status =
      llmk::gemm::import_checkpoint(dsrc, ddst, ws.data(), ws_bytes, nullptr, &dinfo);
  REQUIRE_MESSAGE(ds_status.ok(), ds_status.message());
  REQUIRE(llmk::device_synchronize().ok());
  CHECK(dinfo.zeros == c.zeros);
  CHECK(dinfo.act_order == act_order);

  // Identical bytes.
  CHECK(dw.to_host() == hw);
  CHECK(bits_of(ds.to_host()) == bits_of(hs));
  CHECK(dz.to_host() == hz);
  CHECK(dp.to_host() == hp);

  // Expected contents, from the values the checkpoint was built from.
  std::vector<T> want_s(quant);
  for (std::size_t i = 0; i < quant; ++i) want_s[i] = T(b.scales[i].to_float());
  CHECK(bits_of(hs) == bits_of(want_s));
  if (c.zeros)
    CHECK(hz == b.z);
  else
    CHECK(std::all_of(hz.begin(), hz.end(), [](std::uint8_t v) { return v == kPoison; }));  // not written
  std::vector<std::int32_t> perm;
  if (act_order) {
    perm.resize(static_cast<std::size_t>(c.k));
    REQUIRE(llmk::gemm::act_order_permutation_host(b.g_idx.data(), c.k, b.g, perm.data()).ok());
    CHECK(hp == perm);
  } else {
    CHECK(std::all_of(hp.begin(), hp.end(),
                      [](std::int32_t v) { return v == static_cast<std::int32_t>(0xABABABAB); }));
  }
  std::vector<std::uint8_t> plain = plain_of(b.q, c.n, c.k, c.bits);
  std::vector<std::uint8_t> want_w(wbytes);
  const llmk::gemm::WeightRepackArgs r{plain.data(),
                                       c.bits == 4 ? c.k / 2 : c.k,
                                       act_order ? perm.data() : nullptr,
                                       want_w.data(),
                                       c.n,
                                       c.k,
                                       c.bits,
                                       false};
  REQUIRE(llmk::gemm::weight_only_repack_host(r).ok());
  CHECK(hw == want_w);
  // unpack_checkpoint_host gives the codes in the original order.
  {
    std::vector<std::uint8_t> up = poisoned<std::uint8_t>(plain.size()), uz = poisoned<std::uint8_t>(quant);
    std::vector<T> us = poisoned<T>(quant);
    REQUIRE(
        llmk::gemm::unpack_checkpoint_host(hsrc, up.data(), c.bits == 4 ? c.k / 2 : c.k, us.data(), uz.data())
            .ok());
    CHECK(up == plain);
    CHECK(bits_of(us) == bits_of(want_s));
    if (c.zeros) CHECK(uz == b.z);
  }

  // The GEMM on the device import against dequantize-then-matmul from the definition:
  // w[n, k] = T(T(s[g, n]) * (q[n, k] - z[g, n])), g = g_idx[k] (or k / G), accumulated in fp64.
  const int m = 3;
  std::uniform_real_distribution<float> adist(-1.0f, 1.0f);
  std::vector<T> a(static_cast<std::size_t>(m) * c.k);
  for (auto& v : a) v = T(adist(rng));
  llmk::DeviceBuffer<T> da(a), dd(static_cast<std::size_t>(m) * c.n);
  llmk::gemm::WeightOnlyArgs<T> x = llmk::gemm::checkpoint_gemm_args(dsrc, ddst, dinfo);
  x.a = da.data();
  x.lda = c.k;
  x.d = dd.data();
  x.ldd = c.n;
  x.m = m;
  const std::size_t gemm_ws = llmk::gemm::weight_only_workspace_bytes(x);
  llmk::DeviceBuffer<std::uint8_t> gws(std::max<std::size_t>(gemm_ws, 16));
  const llmk::Status gemm_status = llmk::gemm::weight_only_gemm(x, gws.data(), gemm_ws, nullptr);
  REQUIRE_MESSAGE(gemm_status.ok(), gemm_status.message());
  REQUIRE(llmk::device_synchronize().ok());
  const std::vector<T> got = dd.to_host();
  int bad = 0;
  for (int i = 0; i < m; ++i)
    for (int nn = 0; nn < c.n; ++nn) {
      double sum = 0.0, mag = 0.0;
      for (int kk = 0; kk < c.k; ++kk) {
        const int g = b.g_idx.empty() ? kk / b.g : b.g_idx[static_cast<std::size_t>(kk)];
        const std::size_t qi = static_cast<std::size_t>(g) * c.n + nn;
        const float st = T(b.scales[qi].to_float()).to_float();
        const int diff = int(b.q[static_cast<std::size_t>(nn) * c.k + kk]) - int(b.z[qi]);
        const double w = T(st * static_cast<float>(diff)).to_float();
        const double p = static_cast<double>(a[static_cast<std::size_t>(i) * c.k + kk].to_float()) * w;
        sum += p;
        mag += std::fabs(p);
      }
      const double gv = got[static_cast<std::size_t>(i) * c.n + nn].to_float();
      const double tol = tolerance<T>(sum, mag, c.k);
      if (!(std::fabs(gv - sum) <= tol) && bad++ < 5)
        MESSAGE("D[" << i << "][" << nn << "] = " << gv << ", want " << sum << " (tol " << tol << ")");
    }
  CHECK(bad == 0);
}

// A random QuantizedLayer in llmk's GPTQ output format.
llmk::obs::QuantizedLayer random_layer(int rows, int cols, int bits, int group_size, bool act_order,
                                       bool zeros, std::mt19937& rng) {
  llmk::obs::QuantizedLayer q;
  q.rows = rows;
  q.cols = cols;
  q.bits = bits;
  q.symmetric = !zeros;
  q.group_size = group_size;
  q.groups = cols / group_size;
  const int mask = (1 << bits) - 1;
  std::uniform_int_distribution<int> code(0, mask), zdist(1, mask);
  q.codes.resize(static_cast<std::size_t>(rows) * cols);
  for (auto& c : q.codes) c = static_cast<std::uint8_t>(code(rng));
  std::uniform_real_distribution<float> sdist(0.001f, 0.05f);
  q.scales.resize(static_cast<std::size_t>(q.groups) * rows);
  for (auto& s : q.scales) s = sdist(rng);  // not fp16 values: the export rounds them
  if (zeros) {
    q.zeros.resize(q.scales.size());
    for (auto& z : q.zeros) z = static_cast<std::uint8_t>(zdist(rng));
  } else {
    q.zeros.assign(q.scales.size(), static_cast<std::uint8_t>(1 << (bits - 1)));
  }
  q.g_idx.resize(static_cast<std::size_t>(cols));
  for (int k = 0; k < cols; ++k) q.g_idx[static_cast<std::size_t>(k)] = k / group_size;
  if (act_order) std::shuffle(q.g_idx.begin(), q.g_idx.end(), rng);
  return q;
}

}  // namespace

TEST_CASE("checkpoint import: GPTQ v1 / v2 and AWQ, host == device, GEMM matches the definition") {
  std::mt19937 rng(2718);
  // GPTQ v1 4-bit with act-order (and one stored zero 15 -> z = 16), odd N.
  check_import<llmk::half>({CheckpointFormat::kGptqV1, 40, 256, 4, 64, GIdx::kShuffled, true}, rng);
  // GPTQ v2 4-bit with the trivial g_idx AutoGPTQ stores without act-order: no perm.
  check_import<llmk::half>({CheckpointFormat::kGptqV2, 24, 128, 4, 32, GIdx::kTrivial, true}, rng);
  // AWQ 4-bit, per-channel group.
  check_import<llmk::half>({CheckpointFormat::kAwq, 40, 128, 4, 128, GIdx::kNone, true}, rng);
  // GPTQ v1 8-bit with act-order.
  check_import<llmk::half>({CheckpointFormat::kGptqV1, 24, 128, 8, 32, GIdx::kShuffled, true}, rng);
  // bf16, GPTQ's group_size -1 (per-channel), symmetric (no qzeros): scales rounded to bf16.
  check_import<llmk::bfloat16>({CheckpointFormat::kGptqV2, 40, 256, 4, -1, GIdx::kNone, false}, rng);
}

TEST_CASE("checkpoint import decodes hand-packed words (bit order)") {
  // GPTQ 4-bit: one word of qweight [K / 8 = 1, N = 1] holds k = 0..7 at bits 4k.
  {
    const std::int32_t qweight[1] = {static_cast<std::int32_t>(0xFDB97531u)};
    const llmk::half scales[1] = {llmk::half(1.0f)};
    CheckpointTensors src;
    src.format = CheckpointFormat::kGptqV2;
    src.qweight = qweight;
    src.scales = scales;
    src.n = 1;
    src.k = 8;
    src.bits = 4;
    src.group_size = 8;
    std::vector<std::uint8_t> codes = poisoned<std::uint8_t>(4);
    std::vector<llmk::half> s = poisoned<llmk::half>(1);
    REQUIRE(llmk::gemm::unpack_checkpoint_host(src, codes.data(), 4, s.data(),
                                               static_cast<std::uint8_t*>(nullptr))
                .ok());
    // codes k = 0..7: 1, 3, 5, ..., 15, two a byte (element 2i low).
    CHECK(codes == std::vector<std::uint8_t>{0x31, 0x75, 0xB9, 0xFD});
    CHECK(s[0].bits == 0x3C00);
  }
  // GPTQ 8-bit: qweight [1, 1] = 0x24232221 holds k = 0..3 at bits 8k; v1 qzeros [1, 1] for N = 4 columns.
  {
    const std::int32_t qweight[4] = {0x24232221, 0, 0, 0};  // N = 4: word (0, n)
    const std::int32_t qzeros[1] = {static_cast<std::int32_t>(0x8281807Fu)};
    const llmk::half scales[4] = {llmk::half(1.0f), llmk::half(1.0f), llmk::half(1.0f), llmk::half(1.0f)};
    CheckpointTensors src;
    src.format = CheckpointFormat::kGptqV1;
    src.qweight = qweight;
    src.qzeros = qzeros;
    src.scales = scales;
    src.n = 4;
    src.k = 4;
    src.bits = 8;
    src.group_size = -1;
    std::vector<std::uint8_t> codes = poisoned<std::uint8_t>(16), zeros = poisoned<std::uint8_t>(4);
    std::vector<llmk::half> s = poisoned<llmk::half>(4);
    REQUIRE(llmk::gemm::unpack_checkpoint_host(src, codes.data(), 4, s.data(), zeros.data()).ok());
    CHECK(std::vector<std::uint8_t>(codes.begin(), codes.begin() + 4) ==
          std::vector<std::uint8_t>{0x21, 0x22, 0x23, 0x24});
    CHECK(std::vector<std::uint8_t>(codes.begin() + 4, codes.end()) == std::vector<std::uint8_t>(12, 0));
    CHECK(zeros == std::vector<std::uint8_t>{0x80, 0x81, 0x82, 0x83});  // v1: stored + 1
  }
  // AWQ: nibble i of word (k, c) holds column 8c + order[i], order = 0 2 4 6 1 3 5 7.
  {
    const std::int32_t qweight[2] = {0x76543210,
                                     static_cast<std::int32_t>(0xFEDCBA98u)};  // [K = 2, N / 8 = 1]
    const std::int32_t qzeros[1] = {0x76543210};
    std::vector<llmk::half> scales(8, llmk::half(0.5f));
    CheckpointTensors src;
    src.format = CheckpointFormat::kAwq;
    src.qweight = qweight;
    src.qzeros = qzeros;
    src.scales = scales.data();
    src.n = 8;
    src.k = 2;
    src.bits = 4;
    src.group_size = 2;
    std::vector<std::uint8_t> codes = poisoned<std::uint8_t>(8), zeros = poisoned<std::uint8_t>(8);
    std::vector<llmk::half> s = poisoned<llmk::half>(8);
    REQUIRE(llmk::gemm::unpack_checkpoint_host(src, codes.data(), 1, s.data(), zeros.data()).ok());
    const int col_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // column j sits at nibble 4 (j % 2) + j / 2
    for (int j = 0; j < 8; ++j) {
      CAPTURE(j);
      CHECK(int(codes[j] & 0xF) == col_nibble[j]);     // k = 0: nibble i holds value i
      CHECK(int(codes[j] >> 4) == 8 + col_nibble[j]);  // k = 1: nibble i holds 8 + i
      CHECK(int(zeros[j]) == col_nibble[j]);           // AWQ: z stored as is
    }
  }
}

TEST_CASE("checkpoint export: hand-packed words, v1 vs v2 zeros") {
  // rows = N = 8, cols = K = 8, 4-bit, one group: codes[n, k] = (n + 2k) & 15, zeros[n] = n + 1.
  llmk::obs::QuantizedLayer q;
  q.rows = 8;
  q.cols = 8;
  q.bits = 4;
  q.group_size = 8;
  q.groups = 1;
  q.codes.resize(64);
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 8; ++k)
      q.codes[static_cast<std::size_t>(n * 8 + k)] = static_cast<std::uint8_t>((n + 2 * k) & 15);
  q.scales.assign(8, 0.25f);
  q.zeros.resize(8);
  for (int n = 0; n < 8; ++n) q.zeros[static_cast<std::size_t>(n)] = static_cast<std::uint8_t>(n + 1);
  for (auto fmt : {llmk::gemm::GptqExportFormat::kV1, llmk::gemm::GptqExportFormat::kV2}) {
    const bool v1 = fmt == llmk::gemm::GptqExportFormat::kV1;
    CAPTURE(v1);
    llmk::gemm::GptqCheckpoint ck;  // g_idx empty in the layer: written as k / G
    REQUIRE(llmk::gemm::export_gptq_host(q, fmt, &ck).ok());
    CHECK(ck.format == (v1 ? CheckpointFormat::kGptqV1 : CheckpointFormat::kGptqV2));
    REQUIRE(ck.qweight.size() == 8);
    CHECK(static_cast<std::uint32_t>(ck.qweight[0]) == 0xECA86420u);  // n = 0: k = 0..7 -> 0, 2, ..., 14
    CHECK(static_cast<std::uint32_t>(ck.qweight[1]) == 0xFDB97531u);  // n = 1: 1, 3, ..., 15
    REQUIRE(ck.qzeros.size() == 1);
    CHECK(static_cast<std::uint32_t>(ck.qzeros[0]) == (v1 ? 0x76543210u : 0x87654321u));
    CHECK(ck.g_idx == std::vector<std::int32_t>(8, 0));
    CHECK(ck.scales[0].bits == 0x3400);  // 0.25
  }
  // 8-bit: qweight word (0, n) holds k = 0..3 at bits 8k; symmetric (zeros empty -> 128).
  llmk::obs::QuantizedLayer q8;
  q8.rows = 4;
  q8.cols = 4;
  q8.bits = 8;
  q8.group_size = 4;
  q8.groups = 1;
  for (int n = 0; n < 4; ++n)
    for (int k = 0; k < 4; ++k) q8.codes.push_back(static_cast<std::uint8_t>(16 * n + k + 1));
  q8.scales.assign(4, 1.0f);
  llmk::gemm::GptqCheckpoint ck8;
  REQUIRE(llmk::gemm::export_gptq_host(q8, llmk::gemm::GptqExportFormat::kV1, &ck8).ok());
  CHECK(static_cast<std::uint32_t>(ck8.qweight[2]) == 0x24232221u);
  CHECK(static_cast<std::uint32_t>(ck8.qzeros[0]) == 0x7F7F7F7Fu);  // v1: 128 - 1 in every byte
  // 2-bit export (no GEMM, but a valid GPTQ tensor): 16 codes a word.
  llmk::obs::QuantizedLayer q2;
  q2.rows = 16;
  q2.cols = 16;
  q2.bits = 2;
  q2.group_size = 16;
  q2.groups = 1;
  for (int n = 0; n < 16; ++n)
    for (int k = 0; k < 16; ++k) q2.codes.push_back(static_cast<std::uint8_t>(k % 4));
  q2.scales.assign(16, 1.0f);
  q2.zeros.assign(16, 2);
  llmk::gemm::GptqCheckpoint ck2;
  REQUIRE(llmk::gemm::export_gptq_host(q2, llmk::gemm::GptqExportFormat::kV2, &ck2).ok());
  CHECK(static_cast<std::uint32_t>(ck2.qweight[5]) == 0xE4E4E4E4u);  // 0, 1, 2, 3 repeated
  CHECK(static_cast<std::uint32_t>(ck2.qzeros[0]) == 0xAAAAAAAAu);
}

TEST_CASE("checkpoint export then import round-trips codes, scales, zeros and the act-order perm") {
  std::mt19937 rng(31337);
  struct Shape {
    int rows, cols, bits, group;
    bool act, zeros;
  };
  for (const Shape& sh : {Shape{24, 128, 4, 32, true, true}, Shape{40, 256, 4, 256, false, true},
                          Shape{24, 64, 8, 16, true, true}, Shape{16, 64, 8, 64, false, false}}) {
    CAPTURE(sh.rows);
    CAPTURE(sh.cols);
    CAPTURE(sh.bits);
    CAPTURE(sh.group);
    const llmk::obs::QuantizedLayer layer =
        random_layer(sh.rows, sh.cols, sh.bits, sh.group, sh.act, sh.zeros, rng);
    std::vector<std::uint8_t> plain;
    REQUIRE(llmk::obs::pack_plain_codes(layer, &plain).ok());
    std::vector<std::int32_t> perm(static_cast<std::size_t>(sh.cols));
    REQUIRE(llmk::gemm::act_order_permutation_host(layer.g_idx.data(), sh.cols, sh.group, perm.data()).ok());
    std::vector<std::uint8_t> want_w(llmk::gemm::weight_only_packed_bytes(sh.rows, sh.cols, sh.bits));
    const llmk::gemm::WeightRepackArgs r{plain.data(),
                                         sh.bits == 4 ? sh.cols / 2 : sh.cols,
                                         sh.act ? perm.data() : nullptr,
                                         want_w.data(),
                                         sh.rows,
                                         sh.cols,
                                         sh.bits,
                                         false};
    REQUIRE(llmk::gemm::weight_only_repack_host(r).ok());

    std::vector<std::int32_t> v1_zeros;
    for (auto fmt : {llmk::gemm::GptqExportFormat::kV1, llmk::gemm::GptqExportFormat::kV2}) {
      const bool v1 = fmt == llmk::gemm::GptqExportFormat::kV1;
      CAPTURE(v1);
      llmk::gemm::GptqCheckpoint fresh;
      REQUIRE(llmk::gemm::export_gptq_host(layer, fmt, &fresh).ok());
      // Export into poisoned, already-sized vectors: every element must be assigned.
      llmk::gemm::GptqCheckpoint ck;
      ck.qweight.assign(fresh.qweight.size(), static_cast<std::int32_t>(0xABABABAB));
      ck.qzeros.assign(fresh.qzeros.size(), static_cast<std::int32_t>(0xABABABAB));
      ck.scales.assign(fresh.scales.size(), llmk::half::from_bits(0xABAB));
      ck.g_idx.assign(fresh.g_idx.size(), static_cast<std::int32_t>(0xABABABAB));
      REQUIRE(llmk::gemm::export_gptq_host(layer, fmt, &ck).ok());
      CHECK(ck.qweight == fresh.qweight);
      CHECK(ck.qzeros == fresh.qzeros);
      CHECK(bits_of(ck.scales) == bits_of(fresh.scales));
      CHECK(ck.g_idx == layer.g_idx);
      if (v1) {
        v1_zeros = ck.qzeros;
      } else {  // v2 = v1 + 1 in every field (no field of v1 is the all-ones value: z <= mask)
        const std::uint32_t ones = sh.bits == 4 ? 0x11111111u : 0x01010101u;
        for (std::size_t i = 0; i < ck.qzeros.size(); ++i)
          CHECK(static_cast<std::uint32_t>(ck.qzeros[i]) - static_cast<std::uint32_t>(v1_zeros[i]) == ones);
      }

      const int groups = sh.cols / sh.group;
      const std::size_t quant = static_cast<std::size_t>(groups) * sh.rows;
      std::vector<std::uint8_t> w = poisoned<std::uint8_t>(want_w.size()), z = poisoned<std::uint8_t>(quant);
      std::vector<llmk::half> s = poisoned<llmk::half>(quant);
      std::vector<std::int32_t> p = poisoned<std::int32_t>(static_cast<std::size_t>(sh.cols));
      CheckpointImportInfo info;
      const llmk::Status st = llmk::gemm::import_checkpoint_host(
          ck.tensors(), CheckpointImportOutput<llmk::half>{w.data(), s.data(), z.data(), p.data()}, &info);
      REQUIRE_MESSAGE(st.ok(), st.message());
      CHECK(info.zeros);
      CHECK(info.act_order == sh.act);
      CHECK(w == want_w);
      CHECK(z == layer.zeros);
      if (sh.act) CHECK(p == perm);
      int bad = 0;
      for (std::size_t i = 0; i < quant; ++i) bad += s[i].bits != llmk::half(layer.scales[i]).bits;
      CHECK(bad == 0);
      std::vector<std::uint8_t> codes(plain.size());
      REQUIRE(llmk::gemm::unpack_checkpoint_host(ck.tensors(), codes.data(),
                                                 sh.bits == 4 ? sh.cols / 2 : sh.cols, s.data(), z.data())
                  .ok());
      CHECK(codes == plain);
    }
  }
}

TEST_CASE("checkpoint import and export reject bad arguments, naming them") {
  std::mt19937 rng(7);
  const Built b = build(CheckpointFormat::kGptqV1, 16, 64, 4, 32, GIdx::kShuffled, true, rng);
  const std::size_t quant = static_cast<std::size_t>(b.groups()) * b.n;
  std::vector<std::uint8_t> w(llmk::gemm::weight_only_packed_bytes(b.n, b.k, 4) + 16), z(quant);
  std::vector<llmk::half> s(quant);
  std::vector<std::int32_t> p(static_cast<std::size_t>(b.k) + 1);
  const CheckpointImportOutput<llmk::half> dst{w.data(), s.data(), z.data(), p.data()};
  auto host = [&](const CheckpointTensors& src, const CheckpointImportOutput<llmk::half>& d) {
    return llmk::gemm::import_checkpoint_host(src, d);
  };
  REQUIRE(host(b.host_view(), dst).ok());
  {
    CheckpointTensors x = b.host_view();
    x.qweight = nullptr;
    expect_error(host(x, dst), "'qweight': must not be null");
    x = b.host_view();
    x.scales = nullptr;
    expect_error(host(x, dst), "'scales': must not be null");
    x = b.host_view();
    x.k = 20;  // not a multiple of 32 / 4
    expect_error(host(x, dst), "'k': must be a multiple of 32 / bits = 8");
    x.k = 24;  // a multiple of 8, not of 16
    x.g_idx = nullptr;
    x.group_size = 8;
    expect_error(host(x, dst), "'k': must be a multiple of 16");
    x = b.host_view();
    std::vector<llmk::half> bad_scales = b.scales;
    bad_scales[3].bits = 0x7C00;  // +Inf: group 0, column 3
    x.scales = bad_scales.data();
    expect_error(host(x, dst), "'scales': must be finite: a NaN or +-Inf fp16 scale (group 0, column 3)");
    x = b.host_view();
    x.k = (1 << 30) + 16;  // validated before dst.perm is written (the repack would only reject it after)
    x.g_idx = nullptr;
    x.group_size = -1;
    expect_error(host(x, dst), "'k': must be <= 2^30");
    x = b.host_view();
    x.group_size = 48;
    expect_error(host(x, dst), "'group_size': must divide K");
    x.group_size = 8;  // divides 64, not a multiple of 16
    expect_error(host(x, dst), "'group_size': must be a multiple of 16");
    x = b.host_view();
    x.qweight = reinterpret_cast<const std::int32_t*>(reinterpret_cast<const char*>(b.qweight.data()) + 2);
    expect_error(host(x, dst), "'qweight': must be 4-byte aligned");
    x = b.host_view();
    x.qzeros = reinterpret_cast<const std::int32_t*>(reinterpret_cast<const char*>(b.qzeros.data()) + 1);
    expect_error(host(x, dst), "'qzeros': must be 4-byte aligned");
    x = b.host_view();
    x.g_idx = reinterpret_cast<const std::int32_t*>(reinterpret_cast<const char*>(b.g_idx.data()) + 2);
    expect_error(host(x, dst), "'g_idx': must be 4-byte aligned");
    x = b.host_view();
    x.scales = reinterpret_cast<const llmk::half*>(reinterpret_cast<const char*>(b.scales.data()) + 1);
    expect_error(host(x, dst), "'scales': must be 2-byte aligned");
    x = b.host_view();
    x.bits = 3;
    expect_error(host(x, dst), "bits=3", llmk::Status::Code::kUnsupported);
    x.bits = 5;
    expect_error(host(x, dst), "'bits': must be 4 or 8");
    x = b.host_view();
    x.n = 12;  // qzeros packs 8 columns a word
    expect_error(host(x, dst), "'n': must be a multiple of 32 / bits = 8");
    x.n = 0;
    expect_error(host(x, dst), "'n': must be >= 1");
    x = b.host_view();
    x.format = static_cast<CheckpointFormat>(7);
    expect_error(host(x, dst), "'format'");
    x = b.host_view();
    x.format = CheckpointFormat::kAwq;
    expect_error(host(x, dst), "'g_idx': must be null for AWQ");
    x.g_idx = nullptr;
    x.bits = 8;
    expect_error(host(x, dst), "AWQ checkpoints with bits=8", llmk::Status::Code::kUnsupported);
    x.bits = 4;
    x.n = 20;
    expect_error(host(x, dst), "'n': must be a multiple of 8 for AWQ");
  }
  {  // outputs
    CheckpointImportOutput<llmk::half> d = dst;
    d.w = nullptr;
    expect_error(host(b.host_view(), d), "'dst.w': must not be null");
    d = dst;
    d.scales = nullptr;
    expect_error(host(b.host_view(), d), "'dst.scales': must not be null");
    d = dst;
    d.zeros = nullptr;
    expect_error(host(b.host_view(), d), "'dst.zeros': must not be null: the checkpoint has qzeros");
    d = dst;
    d.perm = nullptr;  // the checkpoint has act-order
    expect_error(host(b.host_view(), d), "'dst.perm': must not be null: g_idx is not k / group_size");
    d.perm = reinterpret_cast<std::int32_t*>(reinterpret_cast<char*>(p.data()) + 2);
    expect_error(host(b.host_view(), d), "'dst.perm': must be 4-byte aligned");
  }
  {  // g_idx contents
    std::vector<std::int32_t> g = b.g_idx;
    CheckpointTensors x = b.host_view();
    x.g_idx = g.data();
    g[5] = (g[5] + 1) % b.groups();  // one group now has G + 1 columns
    expect_error(host(x, dst), "'g_idx': every group must hold exactly group_size = 32 columns");
    g = b.g_idx;
    g[9] = b.groups();
    x.g_idx = g.data();
    expect_error(host(x, dst), "'g_idx': entries must be in [0, K / group_size) = [0, 2), g_idx[9] = 2");
  }
  // v1 zero points: 8-bit stored 255 would be z = 256 (rejected); host names group and column.
  const Built b8 = build(CheckpointFormat::kGptqV1, 16, 64, 8, 32, GIdx::kNone, true, rng);
  std::vector<std::int32_t> qz8 = b8.qzeros;
  qz8[5] = static_cast<std::int32_t>((static_cast<std::uint32_t>(qz8[5]) & 0xFF00FFFFu) |
                                     0x00FF0000u);  // g 1, n 6
  std::vector<std::uint8_t> w8(llmk::gemm::weight_only_packed_bytes(16, 64, 8));
  const CheckpointTensors bad8 = b8.view(b8.qweight.data(), qz8.data(), b8.scales.data(), nullptr);
  expect_error(host(bad8, CheckpointImportOutput<llmk::half>{w8.data(), s.data(), z.data(), nullptr}),
               "'qzeros': an 8-bit GPTQ v1 stored zero is 255 (group 1, column 6)");

  {  // device: the same rules, including the contents check; dst stays untouched on an error
    llmk::DeviceBuffer<std::int32_t> dqw(b.qweight), dqz(b.qzeros), dgi(b.g_idx), dqz8(qz8), dqw8(b8.qweight);
    llmk::DeviceBuffer<llmk::half> dsc(b.scales), dsc8(b8.scales);
    auto dw = poisoned_device<std::uint8_t>(w8.size());
    auto dz = poisoned_device<std::uint8_t>(quant);
    auto ds = poisoned_device<llmk::half>(quant);
    auto dp = poisoned_device<std::int32_t>(static_cast<std::size_t>(b.k));
    const CheckpointImportOutput<llmk::half> ddst{dw.data(), ds.data(), dz.data(), dp.data()};
    const CheckpointTensors src = b.view(dqw.data(), dqz.data(), dsc.data(), dgi.data());
    const std::size_t need = llmk::gemm::import_checkpoint_workspace_bytes(src);
    llmk::DeviceBuffer<std::uint8_t> ws(need + 4);
    auto dev = [&](const CheckpointTensors& x, const CheckpointImportOutput<llmk::half>& d) {
      return llmk::gemm::import_checkpoint(x, d, ws.data(), need, nullptr);
    };
    CheckpointTensors x = src;
    x.qweight = nullptr;
    expect_error(dev(x, ddst), "'qweight': must not be null");
    x = src;
    x.k = 20;
    expect_error(dev(x, ddst), "'k': must be a multiple of 32 / bits = 8");
    expect_error(llmk::gemm::import_checkpoint(src, ddst, nullptr, need, nullptr),
                 "'workspace': must not be null");
    expect_error(llmk::gemm::import_checkpoint(src, ddst, ws.data() + 2, need, nullptr),
                 "'workspace': must be 4-byte aligned");
    expect_error(llmk::gemm::import_checkpoint(src, ddst, ws.data(), need - 1, nullptr), "'workspace_bytes'");
    CheckpointImportOutput<llmk::half> d = ddst;
    d.w = dw.data() + 2;
    expect_error(dev(src, d), "'dst.w': must be 4-byte aligned");
    d = ddst;
    d.perm = nullptr;
    expect_error(dev(src, d), "'dst.perm': must not be null: g_idx is not k / group_size");
    std::vector<std::int32_t> g = b.g_idx;
    g[5] = (g[5] + 1) % b.groups();
    llmk::DeviceBuffer<std::int32_t> dbad(g);
    x = src;
    x.g_idx = dbad.data();
    expect_error(dev(x, ddst), "'g_idx': every group must hold exactly group_size = 32 columns");
    g = b.g_idx;
    g[9] = -1;
    dbad.upload(g);
    expect_error(dev(x, ddst), "'g_idx': entries must be in [0, K / group_size) = [0, 2)");
    {  // a NaN or Inf scale (a corrupt checkpoint): rejected before dst is written
      std::vector<llmk::half> bad_scales = b.scales;
      bad_scales[quant - 2].bits = 0x7E00;  // NaN
      llmk::DeviceBuffer<llmk::half> dbs(bad_scales);
      x = src;
      x.scales = dbs.data();
      expect_error(dev(x, ddst), "'scales': must be finite");
      bad_scales[quant - 2].bits = 0xFC00;  // -Inf
      dbs.upload(bad_scales);
      expect_error(dev(x, ddst), "'scales': must be finite");
    }
    const CheckpointTensors dbad8 = b8.view(dqw8.data(), dqz8.data(), dsc8.data(), nullptr);
    llmk::DeviceBuffer<std::uint8_t> ws8(llmk::gemm::import_checkpoint_workspace_bytes(dbad8));
    expect_error(llmk::gemm::import_checkpoint(
                     dbad8, CheckpointImportOutput<llmk::half>{dw.data(), ds.data(), dz.data(), nullptr},
                     ws8.data(), ws8.size(), nullptr),
                 "'qzeros': an 8-bit GPTQ v1 stored zero is 255");
    auto untouched = [](const std::vector<std::uint8_t>& v) {
      return std::all_of(v.begin(), v.end(), [](std::uint8_t c) { return c == kPoison; });
    };
    CHECK(untouched(dw.to_host()));
    CHECK(untouched(dz.to_host()));
    std::vector<llmk::half> hs = ds.to_host();
    CHECK(std::all_of(hs.begin(), hs.end(), [](llmk::half h) { return h.bits == 0xABAB; }));
    // A workspace 4 bytes past a 16-byte boundary is enough: the act-order sort's storage is aligned inside.
    llmk::DeviceBuffer<std::uint8_t> ws4(need + 4);
    const llmk::Status at4 = llmk::gemm::import_checkpoint(src, ddst, ws4.data() + 4, need, nullptr);
    CHECK_MESSAGE(at4.ok(), at4.message());
    std::vector<std::int32_t> perm4 = dp.to_host();
    std::sort(perm4.begin(), perm4.end());
    for (int i = 0; i < b.k; ++i) CHECK(perm4[static_cast<std::size_t>(i)] == i);  // a permutation of 0..K-1
  }

  {  // export
    llmk::obs::QuantizedLayer q = random_layer(16, 64, 4, 32, true, true, rng);
    llmk::gemm::GptqCheckpoint ck;
    REQUIRE(llmk::gemm::export_gptq_host(q, llmk::gemm::GptqExportFormat::kV1, &ck).ok());
    expect_error(llmk::gemm::export_gptq_host(q, llmk::gemm::GptqExportFormat::kV1, nullptr), "'out'");
    llmk::obs::QuantizedLayer e = q;
    e.zeros[17] = 0;  // v1 cannot store z = 0 (it stores z - 1); v2 can
    expect_error(
        llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV1, &ck),
        "'layer.zeros': must be >= 1 for GPTQ v1, which stores z - 1 (zeros[17] = 0: group 1, row 1)");
    CHECK(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck).ok());
    e = q;
    e.zeros[0] = 16;
    expect_error(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck),
                 "'layer.zeros': must be <= 2^bits - 1 = 15");
    e = q;
    e.codes[3] = 16;
    expect_error(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck), "'layer.codes'");
    e = q;
    e.bits = 3;
    expect_error(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck), "bits=3",
                 llmk::Status::Code::kUnsupported);
    e = q;
    e.scales[2] = 1e6f;  // overflows fp16
    expect_error(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck),
                 "'layer.scales': must be finite in fp16");
    e = q;
    e.g_idx[4] = 2;
    expect_error(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck), "'layer.g_idx'");
    e = random_layer(12, 64, 4, 32, false, true, rng);  // rows not a multiple of 8: qzeros cannot pack them
    expect_error(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck), "'layer.rows'");
    e = q;
    e.groups = 3;
    expect_error(llmk::gemm::export_gptq_host(e, llmk::gemm::GptqExportFormat::kV2, &ck), "'layer.groups'");
  }
}

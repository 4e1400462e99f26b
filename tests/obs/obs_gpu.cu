// Tests of OBS pruning and OBQ on the GPU (llmk/obs/obs_gpu.cuh) against the host entries obs_prune and
// obq_quantize (llmk/obs/obs.hpp) on the same inputs. In the simulator the GPU path runs its kernels on the
// CPU with the host LAPACK backend on simulated device memory: every output must equal the host's bit for bit
// (the losses to 1e-9 relative). On a GPU (cuSOLVER H^-1, FMA contraction) they agree to fp32 rounding and a
// greedy choice between near-equal keys may differ (tolerances below). Also: odd sizes, padded leading
// dimensions with NaN padding, poisoned outputs, fewer rows in flight than rows, dead columns and
// rank-deficient Hessians (the retry reported identically), and argument errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/obs_gpu.cuh"
#include "obs_test_support.hpp"
#include "support/test_env.hpp"

namespace {

using namespace llmk::test::obs;  // Layer, has, same_bits, ..., DeviceBackend, kExact, check_damping

// GPU tolerances: the fraction of mask entries / codes that may differ (a near-tie of the greedy choice moves
// the rest of that row), the relative error of the losses.
constexpr double kGpuDifferFraction = 0.05;
constexpr double kGpuLossRel = 2e-2;

// The layer of these tests (llmk::test::obs::make_layer): rank-3 correlated inputs, outlier channels
// i % 7 == 3 (x 10), `dead` input features, paddings of w and h NaN; samples 0 = 2 k + 3.
Layer test_layer(std::int64_t n, std::int64_t k, std::uint32_t seed, std::int64_t ldw_pad = 0,
                 std::int64_t ldh_pad = 0, std::vector<std::int64_t> dead = {}, std::int64_t samples = 0) {
  LayerSpec spec;
  spec.rank = 3;
  spec.outlier_every = 7;
  spec.outlier_at = 3;
  spec.outlier_gain = 10.0f;
  spec.ldw_pad = ldw_pad;
  spec.ldh_pad = ldh_pad;
  spec.dead = std::move(dead);
  return make_layer(n, k, samples == 0 ? 2 * k + 3 : samples, seed, spec);
}

// ---- OBS pruning

struct GpuPrune {
  llmk::Status status;
  std::int64_t ldo = 0, ldm = 0;
  std::vector<float> weights;
  std::vector<std::uint8_t> mask;
  std::vector<double> row_loss;
  llmk::obs::ObsPruneGpuReport report;
};

// in_flight: rows in flight the workspace is sized for (0: the default).
GpuPrune run_prune_gpu(const Layer& l, const llmk::obs::ObsPruneOptions& opt, std::int64_t ld_pad,
                       std::int64_t in_flight = 0) {
  GpuPrune g;
  const std::int64_t n = l.n, k = l.k;
  g.ldo = k + ld_pad;
  g.ldm = k + 2 * ld_pad;
  llmk::DeviceBuffer<float> dw(l.w), dh(l.h);
  // Fresh allocations are poisoned (0xFF): anything the path forgets to write stays NaN / 255.
  llmk::DeviceBuffer<float> weights(static_cast<std::size_t>(n * g.ldo));
  llmk::DeviceBuffer<std::uint8_t> mask(static_cast<std::size_t>(n * g.ldm));
  llmk::DeviceBuffer<double> row_loss(static_cast<std::size_t>(n));
  const std::size_t ws_bytes = llmk::obs::obs_prune_gpu_workspace_bytes(n, k, opt, in_flight);
  llmk::DeviceBuffer<unsigned char> ws(ws_bytes);
  DeviceBackend la;
  const llmk::obs::ObsPruneGpuOutputs out{weights.data(), g.ldo, mask.data(), g.ldm, row_loss.data()};
  const llmk::Status s = llmk::obs::obs_prune_gpu(dw.data(), n, k, l.ldw, dh.data(), l.ldh, opt, la, out,
                                                  ws.data(), ws_bytes, nullptr, &g.report);
  g.status = s;
  g.weights = weights.to_host();
  g.mask = mask.to_host();
  g.row_loss = row_loss.to_host();
  CHECK(same_bytes(dw.to_host(), l.w));  // inputs untouched
  CHECK(same_bytes(dh.to_host(), l.h));
  return g;
}

llmk::obs::ObsPruneResult run_prune_host(const Layer& l, const llmk::obs::ObsPruneOptions& opt) {
  llmk::obs::HostLapackBackend la;
  llmk::obs::ObsPruneResult res;
  const llmk::Status s = llmk::obs::obs_prune(l.w.data(), l.n, l.k, l.ldw, l.h.data(), l.ldh, opt, la, &res);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return res;
}

void compare_prune(const llmk::obs::ObsPruneResult& ref, const GpuPrune& got, std::int64_t n, std::int64_t k,
                   std::int64_t prune_per_row) {
  REQUIRE_MESSAGE(got.status.ok(), got.status.message());
  check_damping(got.report.damping, ref.damping, kExact);
  check_timings(got.report.timings);
  std::int64_t w_bad = 0, m_differ = 0, padding_written = 0, bad_count = 0, nonzero_pruned = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    std::int64_t kept = 0;
    for (std::int64_t c = 0; c < k; ++c) {
      const std::size_t at = static_cast<std::size_t>(r * k + c);
      const float gw = got.weights[static_cast<std::size_t>(r * got.ldo + c)];
      const std::uint8_t gm = got.mask[static_cast<std::size_t>(r * got.ldm + c)];
      m_differ += gm != ref.mask[at];
      kept += gm == 1;
      nonzero_pruned += gm == 0 && !same_bits(gw, 0.0f);
      if (kExact ? !same_bits(gw, ref.weights[at])
                 : (gm == ref.mask[at] &&
                    std::fabs(gw - ref.weights[at]) > 1e-2 * (std::fabs(ref.weights[at]) + 0.1)))
        ++w_bad;
    }
    bad_count += kept != k - prune_per_row;
    for (std::int64_t c = k; c < got.ldo; ++c)
      padding_written += !is_poison(got.weights[static_cast<std::size_t>(r * got.ldo + c)]);
    for (std::int64_t c = k; c < got.ldm; ++c)
      padding_written += got.mask[static_cast<std::size_t>(r * got.ldm + c)] != 0xFF;
  }
  CHECK(padding_written == 0);
  CHECK(bad_count == 0);
  CHECK(nonzero_pruned == 0);
  if (kExact) {
    CHECK(m_differ == 0);
    CHECK(w_bad == 0);
    CHECK(got.row_loss == ref.row_loss);
    check_rel(got.report.loss, ref.loss, 1e-9);
  } else {
    CHECK(m_differ <= static_cast<std::int64_t>(kGpuDifferFraction * static_cast<double>(n * k)) + 2);
    check_rel(got.report.loss, ref.loss, kGpuLossRel);
  }
}

// ---- OBQ

struct GpuObq {
  llmk::Status status;
  std::int64_t ldc = 0, ldq = 0;
  std::vector<std::uint8_t> codes, zeros;
  std::vector<float> scales, deq;
  std::vector<std::int32_t> g_idx;
  llmk::obs::ObqGpuReport report;
};

GpuObq run_obq_gpu(const Layer& l, const llmk::obs::ObqOptions& opt, std::int64_t ld_pad,
                   std::int64_t in_flight = 0) {
  GpuObq g;
  const std::int64_t n = l.n, k = l.k, groups = opt.group_size > 0 ? k / opt.group_size : 1;
  g.ldc = k + ld_pad;
  g.ldq = k + 2 * ld_pad;
  llmk::DeviceBuffer<float> dw(l.w), dh(l.h);
  llmk::DeviceBuffer<std::uint8_t> codes(static_cast<std::size_t>(n * g.ldc)),
      zeros(static_cast<std::size_t>(groups * n));
  llmk::DeviceBuffer<float> scales(static_cast<std::size_t>(groups * n)),
      deq(static_cast<std::size_t>(n * g.ldq));
  llmk::DeviceBuffer<std::int32_t> g_idx(static_cast<std::size_t>(k));
  const std::size_t ws_bytes = llmk::obs::obq_quantize_gpu_workspace_bytes(n, k, opt, in_flight);
  llmk::DeviceBuffer<unsigned char> ws(ws_bytes);
  DeviceBackend la;
  const llmk::obs::ObqGpuOutputs out{codes.data(), g.ldc,      scales.data(), zeros.data(),
                                     g_idx.data(), deq.data(), g.ldq};
  const llmk::Status s = llmk::obs::obq_quantize_gpu(dw.data(), n, k, l.ldw, dh.data(), l.ldh, opt, la, out,
                                                     ws.data(), ws_bytes, nullptr, &g.report);
  g.status = s;
  g.codes = codes.to_host();
  g.zeros = zeros.to_host();
  g.scales = scales.to_host();
  g.deq = deq.to_host();
  g.g_idx = g_idx.to_host();
  CHECK(same_bytes(dw.to_host(), l.w));
  CHECK(same_bytes(dh.to_host(), l.h));
  return g;
}

llmk::obs::QuantizedLayer run_obq_host(const Layer& l, const llmk::obs::ObqOptions& opt) {
  llmk::obs::HostLapackBackend la;
  llmk::obs::QuantizedLayer q;
  const llmk::Status s = llmk::obs::obq_quantize(l.w.data(), l.n, l.k, l.ldw, l.h.data(), l.ldh, opt, la, &q);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return q;
}

void compare_obq(const llmk::obs::QuantizedLayer& ref, const GpuObq& got) {
  REQUIRE_MESSAGE(got.status.ok(), got.status.message());
  const std::int64_t n = ref.rows, k = ref.cols;
  CHECK(got.g_idx == ref.g_idx);
  check_damping(got.report.damping, ref.damping, kExact);
  check_timings(got.report.timings);
  std::int64_t differ = 0, deq_bad = 0, padding_written = 0, inconsistent = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < k; ++c) {
      const std::size_t at = static_cast<std::size_t>(r * k + c);
      const int gc = got.codes[static_cast<std::size_t>(r * got.ldc + c)], rc = ref.codes[at];
      const float gq = got.deq[static_cast<std::size_t>(r * got.ldq + c)];
      differ += gc != rc;
      if (kExact && !same_bits(gq, ref.dequantized[at])) ++deq_bad;
      const std::size_t p = static_cast<std::size_t>(got.g_idx[static_cast<std::size_t>(c)] * n + r);
      inconsistent +=
          !same_bits(gq, got.scales[p] * (static_cast<float>(gc) - static_cast<float>(got.zeros[p])));
    }
    for (std::int64_t c = k; c < got.ldc; ++c)
      padding_written += got.codes[static_cast<std::size_t>(r * got.ldc + c)] != 0xFF;
    for (std::int64_t c = k; c < got.ldq; ++c)
      padding_written += !is_poison(got.deq[static_cast<std::size_t>(r * got.ldq + c)]);
  }
  CHECK(padding_written == 0);
  CHECK(inconsistent == 0);
  if (kExact) {
    CHECK(differ == 0);
    CHECK(deq_bad == 0);
    CHECK(got.scales == ref.scales);
    CHECK(got.zeros == ref.zeros);
    check_rel(got.report.loss, ref.loss, 1e-9);
    check_rel(got.report.loss_estimate, ref.loss_estimate, 1e-9);
  } else {
    CHECK(differ <= static_cast<std::int64_t>(kGpuDifferFraction * static_cast<double>(n * k)) + 2);
    check_rel(got.report.loss, ref.loss, kGpuLossRel);
    check_rel(got.report.loss_estimate, ref.loss_estimate, kGpuLossRel);
  }
}

}  // namespace

TEST_CASE("obs_prune_gpu == obs_prune (d 1 / 7 / 17 / 40, rows 1 / 5 / 13, none / some / all pruned)") {
  const std::int64_t ds[] = {1, 7, 17, 40};
  // Sanitizer builds (LLMK_TEST_FAST): every d, one and two rows (a CTA per row; its block-wide argmin costs
  // about 100x its plain time under TSan).
  const std::vector<std::int64_t> rows =
      llmk::test::fast() ? std::vector<std::int64_t>{1, 2} : std::vector<std::int64_t>{1, 5, 13};
  std::uint32_t seed = 300;
  for (std::int64_t d : ds) {
    for (std::int64_t n : rows) {
      const Layer l = test_layer(n, d, ++seed, 3, 5);
      const std::int64_t counts[] = {0, d / 2 + (d > 2 ? 1 : 0), d};
      for (std::int64_t p : counts) {
        CAPTURE(d);
        CAPTURE(n);
        CAPTURE(p);
        llmk::obs::ObsPruneOptions opt;
        opt.prune_per_row = p;
        compare_prune(run_prune_host(l, opt), run_prune_gpu(l, opt, 2), n, d, p);
      }
    }
  }
}

TEST_CASE("obs_prune_gpu: fewer rows in flight than rows (chunks) equals the host") {
  const Layer l = test_layer(13, 24, 77, 1, 0);
  llmk::obs::ObsPruneOptions opt;
  opt.prune_per_row = 9;
  const GpuPrune got = run_prune_gpu(l, opt, 0, 3);
  CHECK(got.report.rows_in_flight == 3);
  compare_prune(run_prune_host(l, opt), got, 13, 24, 9);
}

namespace {
struct ObqCase {
  const char* name;
  std::int64_t rows, cols;
  int bits;
  bool sym;
  std::int64_t group;
  llmk::obs::ObqOrder order;
  int refine;
  bool mse;
};
}  // namespace

TEST_CASE("obq_quantize_gpu == obq_quantize (2/3/4/8-bit, sym/asym, groups, each order, refinement, MSE)") {
  using llmk::obs::ObqOrder;
  const ObqCase cases[] = {
      {"4-bit sym per-channel least saliency", 5, 17, 4, true, 0, ObqOrder::kLeastSaliency, 0, false},
      {"3-bit asym g8 most determined", 13, 40, 3, false, 8, ObqOrder::kMostDetermined, 0, false},
      {"2-bit asym g20 best of both, 2 sweeps", 5, 40, 2, false, 20, ObqOrder::kBestOfBoth, 2, false},
      {"8-bit sym per-channel best of both", 1, 7, 8, true, 0, ObqOrder::kBestOfBoth, 0, false},
      {"8-bit asym least saliency, 2 sweeps", 13, 17, 8, false, 0, ObqOrder::kLeastSaliency, 2, false},
      {"4-bit asym g10 best of both, MSE clip", 5, 40, 4, false, 10, ObqOrder::kBestOfBoth, 0, true},
      {"4-bit sym d = 1, 2 sweeps", 1, 1, 4, true, 0, ObqOrder::kBestOfBoth, 2, false},
      {"2-bit sym most determined, 2 sweeps, MSE clip", 5, 40, 2, true, 0, ObqOrder::kMostDetermined, 2,
       true},
      {"3-bit sym g7 least saliency", 13, 7, 3, true, 7, ObqOrder::kLeastSaliency, 0, false},
      {"2-bit sym g4 best of both, MSE clip (outliers)", 5, 24, 2, true, 4, ObqOrder::kBestOfBoth, 2, true},
  };
  std::uint32_t seed = 500;
  for (const ObqCase& c : cases) {
    CAPTURE(std::string(c.name));
    // Sanitizer builds: every case, at most 2 rows (CTAs).
    const Layer l =
        test_layer(llmk::test::fast() ? std::min<std::int64_t>(c.rows, 2) : c.rows, c.cols, ++seed, 2, 3);
    llmk::obs::ObqOptions opt;
    opt.bits = c.bits;
    opt.symmetric = c.sym;
    opt.group_size = c.group;
    opt.order = c.order;
    opt.refine_sweeps = c.refine;
    opt.mse_clip = c.mse;
    compare_obq(run_obq_host(l, opt), run_obq_gpu(l, opt, 3));
  }
  // SymmetricGrid::kReference (rows without a negative weight take the reference's grid) as the host.
  Layer l = test_layer(3, 24, 520, 2, 3);
  for (std::int64_t c = 0; c < l.k; ++c)
    l.w[static_cast<std::size_t>(c)] = std::fabs(l.w[static_cast<std::size_t>(c)]);
  for (const bool mse : {false, true}) {
    CAPTURE(mse);
    llmk::obs::ObqOptions opt;
    opt.group_size = 8;
    opt.mse_clip = mse;
    const llmk::obs::QuantizedLayer def = run_obq_host(l, opt);
    opt.symmetric_grid = llmk::obs::SymmetricGrid::kReference;
    const llmk::obs::QuantizedLayer ref = run_obq_host(l, opt);
    CHECK(ref.scales != def.scales);
    compare_obq(ref, run_obq_gpu(l, opt, 3));
  }
}

TEST_CASE("obq_quantize_gpu: rows in chunks, dequantized not wanted") {
  const Layer l = test_layer(13, 17, 91, 0, 2);
  llmk::obs::ObqOptions opt;
  opt.bits = 3;
  opt.symmetric = false;
  opt.refine_sweeps = 1;
  const GpuObq got = run_obq_gpu(l, opt, 1, 4);
  CHECK(got.report.rows_in_flight == 4);
  compare_obq(run_obq_host(l, opt), got);
}

TEST_CASE("obs / obq gpu: dead columns and rank-deficient Hessians retry exactly as the host") {
  // 6 samples < 17 columns, two dead inputs: H is singular; percdamp 0 must retry.
  const Layer l = test_layer(5, 17, 41, 1, 2, {2, 9}, 6);
  const double percdamps[] = {0.0, 0.01};
  for (double pd : percdamps) {
    CAPTURE(pd);
    llmk::obs::ObsPruneOptions po;
    po.prune_per_row = 6;
    po.damping.percdamp = pd;
    const llmk::obs::ObsPruneResult pref = run_prune_host(l, po);
    CHECK(pref.damping.dead_columns == 2);
    if (pd == 0.0) CHECK(pref.damping.retries > 0);
    compare_prune(pref, run_prune_gpu(l, po, 1), 5, 17, 6);
    llmk::obs::ObqOptions qo;
    qo.bits = 4;
    qo.symmetric = false;
    qo.refine_sweeps = 2;
    qo.damping.percdamp = pd;
    compare_obq(run_obq_host(l, qo), run_obq_gpu(l, qo, 1));
  }
  // No damping can help: both report an error naming h (max_retries 0, percdamp 0, singular H).
  llmk::obs::ObsPruneOptions po;
  po.prune_per_row = 1;
  po.damping.percdamp = 0.0;
  po.damping.max_retries = 0;
  const GpuPrune got = run_prune_gpu(l, po, 0);
  CHECK(has(got.status, "h"));
  llmk::obs::HostLapackBackend la;
  llmk::obs::ObsPruneResult res;
  CHECK(has(llmk::obs::obs_prune(l.w.data(), l.n, l.k, l.ldw, l.h.data(), l.ldh, po, la, &res), "h"));
}

TEST_CASE("obs / obq gpu: bad arguments name the argument") {
  constexpr std::int64_t n = 4, k = 16;
  const Layer l = test_layer(n, k, 5);
  llmk::DeviceBuffer<float> dw(l.w), dh(l.h), weights(static_cast<std::size_t>(n * k)),
      scales(static_cast<std::size_t>(k * n)), deq(static_cast<std::size_t>(n * k));
  llmk::DeviceBuffer<std::uint8_t> mask(static_cast<std::size_t>(n * k)),
      codes(static_cast<std::size_t>(n * k)), zeros(static_cast<std::size_t>(k * n));
  llmk::DeviceBuffer<std::int32_t> g_idx(static_cast<std::size_t>(k));
  DeviceBackend la;

  llmk::obs::ObsPruneOptions pbase;
  pbase.prune_per_row = 3;
  const std::size_t pws = llmk::obs::obs_prune_gpu_workspace_bytes(n, k, pbase);
  const std::size_t pmin = llmk::obs::obs_prune_gpu_workspace_bytes(n, k, pbase, 1);
  REQUIRE(pws > 0);
  REQUIRE(pmin <= pws);
  llmk::DeviceBuffer<unsigned char> ws(pws + 64);
  const llmk::obs::ObsPruneGpuOutputs pgood{weights.data(), k, mask.data(), k, nullptr};
  llmk::obs::ObsPruneGpuReport prep;
  auto prune = [&](const llmk::obs::ObsPruneOptions& o, llmk::obs::ObsPruneGpuOutputs out,
                   std::int64_t rows = 4, std::int64_t cols = 16, std::int64_t ldw = 16,
                   std::int64_t ldh = 16, void* workspace = nullptr, std::size_t bytes = 0) {
    return llmk::obs::obs_prune_gpu(dw.data(), rows, cols, ldw, dh.data(), ldh, o, la, out,
                                    workspace ? workspace : ws.data(), bytes ? bytes : pws, nullptr, &prep);
  };
  {
    const llmk::Status s = prune(pbase, pgood);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  llmk::obs::ObsPruneOptions po = pbase;
  po.prune_per_row = -1;
  CHECK(has(prune(po, pgood), "prune_per_row"));
  po.prune_per_row = k + 1;
  CHECK(has(prune(po, pgood), "prune_per_row"));
  po = pbase;
  po.damping.damp_growth = 1.0;
  CHECK(has(prune(po, pgood), "damp_growth"));
  llmk::obs::ObsPruneGpuOutputs pout = pgood;
  pout.weights = nullptr;
  CHECK(has(prune(pbase, pout), "weights"));
  pout = pgood;
  pout.ld_weights = k - 1;
  CHECK(has(prune(pbase, pout), "ld_weights"));
  pout = pgood;
  pout.mask = nullptr;
  CHECK(has(prune(pbase, pout), "mask"));
  pout = pgood;
  pout.ld_mask = k - 1;
  CHECK(has(prune(pbase, pout), "ld_mask"));
  CHECK(has(prune(pbase, pgood, 0), "rows"));
  CHECK(has(prune(pbase, pgood, n, 0), "cols"));
  CHECK(has(prune(pbase, pgood, n, k, k - 1), "ldw"));
  CHECK(has(prune(pbase, pgood, n, k, k, k - 1), "ldh"));
  CHECK(has(llmk::obs::obs_prune_gpu(nullptr, n, k, k, dh.data(), k, pbase, la, pgood, ws.data(), pws,
                                     nullptr, &prep),
            "w"));
  CHECK(has(llmk::obs::obs_prune_gpu(dw.data(), n, k, k, nullptr, k, pbase, la, pgood, ws.data(), pws,
                                     nullptr, &prep),
            "h"));
  CHECK(has(llmk::obs::obs_prune_gpu(dw.data(), n, k, k, dh.data(), k, pbase, la, pgood, nullptr, pws,
                                     nullptr, &prep),
            "workspace"));
  CHECK(has(llmk::obs::obs_prune_gpu(dw.data(), n, k, k, dh.data(), k, pbase, la, pgood, ws.data(), pws,
                                     nullptr, nullptr),
            "report"));
  CHECK(has(prune(pbase, pgood, n, k, k, k, nullptr, pmin - 1), "workspace_bytes"));
  CHECK(has(prune(pbase, pgood, n, k, k, k, ws.data() + 8, pws), "workspace"));  // misaligned
  {
    const llmk::Status s = prune(pbase, pgood, n, k, k, k, nullptr, pmin);  // the minimum: one row in flight
    CHECK_MESSAGE(s.ok(), s.message());
    CHECK(prep.rows_in_flight == 1);
  }
  {  // non-finite inputs and a negative diagonal are named
    std::vector<float> bad = l.w;
    bad[5] = std::nanf("");
    llmk::DeviceBuffer<float> dbad(bad);
    CHECK(has(llmk::obs::obs_prune_gpu(dbad.data(), n, k, k, dh.data(), k, pbase, la, pgood, ws.data(), pws,
                                       nullptr, &prep),
              "w"));
    std::vector<float> hb = l.h;
    hb[3 * k + 3] = -1.0f;
    llmk::DeviceBuffer<float> dhb(hb);
    CHECK(has(llmk::obs::obs_prune_gpu(dw.data(), n, k, k, dhb.data(), k, pbase, la, pgood, ws.data(), pws,
                                       nullptr, &prep),
              "h"));
  }

  llmk::obs::ObqOptions qbase;
  const std::size_t qws = llmk::obs::obq_quantize_gpu_workspace_bytes(n, k, qbase);
  REQUIRE(qws <= pws + 64);
  const llmk::obs::ObqGpuOutputs qgood{codes.data(), k, scales.data(), zeros.data(), g_idx.data(),
                                       deq.data(),   k};
  llmk::obs::ObqGpuReport qrep;
  auto obq = [&](const llmk::obs::ObqOptions& o, llmk::obs::ObqGpuOutputs out) {
    return llmk::obs::obq_quantize_gpu(dw.data(), n, k, k, dh.data(), k, o, la, out, ws.data(), qws, nullptr,
                                       &qrep);
  };
  {
    const llmk::Status s = obq(qbase, qgood);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  llmk::obs::ObqOptions qo = qbase;
  qo.bits = 5;
  CHECK(has(obq(qo, qgood), "bits"));
  qo = qbase;
  qo.group_size = 5;
  CHECK(has(obq(qo, qgood), "group_size"));
  qo = qbase;
  qo.order = static_cast<llmk::obs::ObqOrder>(7);
  CHECK(has(obq(qo, qgood), "order"));
  qo = qbase;
  qo.refine_sweeps = -1;
  CHECK(has(obq(qo, qgood), "refine_sweeps"));
  qo = qbase;
  qo.mse_clip = true;
  qo.mse_grid = 0;
  CHECK(has(obq(qo, qgood), "mse_grid"));
  qo = qbase;
  qo.damping.percdamp = -1.0;
  CHECK(has(obq(qo, qgood), "percdamp"));
  llmk::obs::ObqGpuOutputs qout = qgood;
  qout.codes = nullptr;
  CHECK(has(obq(qbase, qout), "codes"));
  qout = qgood;
  qout.ld_codes = k - 1;
  CHECK(has(obq(qbase, qout), "ld_codes"));
  qout = qgood;
  qout.scales = nullptr;
  CHECK(has(obq(qbase, qout), "scales"));
  qout = qgood;
  qout.zeros = nullptr;
  CHECK(has(obq(qbase, qout), "zeros"));
  qout = qgood;
  qout.g_idx = nullptr;
  CHECK(has(obq(qbase, qout), "g_idx"));
  qout = qgood;
  qout.ld_dequantized = k - 1;
  CHECK(has(obq(qbase, qout), "ld_dequantized"));
  qout.dequantized = nullptr;  // not wanted: its ld does not matter
  {
    const llmk::Status s = obq(qbase, qout);
    CHECK_MESSAGE(s.ok(), s.message());
  }
  CHECK(has(llmk::obs::obq_quantize_gpu(dw.data(), n, k, k, dh.data(), k, qbase, la, qgood, ws.data(), qws,
                                        nullptr, nullptr),
            "report"));
}

TEST_CASE("obs / obq gpu: misaligned pointers, outputs overlapping w or h, a bad symmetric_grid are named") {
  constexpr std::int64_t n = 4, k = 16;
  const Layer l = test_layer(n, k, 5);
  // w in the second half of `both`: an output in the first half ends exactly where w begins.
  std::vector<float> both_host(static_cast<std::size_t>(2 * n * k), 0.0f);
  std::copy(l.w.begin(), l.w.end(), both_host.begin() + n * k);
  llmk::DeviceBuffer<float> both(both_host), dh(l.h), weights(static_cast<std::size_t>(n * k + 1)),
      scales(static_cast<std::size_t>(n + 1)), deq(static_cast<std::size_t>(n * k + 1)),
      spare(static_cast<std::size_t>(k * k + 1));
  float* dw = both.data() + n * k;
  llmk::DeviceBuffer<std::uint8_t> mask(static_cast<std::size_t>(n * k)),
      codes(static_cast<std::size_t>(n * k)), zeros(static_cast<std::size_t>(n));
  llmk::DeviceBuffer<std::int32_t> g_idx(static_cast<std::size_t>(k + 1));
  llmk::DeviceBuffer<double> row_loss(static_cast<std::size_t>(n + 1));
  DeviceBackend la;
  llmk::obs::ObsPruneOptions popt;
  popt.prune_per_row = 3;
  const llmk::obs::ObqOptions qopt;
  const std::size_t pws = llmk::obs::obs_prune_gpu_workspace_bytes(n, k, popt),
                    qws = llmk::obs::obq_quantize_gpu_workspace_bytes(n, k, qopt);
  llmk::DeviceBuffer<unsigned char> ws(std::max(pws, qws));

  const llmk::obs::ObsPruneGpuOutputs pgood{weights.data(), k, mask.data(), k, row_loss.data()};
  llmk::obs::ObsPruneGpuReport prep;
  auto prune = [&](const llmk::obs::ObsPruneGpuOutputs& out, const float* w, const float* h) {
    return llmk::obs::obs_prune_gpu(w, n, k, k, h, k, popt, la, out, ws.data(), pws, nullptr, &prep);
  };
  {
    const llmk::Status s = prune(pgood, dw, dh.data());
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  CHECK(rejects(prune(pgood, shifted(spare.data(), 2), dh.data()), "w", "aligned"));
  CHECK(rejects(prune(pgood, dw, shifted(spare.data(), 2)), "h", "aligned"));
  llmk::obs::ObsPruneGpuOutputs po = pgood;
  po.weights = shifted(weights.data(), 2);
  CHECK(rejects(prune(po, dw, dh.data()), "weights", "aligned"));
  po = pgood;
  po.row_loss = shifted(row_loss.data(), 4);  // fp64: 8 bytes
  CHECK(rejects(prune(po, dw, dh.data()), "row_loss", "aligned"));
  po = pgood;
  po.weights = dw;  // in place: the loss would read the pruned weights as the original ones
  CHECK(rejects(prune(po, dw, dh.data()), "weights", "overlap"));
  po.weights = both.data() + 1;  // its last element is w's first
  CHECK(rejects(prune(po, dw, dh.data()), "weights", "overlap"));
  po.weights = both.data();  // ends where w begins: allowed
  {
    const llmk::Status s = prune(po, dw, dh.data());
    CHECK_MESSAGE(s.ok(), s.message());
  }
  po = pgood;
  po.weights = dh.data() + 5;
  CHECK(rejects(prune(po, dw, dh.data()), "weights", "overlap"));
  po = pgood;
  po.mask = reinterpret_cast<std::uint8_t*>(dh.data()) + 3;
  CHECK(rejects(prune(po, dw, dh.data()), "mask", "overlap"));
  po = pgood;
  po.row_loss = reinterpret_cast<double*>(dw) + 1;
  CHECK(rejects(prune(po, dw, dh.data()), "row_loss", "overlap"));
  po = pgood;
  po.mask = reinterpret_cast<std::uint8_t*>(weights.data()) + 4;
  CHECK(rejects(prune(po, dw, dh.data()), "mask", "must not overlap weights"));
  po = pgood;
  po.row_loss = reinterpret_cast<double*>(ws.data()) + 2;
  CHECK(rejects(prune(po, dw, dh.data()), "row_loss", "must not overlap the workspace"));
  CHECK(rejects(
      llmk::obs::obs_prune_gpu(dw, n, k, k, dh.data(), k, popt, la, pgood, both.data(), pws, nullptr, &prep),
      "workspace", "must not overlap w or h"));

  const llmk::obs::ObqGpuOutputs qgood{codes.data(), k, scales.data(), zeros.data(), g_idx.data(),
                                       deq.data(),   k};
  llmk::obs::ObqGpuReport qrep;
  auto obq = [&](const llmk::obs::ObqOptions& o, const llmk::obs::ObqGpuOutputs& out, const float* w) {
    return llmk::obs::obq_quantize_gpu(w, n, k, k, dh.data(), k, o, la, out, ws.data(), qws, nullptr, &qrep);
  };
  {
    const llmk::Status s = obq(qopt, qgood, dw);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  CHECK(rejects(obq(qopt, qgood, shifted(spare.data(), 1)), "w", "aligned"));
  llmk::obs::ObqGpuOutputs qo = qgood;
  qo.scales = shifted(scales.data(), 2);
  CHECK(rejects(obq(qopt, qo, dw), "scales", "aligned"));
  qo = qgood;
  qo.g_idx = shifted(g_idx.data(), 2);
  CHECK(rejects(obq(qopt, qo, dw), "g_idx", "aligned"));
  qo = qgood;
  qo.dequantized = shifted(deq.data(), 3);
  CHECK(rejects(obq(qopt, qo, dw), "dequantized", "aligned"));
  qo = qgood;
  qo.dequantized = dw;  // in place
  CHECK(rejects(obq(qopt, qo, dw), "dequantized", "overlap"));
  qo = qgood;
  qo.scales = dh.data() + 7;
  CHECK(rejects(obq(qopt, qo, dw), "scales", "overlap"));
  qo = qgood;
  qo.g_idx = reinterpret_cast<std::int32_t*>(dw) + 2;
  CHECK(rejects(obq(qopt, qo, dw), "g_idx", "overlap"));
  qo = qgood;
  qo.g_idx = reinterpret_cast<std::int32_t*>(deq.data()) + 3;
  CHECK(rejects(obq(qopt, qo, dw), "dequantized", "must not overlap g_idx"));
  qo = qgood;
  qo.codes = ws.data() + 64;
  CHECK(rejects(obq(qopt, qo, dw), "codes", "must not overlap the workspace"));
  qo = qgood;
  qo.codes = reinterpret_cast<std::uint8_t*>(dh.data());
  CHECK(rejects(obq(qopt, qo, dw), "codes", "overlap"));
  qo = qgood;
  qo.zeros = reinterpret_cast<std::uint8_t*>(dw) + 1;
  CHECK(rejects(obq(qopt, qo, dw), "zeros", "overlap"));
  llmk::obs::ObqOptions bad = qopt;
  bad.symmetric_grid = static_cast<llmk::obs::SymmetricGrid>(3);
  CHECK(rejects(obq(bad, qgood, dw), "symmetric_grid", "SymmetricGrid"));
}

TEST_CASE("obs / obq gpu: equal keys break to the first column as the host") {
  // H = 2 I and weights of equal magnitude: every saliency ties (and H^-1 stays diagonal, so no update moves
  // them apart): the host prunes / quantizes in column order, the block-wide argmin must too.
  const std::int64_t n = 3, k = 37;
  Layer l{n, k, 0, k, k, {}, {}, {}};
  l.w.resize(static_cast<std::size_t>(n * k));
  for (std::int64_t i = 0; i < n * k; ++i) l.w[static_cast<std::size_t>(i)] = (i % 3 == 0 ? -0.25f : 0.25f);
  l.h.assign(static_cast<std::size_t>(k * k), 0.0f);
  for (std::int64_t i = 0; i < k; ++i) l.h[static_cast<std::size_t>(i * k + i)] = 2.0f;
  llmk::obs::ObsPruneOptions po;
  po.prune_per_row = 20;
  const llmk::obs::ObsPruneResult pref = run_prune_host(l, po);
  for (std::int64_t c = 0; c < k; ++c) CHECK(pref.mask[static_cast<std::size_t>(c)] == (c < 20 ? 0 : 1));
  compare_prune(pref, run_prune_gpu(l, po, 0), n, k, 20);
  const llmk::obs::ObqOrder orders[] = {llmk::obs::ObqOrder::kLeastSaliency,
                                        llmk::obs::ObqOrder::kMostDetermined,
                                        llmk::obs::ObqOrder::kBestOfBoth};
  for (llmk::obs::ObqOrder order : orders) {
    llmk::obs::ObqOptions qo;
    qo.bits = 2;
    qo.order = order;
    compare_obq(run_obq_host(l, qo), run_obq_gpu(l, qo, 0));
  }
}

// Tests of llmk/obs/gptq.hpp (and OBQ): lazy batches equal the column loop, the reported loss, GPTQ vs
// round-to-nearest and OBQ on a layer with correlated inputs and outlier channels, rank-deficient calibration
// data, the weight-only GEMM's format, bad arguments.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "llmk/obs/gptq.hpp"
#include "llmk/reference/weight_only.hpp"
#include "obs_test_support.hpp"
#include "support/test_env.hpp"

namespace {

using namespace llmk::test::obs;  // Layer, make_layer, output_error, trace_loss, has

}  // namespace

TEST_CASE("gptq: lazy batches equal the unblocked column loop; loss = 1/2 tr((W-Q) H (W-Q)^T)") {
  const std::int64_t n = 12, k = llmk::test::pick<std::int64_t>(96, 48);
  const Layer l = make_layer(n, k, 2 * k, 11);
  llmk::obs::HostLapackBackend la;
  struct Case {
    int bits;
    bool sym;
    std::int64_t g;
    bool act, stat, mse;
  };
  for (const Case c : {Case{4, true, 0, false, false, false}, Case{4, false, 16, true, false, false},
                       Case{3, true, 24, true, true, false}, Case{2, false, 0, true, false, true},
                       Case{8, true, 48, false, false, false}}) {
    CAPTURE(c.bits);
    CAPTURE(c.g);
    llmk::obs::GptqOptions opt;
    opt.bits = c.bits;
    opt.symmetric = c.sym;
    opt.group_size = c.g;
    opt.act_order = c.act;
    opt.static_groups = c.stat;
    opt.mse_clip = c.mse;
    // Lazy batches change nothing but fp32 rounding with the current-weights group grids; the default
    // (kBlockStart, the reference's rule) takes a group's grid from W as its block began.
    opt.group_grid = llmk::obs::GroupGrid::kCurrent;
    opt.block_size = k;  // the unblocked loop
    llmk::obs::QuantizedLayer ref;
    llmk::Status s = llmk::obs::gptq_quantize(l.w.data(), n, k, k, l.h.data(), k, opt, la, &ref);
    REQUIRE_MESSAGE(s.ok(), s.message());
    const double want_loss = trace_loss(l.w, ref.dequantized, l.h, n, k);
    CHECK(ref.loss == doctest::Approx(want_loss).epsilon(1e-4));
    // the damped objective's increments sum to more than the undamped loss only by the damping term
    // GPTQ's own sum of (w - q)^2 / (2 U_jj^2) is the objective with the damped H = H + damp I:
    //   loss + damp / 2 ||W - Q||^2
    double sq = 0.0;
    for (std::size_t i = 0; i < l.w.size(); ++i)
      sq += std::pow(static_cast<double>(l.w[i]) - ref.dequantized[i], 2);
    CHECK(ref.loss_estimate == doctest::Approx(ref.loss + 0.5 * ref.damping.damp * sq).epsilon(1e-3));
    for (std::int64_t bs : {std::int64_t{5}, std::int64_t{16}, std::int64_t{128}}) {
      CAPTURE(bs);
      opt.block_size = bs;
      llmk::obs::QuantizedLayer got;
      REQUIRE(llmk::obs::gptq_quantize(l.w.data(), n, k, k, l.h.data(), k, opt, la, &got).ok());
      // fp32: a different summation order may move a value across a rounding boundary now and then
      std::int64_t differ = 0;
      for (std::size_t i = 0; i < got.codes.size(); ++i) differ += got.codes[i] != ref.codes[i];
      CHECK(differ <= static_cast<std::int64_t>(got.codes.size()) / 200);
      CHECK(got.loss == doctest::Approx(ref.loss).epsilon(2e-3));
      CHECK(got.g_idx == ref.g_idx);
    }
  }
}

TEST_CASE("gptq: 4-bit beats round-to-nearest by >= 10% on correlated inputs with outliers; OBQ <= GPTQ") {
  const std::int64_t n = 16, k = llmk::test::pick<std::int64_t>(64, 32);
  const Layer l = make_layer(n, k, 4 * k, 21);
  llmk::obs::HostLapackBackend la;
  llmk::obs::GptqOptions opt;  // 4-bit symmetric per-channel
  llmk::obs::QuantizedLayer g;
  REQUIRE(llmk::obs::gptq_quantize(l.w.data(), n, k, k, l.h.data(), k, opt, la, &g).ok());
  // round to nearest with the same per-channel grid (the default: the reference's 16-level symmetric grid)
  using Q = llmk::quant::Quantizer<llmk::int4_t, llmk::quant::SymmetricFullRange, llmk::quant::PerChannel>;
  std::vector<float> rtn(l.w.size());
  for (std::int64_t r = 0; r < n; ++r) {
    float amax = 0.0f;
    for (std::int64_t i = 0; i < k; ++i)
      amax = std::max(amax, std::fabs(l.w[static_cast<std::size_t>(r * k + i)]));
    const auto p = Q::params_from_absmax(amax);
    CHECK(g.scales[static_cast<std::size_t>(r)] == p.scale);
    for (std::int64_t i = 0; i < k; ++i)
      rtn[static_cast<std::size_t>(r * k + i)] =
          Q::dequantize(Q::quantize(l.w[static_cast<std::size_t>(r * k + i)], p), p);
  }
  const double e_rtn = output_error(l, rtn), e_gptq = output_error(l, g.dequantized);
  MESSAGE("||WX - QX||^2: rtn ", e_rtn, ", gptq ", e_gptq);
  CHECK(std::sqrt(e_gptq) <= 0.9 * std::sqrt(e_rtn));
  // loss = ||(W - Q) X||^2 / samples
  CHECK(g.loss == doctest::Approx(e_gptq / static_cast<double>(l.samples)).epsilon(1e-3));

  // OBQ with its default order (the better of least-saliency and most-determined-first per row).
  llmk::obs::ObqOptions oo;
  llmk::obs::QuantizedLayer o;
  const llmk::Status s = llmk::obs::obq_quantize(l.w.data(), n, k, k, l.h.data(), k, oo, la, &o);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const double e_obq = output_error(l, o.dequantized);
  // The classic least-saliency greedy alone: on outlier channels it leaves the expensive weights for last
  // (docs/obs.md); reported, and the default must not be worse than it.
  oo.order = llmk::obs::ObqOrder::kLeastSaliency;
  llmk::obs::QuantizedLayer o_sal;
  REQUIRE(llmk::obs::obq_quantize(l.w.data(), n, k, k, l.h.data(), k, oo, la, &o_sal).ok());
  // Coordinate-descent refinement never raises the objective.
  oo.order = llmk::obs::ObqOrder::kBestOfBoth;
  oo.refine_sweeps = 3;
  llmk::obs::QuantizedLayer o_ref;
  REQUIRE(llmk::obs::obq_quantize(l.w.data(), n, k, k, l.h.data(), k, oo, la, &o_ref).ok());
  const double e_sal = output_error(l, o_sal.dequantized), e_ref = output_error(l, o_ref.dequantized);
  MESSAGE("||WX - QX||^2: obq ", e_obq, " (least-saliency only ", e_sal, ", refined ", e_ref, ")");
  // The issue's comparison: OBQ no worse than GPTQ (default options: natural column order). GPTQ with
  // act-order (an order chosen for exactly this kind of layer) is reported, not compared: OBQ is close to it,
  // not always below it (docs/obs.md).
  opt.act_order = true;
  llmk::obs::QuantizedLayer g_act;
  REQUIRE(llmk::obs::gptq_quantize(l.w.data(), n, k, k, l.h.data(), k, opt, la, &g_act).ok());
  MESSAGE("||WX - QX||^2: gptq act-order ", output_error(l, g_act.dequantized));
  CHECK(e_obq <= e_gptq);
  CHECK(e_obq < e_sal);  // the least-saliency greedy alone fails on this layer (why the default is not it)
  CHECK(e_ref <= e_obq * (1.0 + 1e-6));
  CHECK(o.loss == doctest::Approx(trace_loss(l.w, o.dequantized, l.h, n, k)).epsilon(1e-4));
  CHECK(o_ref.loss == doctest::Approx(trace_loss(l.w, o_ref.dequantized, l.h, n, k)).epsilon(1e-4));
  // Every OBQ weight is on its row's grid.
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < k; ++i) {
      const std::size_t at = static_cast<std::size_t>(r * k + i);
      CHECK(o_ref.dequantized[at] ==
            o_ref.scales[static_cast<std::size_t>(r)] *
                (static_cast<float>(o_ref.codes[at]) - o_ref.zeros[static_cast<std::size_t>(r)]));
    }
}

TEST_CASE("gptq: output feeds the weight-only GEMM's format (reference dequantization, act-order g_idx)") {
  const std::int64_t n = 8, k = 64;
  const Layer l = make_layer(n, k, 2 * k, 31);
  llmk::obs::HostLapackBackend la;
  for (int bits : {4, 8})
    for (int variant = 0; variant < 3; ++variant) {
      const bool sym = variant != 1, stat = variant == 2;  // static groups with act-order: g_idx = k / G
      CAPTURE(bits);
      CAPTURE(variant);
      llmk::obs::GptqOptions opt;
      opt.bits = bits;
      opt.symmetric = sym;
      opt.group_size = 16;
      opt.act_order = true;
      opt.static_groups = stat;
      llmk::obs::QuantizedLayer q;
      REQUIRE(llmk::obs::gptq_quantize(l.w.data(), n, k, k, l.h.data(), k, opt, la, &q).ok());
      std::vector<std::uint8_t> plain;
      REQUIRE(llmk::obs::pack_plain_codes(q, &plain).ok());
      std::vector<float> deq(static_cast<std::size_t>(n * k));
      llmk::reference::weight_only_dequantize(plain.data(), bits == 4 ? k / 2 : k, bits, q.scales.data(),
                                              q.zeros.data(), q.g_idx.data(), 16, static_cast<int>(n),
                                              static_cast<int>(k), deq.data());
      CHECK(deq == q.dequantized);
      std::vector<int> count(4, 0);
      for (std::int32_t g : q.g_idx) ++count[static_cast<std::size_t>(g)];
      CHECK(count == std::vector<int>(4, 16));  // act_order_permutation's requirement
      if (stat)
        for (std::int64_t c = 0; c < k; ++c) CHECK(q.g_idx[static_cast<std::size_t>(c)] == c / 16);
      if (sym)
        for (std::uint8_t z : q.zeros) CHECK(z == (bits == 4 ? 8 : 128));
    }
  llmk::obs::QuantizedLayer q3;
  llmk::obs::GptqOptions opt;
  opt.bits = 3;
  REQUIRE(llmk::obs::gptq_quantize(l.w.data(), n, k, k, l.h.data(), k, opt, la, &q3).ok());
  std::vector<std::uint8_t> plain;
  CHECK(llmk::obs::pack_plain_codes(q3, &plain).code() == llmk::Status::Code::kUnsupported);
}

TEST_CASE("gptq: rank-deficient calibration data completes with the damping retry and finite weights") {
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
    for (bool act : {false, true}) {
      llmk::obs::GptqOptions opt;
      opt.damping.percdamp = percdamp;
      opt.act_order = act;
      opt.group_size = 8;
      llmk::obs::QuantizedLayer q;
      llmk::Status s = llmk::obs::gptq_quantize(base.w.data(), n, k, k, h.data(), k, opt, la, &q);
      REQUIRE_MESSAGE(s.ok(), s.message());
      CHECK(q.damping.dead_columns == 1);
      if (percdamp == 0.0) CHECK(q.damping.retries >= 1);
      CHECK(q.damping.percdamp > 0.0);
      for (float v : q.dequantized) CHECK(std::isfinite(v));
      for (std::int64_t r = 0; r < n; ++r) CHECK(q.dequantized[static_cast<std::size_t>(r * k + 9)] == 0.0f);
      CHECK(std::isfinite(q.loss));
    }
    llmk::obs::ObqOptions oo;
    oo.damping.percdamp = percdamp;
    llmk::obs::QuantizedLayer o;
    REQUIRE(llmk::obs::obq_quantize(base.w.data(), n, k, k, h.data(), k, oo, la, &o).ok());
    for (float v : o.dequantized) CHECK(std::isfinite(v));
    CHECK(o.damping.dead_columns == 1);
    if (percdamp == 0.0) CHECK(o.damping.retries >= 1);
    for (std::int64_t r = 0; r < n; ++r) CHECK(o.dequantized[static_cast<std::size_t>(r * k + 9)] == 0.0f);
    llmk::obs::ObsPruneOptions po;
    po.prune_per_row = k / 2;
    po.damping.percdamp = percdamp;
    llmk::obs::ObsPruneResult p;
    REQUIRE(llmk::obs::obs_prune(base.w.data(), n, k, k, h.data(), k, po, la, &p).ok());
    for (float v : p.weights) CHECK(std::isfinite(v));
    CHECK(p.damping.dead_columns == 1);
    if (percdamp == 0.0) CHECK(p.damping.retries >= 1);
    CHECK(std::isfinite(p.loss));
  }
}

TEST_CASE("gptq: bad arguments name the argument") {
  const std::int64_t n = 4, k = 16;
  std::vector<float> w(static_cast<std::size_t>(n * k), 0.5f), h(static_cast<std::size_t>(k * k), 0.0f);
  for (std::int64_t i = 0; i < k; ++i) h[static_cast<std::size_t>(i * k + i)] = 1.0f;
  llmk::obs::HostLapackBackend la;
  llmk::obs::QuantizedLayer q;
  auto run = [&](llmk::obs::GptqOptions o, std::int64_t rows = 4, std::int64_t cols = 16,
                 std::int64_t ldw = 16, std::int64_t ldh = 16) {
    return llmk::obs::gptq_quantize(w.data(), rows, cols, ldw, h.data(), ldh, o, la, &q);
  };
  llmk::obs::GptqOptions o;
  REQUIRE(run(o).ok());
  o.bits = 5;
  CHECK(has(run(o), "bits"));
  o.bits = 1;
  CHECK(has(run(o), "bits"));
  o = {};
  o.group_size = 5;
  CHECK(has(run(o), "group_size"));
  o.group_size = -1;
  CHECK(has(run(o), "group_size"));
  o = {};
  o.block_size = 0;
  CHECK(has(run(o), "block_size"));
  o = {};
  o.symmetric_grid = static_cast<llmk::obs::SymmetricGrid>(3);  // would act as kFullRange
  CHECK(has(run(o), "symmetric_grid"));
  o = {};
  o.dead_column_grid = static_cast<llmk::obs::DeadColumnGrid>(2);
  CHECK(has(run(o), "dead_column_grid"));
  {
    llmk::obs::ObqOptions oo;
    oo.symmetric_grid = static_cast<llmk::obs::SymmetricGrid>(-1);
    CHECK(has(llmk::obs::obq_quantize(w.data(), 4, 16, 16, h.data(), 16, oo, la, &q), "symmetric_grid"));
  }
  o = {};
  o.damping.percdamp = -1.0;
  CHECK(has(run(o), "percdamp"));
  o = {};
  o.mse_clip = true;
  o.mse_grid = 0;
  CHECK(has(run(o), "mse_grid"));
  o.mse_grid = 100;
  o.mse_maxshrink = 0.0;
  CHECK(has(run(o), "mse_maxshrink"));
  o.mse_maxshrink = 0.8;
  o.mse_norm = std::numeric_limits<double>::infinity();  // reached mse_clip_search's throw before
  CHECK(has(run(o), "mse_norm"));
  o = {};
  CHECK(has(run(o, 0), "rows"));
  CHECK(has(run(o, 4, 0), "cols"));
  CHECK(has(run(o, 4, 16, 8), "ldw"));
  CHECK(has(run(o, 4, 16, 16, 8), "ldh"));
  CHECK(has(llmk::obs::gptq_quantize(w.data(), n, k, k, nullptr, k, o, la, &q), "h"));
  CHECK(has(llmk::obs::gptq_quantize(w.data(), n, k, k, h.data(), k, o, la, nullptr), "out"));
  h[3] = std::numeric_limits<float>::infinity();
  CHECK(has(run(o), "h"));
  llmk::obs::ObqOptions oo;
  oo.group_size = 3;
  CHECK(has(llmk::obs::obq_quantize(w.data(), n, k, k, h.data(), k, oo, la, &q), "h"));
  h[3] = 0.0f;
  CHECK(has(llmk::obs::obq_quantize(w.data(), n, k, k, h.data(), k, oo, la, &q), "group_size"));
  oo.group_size = 0;
  oo.refine_sweeps = -1;
  CHECK(has(llmk::obs::obq_quantize(w.data(), n, k, k, h.data(), k, oo, la, &q), "refine_sweeps"));
  oo.refine_sweeps = 0;
  oo.order = static_cast<llmk::obs::ObqOrder>(7);
  CHECK(has(llmk::obs::obq_quantize(w.data(), n, k, k, h.data(), k, oo, la, &q), "order"));
}

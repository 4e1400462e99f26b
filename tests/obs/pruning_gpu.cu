// Tests of Wanda and magnitude pruning on device memory (llmk/obs/pruning_gpu.cuh) against the host entries
// (llmk/obs/pruning.hpp). The GPU keys are the host's fp64 scores bit for bit (IEEE sqrt and one product), so
// the weights and masks must be equal exactly, in the simulator and on a GPU. Inputs are fresh random (the
// seed is printed on failure), paddings of the inputs are NaN (a kernel that reads them prunes differently or
// fails the finiteness check), outputs are poisoned and their paddings must stay poisoned.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/obs/pruning_gpu.cuh"
#include "support/test_env.hpp"

namespace {

struct Case {
  std::int64_t rows, cols, ldw, ldh, ld_out, ld_mask;
  std::vector<float> w, h;  // paddings NaN
};

// ties: weights drawn from a few values (exact equal scores in a row), h's diagonal too (and some +0 and -0:
// sqrt(-0) is -0, a score that must rank with the zeros, not above every positive one).
Case make_case(std::int64_t rows, std::int64_t cols, std::uint32_t seed, bool ties) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 4), pad(0, 3);
  Case c{rows, cols, cols + pad(rng), cols + pad(rng), cols + pad(rng), cols + pad(rng), {}, {}};
  const float few[5] = {0.5f, -0.5f, 0.0f, -0.0f, 0.25f};
  c.w.assign(static_cast<std::size_t>(rows * c.ldw), std::nanf(""));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j)
      c.w[static_cast<std::size_t>(r * c.ldw + j)] = ties ? few[pick(rng)] : nd(rng);
  c.h.assign(static_cast<std::size_t>(cols * c.ldh), std::nanf(""));
  for (std::int64_t i = 0; i < cols; ++i)
    for (std::int64_t j = 0; j < cols; ++j) c.h[static_cast<std::size_t>(i * c.ldh + j)] = 0.01f * nd(rng);
  for (std::int64_t i = 0; i < cols; ++i) {
    float d = std::fabs(nd(rng)) + 0.1f;
    if (ties) d = pick(rng) == 0 ? (pick(rng) < 2 ? -0.0f : 0.0f) : (pick(rng) < 2 ? 2.0f : 0.5f);
    c.h[static_cast<std::size_t>(i * c.ldh + i)] = d;
  }
  return c;
}

std::string describe(const Case& c, const llmk::obs::PruneOptions& o, bool wanda, std::uint32_t seed) {
  return llmk::str_cat(wanda ? "wanda" : "magnitude", " rows=", c.rows, " cols=", c.cols, " ldw=", c.ldw,
                       " sparsity=", o.sparsity, " n:m=", o.prune_n, ":", o.prune_m, " seed=", seed);
}

// The GPU entry under test: the form without workspace, or the workspace form with a selection.
enum class Form { kNoWorkspace, kAuto, kBlockSelect, kDeviceSort };

llmk::Status run_gpu(Form form, bool wanda, const Case& c, const float* w, const float* h,
                     const llmk::obs::PruneOptions& opt, float* out, std::uint8_t* mask) {
  if (form == Form::kNoWorkspace)
    return wanda ? llmk::obs::wanda_prune_gpu(w, c.rows, c.cols, c.ldw, h, c.ldh, opt, out, c.ld_out, mask,
                                              c.ld_mask, nullptr)
                 : llmk::obs::magnitude_prune_gpu(w, c.rows, c.cols, c.ldw, opt, out, c.ld_out, mask,
                                                  c.ld_mask, nullptr);
  const auto select = form == Form::kAuto          ? llmk::obs::PruneGpuSelect::kAuto
                      : form == Form::kBlockSelect ? llmk::obs::PruneGpuSelect::kBlockSelect
                                                   : llmk::obs::PruneGpuSelect::kDeviceSort;
  auto call = [&](void* temp, std::size_t* bytes) {
    return wanda ? llmk::obs::wanda_prune_gpu(temp, bytes, w, c.rows, c.cols, c.ldw, h, c.ldh, opt, out,
                                              c.ld_out, mask, c.ld_mask, nullptr, select)
                 : llmk::obs::magnitude_prune_gpu(temp, bytes, w, c.rows, c.cols, c.ldw, opt, out, c.ld_out,
                                                  mask, c.ld_mask, nullptr, select);
  };
  std::size_t bytes = 0;
  LLMK_RETURN_IF_ERROR(call(nullptr, &bytes));
  llmk::DeviceBuffer<unsigned char> temp(bytes);
  temp.poison();
  return call(temp.data(), &bytes);
}

// Runs the GPU entry and the host entry; checks bit-exact weights and masks, untouched output paddings.
void compare(const Case& c, const llmk::obs::PruneOptions& opt, bool wanda, std::uint32_t seed,
             Form form = Form::kNoWorkspace) {
  INFO(describe(c, opt, wanda, seed));
  INFO("form ", static_cast<int>(form));
  llmk::DeviceBuffer<float> dw(c.w), dh(c.h);
  llmk::DeviceBuffer<float> dout(static_cast<std::size_t>(c.rows * c.ld_out));
  llmk::DeviceBuffer<std::uint8_t> dmask(static_cast<std::size_t>(c.rows * c.ld_mask));
  dout.poison();
  dmask.poison();
  const llmk::Status s = run_gpu(form, wanda, c, dw.data(), dh.data(), opt, dout.data(), dmask.data());
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  llmk::obs::PruneResult ref;
  const llmk::Status hs =
      wanda ? llmk::obs::wanda_prune(c.w.data(), c.rows, c.cols, c.ldw, c.h.data(), c.ldh, opt, nullptr, &ref)
            : llmk::obs::magnitude_prune(c.w.data(), c.rows, c.cols, c.ldw, nullptr, 0, opt, nullptr, &ref);
  REQUIRE_MESSAGE(hs.ok(), hs.message());
  const std::vector<float> out = dout.to_host();
  const std::vector<std::uint8_t> mask = dmask.to_host();
  std::int64_t bad_w = 0, bad_m = 0, bad_pad = 0, pruned = 0;
  for (std::int64_t r = 0; r < c.rows; ++r) {
    for (std::int64_t j = 0; j < c.cols; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * c.cols + j);
      std::uint32_t a, b;
      std::memcpy(&a, &out[static_cast<std::size_t>(r * c.ld_out + j)], 4);
      std::memcpy(&b, &ref.weights[i], 4);
      bad_w += a != b;
      bad_m += mask[static_cast<std::size_t>(r * c.ld_mask + j)] != ref.mask[i];
      pruned += ref.mask[i] == 0;
    }
    for (std::int64_t j = c.cols; j < c.ld_out; ++j) {
      std::uint32_t a;
      std::memcpy(&a, &out[static_cast<std::size_t>(r * c.ld_out + j)], 4);
      bad_pad += a != 0xFFFFFFFFu;
    }
    for (std::int64_t j = c.cols; j < c.ld_mask; ++j)
      bad_pad += mask[static_cast<std::size_t>(r * c.ld_mask + j)] != 0xFF;
  }
  CHECK(bad_w == 0);
  CHECK(bad_m == 0);
  CHECK(bad_pad == 0);
  const bool layer = opt.prune_n == 0 && llmk::obs::detail::per_layer(opt.scope, !wanda);
  if (opt.prune_n == 0 && opt.count == llmk::obs::PruneCount::kThreshold) {  // rank + 1 a set, and its ties
    const std::int64_t sets = layer ? 1 : c.rows, length = layer ? c.rows * c.cols : c.cols;
    CHECK(pruned >= sets * (static_cast<std::int64_t>(opt.sparsity * static_cast<double>(length)) + 1));
    return;
  }
  const std::int64_t want = opt.prune_n > 0 ? c.cols / opt.prune_m * opt.prune_n * c.rows
                            : layer         ? llmk::obs::detail::prune_count(opt.sparsity, c.rows * c.cols)
                                    : llmk::obs::detail::row_prune_count(opt.sparsity, c.cols) * c.rows;
  CHECK(pruned == want);
}

// Sanitizer builds (LLMK_TEST_FAST) compare the shapes up to this many elements: one row of 1000 columns, 5
// rows of 200, 33 rows of 7 (the block-wide selections cost about 100x their plain time under TSan).
constexpr std::int64_t kFastElements = 1100;

bool names(const llmk::Status& s, const char* arg) {
  return !s.ok() && s.message().find(std::string("'") + arg + "'") != std::string::npos;
}

}  // namespace

TEST_CASE("wanda / magnitude gpu == host: unstructured sparsities, rows, cols, padded ld") {
  const std::uint32_t seed = 701u;
  const double sparsities[4] = {0.0, 0.3, 0.5, 0.999};
  const std::int64_t cols_set[5] = {1, 7, 64, 200, 1000};
  const std::int64_t rows_set[3] = {1, 5, 33};
  std::uint32_t k = 0;
  for (const std::int64_t rows : rows_set)
    for (const std::int64_t cols : cols_set) {
      if (llmk::test::fast() && rows * cols > kFastElements) continue;
      const Case c = make_case(rows, cols, seed + k++, false);
      for (const double sp : sparsities)
        for (int wanda = 0; wanda < 2; ++wanda) {
          llmk::obs::PruneOptions o;
          o.sparsity = sp;
          compare(c, o, wanda != 0, seed + k - 1);  // the defaults: magnitude per layer, Wanda per row
          o.scope = wanda ? llmk::obs::PruneScope::kPerLayer : llmk::obs::PruneScope::kPerRow;
          if (rows > 1) compare(c, o, wanda != 0, seed + k - 1);  // the other rule
        }
    }
}

TEST_CASE("wanda / magnitude gpu == host: n:m 2:4, 4:8, 3:7, 1:32, 31:32") {
  const std::uint32_t seed = 702u;
  const int nm[5][2] = {{2, 4}, {4, 8}, {3, 7}, {1, 32}, {31, 32}};
  const std::int64_t cols_set[8] = {7, 21, 64, 200, 224, 1000, 32, 1024};
  const std::int64_t rows_set[3] = {1, 5, 33};
  std::uint32_t k = 0;
  for (const auto& p : nm)
    for (const std::int64_t rows : rows_set)
      for (const std::int64_t cols : cols_set) {
        if (cols % p[1] != 0) continue;
        if (llmk::test::fast() && rows * cols > kFastElements) continue;
        const Case c = make_case(rows, cols, seed + k++, false);
        for (int wanda = 0; wanda < 2; ++wanda) {
          llmk::obs::PruneOptions o;
          o.prune_n = p[0];
          o.prune_m = p[1];
          compare(c, o, wanda != 0, seed + k - 1);
        }
      }
}

TEST_CASE("wanda / magnitude gpu == host: many exactly equal scores (ties to the lower column index)") {
  const std::uint32_t seed = 703u;
  const std::int64_t cols_set[4] = {8, 200, 1000, 777};
  std::uint32_t k = 0;
  for (const std::int64_t cols : cols_set) {
    if (llmk::test::fast() && cols > 500) continue;  // sanitizer builds: the small shapes
    const Case c = make_case(5, cols, seed + k++, true);
    for (int wanda = 0; wanda < 2; ++wanda) {
      for (const double sp : {0.1, 0.3, 0.5, 0.75, 0.999}) {
        llmk::obs::PruneOptions o;
        o.sparsity = sp;
        compare(c, o, wanda != 0, seed + k - 1);
        o.scope = llmk::obs::PruneScope::kPerRow;
        if (!wanda) compare(c, o, false, seed + k - 1);
      }
      if (cols % 4 == 0) {
        llmk::obs::PruneOptions o;
        o.prune_n = 2;
        o.prune_m = 4;
        compare(c, o, wanda != 0, seed + k - 1);
      }
    }
  }
  // All equal: the first k columns of every row are pruned (per row), the first k of the layer in row-major
  // order (per layer: magnitude's default).
  Case c = make_case(3, 300, seed, false);
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t j = 0; j < 300; ++j)
      c.w[static_cast<std::size_t>(r * c.ldw + j)] = (j % 2) ? 1.5f : -1.5f;
  for (std::int64_t j = 0; j < 300; ++j) c.h[static_cast<std::size_t>(j * c.ldh + j)] = 4.0f;
  for (int wanda = 0; wanda < 2; ++wanda) {
    llmk::obs::PruneOptions o;
    o.sparsity = 0.5;
    compare(c, o, wanda != 0, seed);
    llmk::DeviceBuffer<float> dw(c.w), dh(c.h), dout(static_cast<std::size_t>(3 * c.ld_out));
    llmk::DeviceBuffer<std::uint8_t> dm(static_cast<std::size_t>(3 * c.ld_mask));
    const llmk::Status s =
        wanda ? llmk::obs::wanda_prune_gpu(dw.data(), 3, 300, c.ldw, dh.data(), c.ldh, o, dout.data(),
                                           c.ld_out, dm.data(), c.ld_mask, nullptr)
              : llmk::obs::magnitude_prune_gpu(dw.data(), 3, 300, c.ldw, o, dout.data(), c.ld_out, dm.data(),
                                               c.ld_mask, nullptr);
    REQUIRE(s.ok());
    const std::vector<std::uint8_t> m = dm.to_host();
    for (std::int64_t r = 0; r < 3; ++r)
      for (std::int64_t j = 0; j < 300; ++j)
        CHECK(m[static_cast<std::size_t>(r * c.ld_mask + j)] ==
              (wanda ? (j >= 150 ? 1 : 0) : (r * 300 + j >= 450 ? 1 : 0)));
  }
}

TEST_CASE(
    "wanda / magnitude gpu, workspace forms: every selection == host (per row, per layer, ties, threshold)") {
  // kAuto (CUB per layer, CTA per row), kBlockSelect, kDeviceSort (CUB segmented sort per row): same bits.
  const std::uint32_t seed = 704u;
  const std::int64_t shapes[3][2] = {{1, 200}, {5, 77}, {33, 7}};
  std::uint32_t k = 0;
  // Sanitizer builds: the tied inputs only, and not kBlockSelect (the form without workspace's selection,
  // which the tests above cover).
  const bool fast = llmk::test::fast();
  for (const auto& sh : shapes)
    for (const bool ties : {false, true}) {
      if (fast && !ties) continue;
      const Case c = make_case(sh[0], sh[1], seed + k++, ties);
      for (int wanda = 0; wanda < 2; ++wanda)
        for (const auto scope : {llmk::obs::PruneScope::kPerRow, llmk::obs::PruneScope::kPerLayer})
          for (const Form form : {Form::kAuto, Form::kBlockSelect, Form::kDeviceSort}) {
            if (fast && form == Form::kBlockSelect) continue;
            llmk::obs::PruneOptions o;
            o.sparsity = 0.5;
            o.scope = scope;
            compare(c, o, wanda != 0, seed + k - 1, form);
            if (!ties) continue;
            // The reference codes' threshold rule: every score at or below the rank's, ties included.
            o.count = llmk::obs::PruneCount::kThreshold;
            compare(c, o, wanda != 0, seed + k - 1, form);
          }
    }
  // n:m ignores the selection; the workspace is still queried and accepted.
  const Case c = make_case(3, 64, seed + k, false);
  llmk::obs::PruneOptions o;
  o.prune_n = 2;
  o.prune_m = 4;
  compare(c, o, true, seed + k, Form::kDeviceSort);
  // Workspace rules.
  llmk::DeviceBuffer<float> dw(c.w), dout(static_cast<std::size_t>(3 * c.ld_out));
  llmk::DeviceBuffer<std::uint8_t> dm(static_cast<std::size_t>(3 * c.ld_mask));
  llmk::obs::PruneOptions layer;
  std::size_t bytes = 0;
  CHECK(names(llmk::obs::magnitude_prune_gpu(nullptr, nullptr, dw.data(), 3, 64, c.ldw, layer, dout.data(),
                                             c.ld_out, dm.data(), c.ld_mask, nullptr),
              "temp_bytes"));
  REQUIRE(llmk::obs::magnitude_prune_gpu(nullptr, &bytes, dw.data(), 3, 64, c.ldw, layer, dout.data(),
                                         c.ld_out, dm.data(), c.ld_mask, nullptr)
              .ok());
  CHECK(bytes >= 3 * 64 * 5);  // keys and keep flags at least
  llmk::DeviceBuffer<unsigned char> temp(bytes + 16);
  std::size_t small = bytes - 1;
  CHECK(names(llmk::obs::magnitude_prune_gpu(temp.data(), &small, dw.data(), 3, 64, c.ldw, layer, dout.data(),
                                             c.ld_out, dm.data(), c.ld_mask, nullptr),
              "temp_bytes"));
  std::size_t enough = bytes + 8;
  CHECK(names(llmk::obs::magnitude_prune_gpu(temp.data() + 8, &enough, dw.data(), 3, 64, c.ldw, layer,
                                             dout.data(), c.ld_out, dm.data(), c.ld_mask, nullptr),
              "temp"));
  CHECK(names(
      llmk::obs::magnitude_prune_gpu(reinterpret_cast<unsigned char*>(dout.data()), &enough, dw.data(), 3, 64,
                                     c.ldw, layer, dout.data(), c.ld_out, dm.data(), c.ld_mask, nullptr),
      "temp"));  // overlaps out_weights
  CHECK(names(llmk::obs::magnitude_prune_gpu(temp.data(), &bytes, dw.data(), 3, 64, c.ldw, layer, dout.data(),
                                             c.ld_out, dm.data(), c.ld_mask, nullptr,
                                             static_cast<llmk::obs::PruneGpuSelect>(7)),
              "select"));
}

TEST_CASE("wanda / magnitude gpu: bad arguments are named") {
  const Case c = make_case(4, 16, 705u, false);
  llmk::DeviceBuffer<float> dw(c.w), dh(c.h), dout(static_cast<std::size_t>(4 * c.ld_out));
  llmk::DeviceBuffer<std::uint8_t> dm(static_cast<std::size_t>(4 * c.ld_mask));
  llmk::obs::PruneOptions ok;
  const auto wanda = [&](std::int64_t rows, std::int64_t cols, const float* w, std::int64_t ldw,
                         const float* h, std::int64_t ldh, const llmk::obs::PruneOptions& o, float* out,
                         std::int64_t ldo, std::uint8_t* m, std::int64_t ldm) {
    return llmk::obs::wanda_prune_gpu(w, rows, cols, ldw, h, ldh, o, out, ldo, m, ldm, nullptr);
  };
  float* out = dout.data();
  std::uint8_t* m = dm.data();
  CHECK(names(wanda(0, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "rows"));
  CHECK(names(wanda(4, 0, dw.data(), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "cols"));
  CHECK(names(wanda(4, 16, nullptr, c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "w"));
  CHECK(names(wanda(4, 16, dw.data(), 15, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "ldw"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, nullptr, c.ldh, ok, out, c.ld_out, m, c.ld_mask), "h"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), 8, ok, out, c.ld_out, m, c.ld_mask), "ldh"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, nullptr, c.ld_out, m, c.ld_mask),
              "out_weights"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, out, 3, m, c.ld_mask), "ld_out"));
  CHECK(
      names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, nullptr, c.ld_mask), "mask"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, 2), "ld_mask"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, dw.data(), c.ldw, m, c.ld_mask),
              "out_weights"));  // overlaps w
  // fp32 accesses: pointers off by 2 bytes are named, never loaded.
  const auto off2 = [](float* p) { return reinterpret_cast<float*>(reinterpret_cast<char*>(p) + 2); };
  CHECK(names(wanda(4, 16, off2(dw.data()), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "w"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, off2(dh.data()), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "h"));
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, off2(out), c.ld_out, m, c.ld_mask),
              "out_weights"));
  llmk::obs::PruneOptions bad;
  bad.sparsity = 1.0;
  CHECK(
      names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, bad, out, c.ld_out, m, c.ld_mask), "sparsity"));
  bad.sparsity = std::nan("");
  CHECK(
      names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, bad, out, c.ld_out, m, c.ld_mask), "sparsity"));
  bad = {};
  bad.prune_n = 2;
  bad.prune_m = 6;  // 16 % 6 != 0
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, bad, out, c.ld_out, m, c.ld_mask), "prune_m"));
  bad.prune_n = -1;
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, bad, out, c.ld_out, m, c.ld_mask), "prune_n"));
  bad = {};
  bad.count = static_cast<llmk::obs::PruneCount>(3);
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, bad, out, c.ld_out, m, c.ld_mask), "count"));
  {  // m > 32: unsupported on the GPU
    const Case big = make_case(2, 64, 1, false);
    llmk::DeviceBuffer<float> bw(big.w), bh(big.h), bo(static_cast<std::size_t>(2 * big.ld_out));
    llmk::DeviceBuffer<std::uint8_t> bm(static_cast<std::size_t>(2 * big.ld_mask));
    llmk::obs::PruneOptions o;
    o.prune_n = 2;
    o.prune_m = 64;
    CHECK(names(llmk::obs::magnitude_prune_gpu(bw.data(), 2, 64, big.ldw, o, bo.data(), big.ld_out, bm.data(),
                                               big.ld_mask, nullptr),
                "prune_m"));
  }
  // Values: non-finite w, non-finite or negative diag h (the host entries' rules).
  std::vector<float> w2 = c.w, h2 = c.h;
  w2[static_cast<std::size_t>(3 * c.ldw + 15)] = INFINITY;
  llmk::DeviceBuffer<float> dw2(w2);
  CHECK(names(wanda(4, 16, dw2.data(), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "w"));
  CHECK(names(
      llmk::obs::magnitude_prune_gpu(dw2.data(), 4, 16, c.ldw, ok, out, c.ld_out, m, c.ld_mask, nullptr),
      "w"));
  h2[static_cast<std::size_t>(7 * c.ldh + 7)] = -1.0f;
  llmk::DeviceBuffer<float> dh2(h2);
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh2.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "h"));
  h2[static_cast<std::size_t>(7 * c.ldh + 7)] = std::nanf("");
  llmk::DeviceBuffer<float> dh3(h2);
  CHECK(names(wanda(4, 16, dw.data(), c.ldw, dh3.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "h"));
  // Padding NaN is not an error, and the valid call still works after the failures.
  CHECK(wanda(4, 16, dw.data(), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask).ok());
#if !defined(LLMK_SIM)
  std::vector<float> host_w(c.w);
  CHECK(names(wanda(4, 16, host_w.data(), c.ldw, dh.data(), c.ldh, ok, out, c.ld_out, m, c.ld_mask), "w"));
#endif
}

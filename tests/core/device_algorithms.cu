// Tests of llmk/core/device_algorithms.cuh (CUB on a GPU, Thrust's CPP system in the simulator) against plain
// std:: references: odd sizes, empty inputs, many ties (stability), both orders, segments with empty ones,
// bad arguments. Outputs are poisoned first, so an element that is not written fails. The sorts' keys cover
// the documented types' whole ranges (unsigned with the top bit set, int32 and int64 from min to max, float
// from -Inf to +Inf with -0.0 and +0.0): sort_pairs all four types, segmented_sort_pairs unsigned and int64,
// sort_keys and segmented_sort_keys unsigned and float (the types instantiated anyway: nvcc time). A sort
// that compares signed keys as unsigned, or stops short of the top bits, fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/memory.cuh"
#include "support/test_env.hpp"

namespace {

namespace dev = llmk::device;

// Runs f(temp, &bytes) twice, CUB style: the size query, then the call with a fresh buffer of that size.
template <class F>
llmk::Status with_temp(F&& f) {
  std::size_t bytes = 0;
  LLMK_RETURN_IF_ERROR(f(nullptr, &bytes));
  llmk::DeviceBuffer<unsigned char> temp(std::max<std::size_t>(bytes, 1));
  return f(temp.data(), &bytes);
}

template <class Key>
std::vector<Key> random_keys(std::int64_t n, std::uint32_t seed, int distinct) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, distinct - 1);
  std::vector<Key> k(static_cast<std::size_t>(n));
  for (auto& v : k) {
    const int x = d(rng);
    if constexpr (std::is_floating_point_v<Key>)
      v = static_cast<Key>(x - distinct / 2) * 0.25f;  // negative, zero and positive, exact, many ties
    else
      v = static_cast<Key>(x);
  }
  return k;
}

// The edges of Key's range, ascending: min and max and their neighbours, -1 / 0 / 1, the top bit alone and
// the one below it, a 64-bit key's high half; for float -Inf .. +Inf with -FLT_MAX / FLT_MAX, the smallest
// normal and denormal values of both signs, and -0.0 next to +0.0 (equal keys: device_algorithms.cuh).
template <class Key>
std::vector<Key> edge_keys() {
  using L = std::numeric_limits<Key>;
  if constexpr (std::is_floating_point_v<Key>) {
    return {
        -L::infinity(),  L::lowest(), -1e30f, -3.0f, -1.0f, -0.25f, -L::min(), -L::denorm_min(), -0.0f, 0.0f,
        L::denorm_min(), L::min(),    0.25f,  1.0f,  3.0f,  1e30f,  L::max(),  L::infinity()};
  } else {
    using U = std::make_unsigned_t<Key>;
    constexpr int kBits = static_cast<int>(sizeof(Key)) * 8;
    std::vector<Key> v = {L::min(),
                          static_cast<Key>(L::min() + 1),
                          Key{0},
                          Key{1},
                          static_cast<Key>(U{1} << (kBits / 2)),  // the high half's lowest bit (64-bit: 32)
                          static_cast<Key>(U{1} << (kBits - 2)),  // the bit below the top one
                          static_cast<Key>(L::max() - 1),
                          L::max()};
    if constexpr (std::is_signed_v<Key>) {
      v.push_back(Key{-1});
      v.push_back(Key{-2});
      v.push_back(static_cast<Key>(-(Key{1} << (kBits / 2))));
    } else {
      v.push_back(static_cast<Key>(U{1} << (kBits - 1)));        // the top bit alone
      v.push_back(static_cast<Key>((U{1} << (kBits - 1)) - 1));  // every bit but the top one
    }
    std::sort(v.begin(), v.end());
    return v;
  }
}

// Sort keys over Key's whole range. pool > 0: each key is one of edge_keys() or one of `pool` random values
// (many ties: stability shows); pool == 0: one key in four is an edge, the others fresh random bit patterns
// (every bit, both signs; float: every exponent, denormals, never NaN, which device_algorithms.cuh excludes).
template <class Key>
std::vector<Key> full_range_keys(std::int64_t n, std::uint32_t seed, int pool) {
  std::mt19937_64 rng(seed);
  auto fresh = [&]() -> Key {
    if constexpr (std::is_floating_point_v<Key>) {
      for (;;) {
        const Key f = std::bit_cast<Key>(static_cast<std::uint32_t>(rng()));
        if (!std::isnan(f)) return f;
      }
    } else {
      return static_cast<Key>(rng());  // modulo 2^bits: any pattern, top bit included
    }
  };
  std::vector<Key> values = edge_keys<Key>();
  const std::size_t edges = values.size();
  for (int i = 0; i < pool; ++i) values.push_back(fresh());
  std::vector<Key> k(static_cast<std::size_t>(n));
  for (auto& v : k)
    if (pool > 0)
      v = values[rng() % values.size()];
    else
      v = rng() % 4 == 0 ? values[rng() % edges] : fresh();
  return k;
}

// The key type, for CAPTURE.
template <class Key>
const char* key_name() {
  if constexpr (std::is_floating_point_v<Key>)
    return "float";
  else if constexpr (std::is_signed_v<Key>)
    return sizeof(Key) == 8 ? "int64" : "int32";
  else
    return sizeof(Key) == 8 ? "uint64" : "uint32";
}

// An element of a poisoned buffer (0xFF bytes: -1, or a NaN for float).
template <class Key>
Key poisoned() {
  Key k;
  std::memset(&k, 0xFF, sizeof(Key));
  return k;
}

// Bit-identical (a sort moves keys: -0.0 stays -0.0).
template <class Key>
bool same_bits(const Key& a, const Key& b) {
  return std::memcmp(&a, &b, sizeof(Key)) == 0;
}

template <class Key>
void check_sort(std::int64_t n, dev::SortOrder order, std::uint32_t seed, int pool) {
  CAPTURE(n);
  CAPTURE(pool);
  const std::string key_type = key_name<Key>();
  CAPTURE(key_type);
  const std::vector<Key> keys = full_range_keys<Key>(n, seed, pool);
  if (n >= 1000) {  // the range's ends are there (min / max, -Inf / +Inf), and ties when the pool is small
    const std::vector<Key> edges = edge_keys<Key>();
    REQUIRE(std::count(keys.begin(), keys.end(), edges.front()) > 0);
    REQUIRE(std::count(keys.begin(), keys.end(), edges.back()) > 0);
  }
  std::vector<std::int32_t> vals(keys.size());
  std::iota(vals.begin(), vals.end(), 0);
  llmk::DeviceBuffer<Key> dk(keys), dk_out(keys.size() + 1);
  llmk::DeviceBuffer<std::int32_t> dv(vals), dv_out(vals.size() + 1);
  dk_out.poison();
  dv_out.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::sort_pairs<Key, std::int32_t>(t, b, dk.data(), dk_out.data(), dv.data(),
                                                      dv_out.data(), n, order, nullptr);
          }).ok());
  std::vector<std::int32_t> want = vals;  // stable reference
  std::stable_sort(want.begin(), want.end(), [&](std::int32_t a, std::int32_t b) {
    return order == dev::SortOrder::kAscending
               ? keys[static_cast<std::size_t>(a)] < keys[static_cast<std::size_t>(b)]
               : keys[static_cast<std::size_t>(a)] > keys[static_cast<std::size_t>(b)];
  });
  const std::vector<Key> got_k = dk_out.to_host();
  const std::vector<std::int32_t> got_v = dv_out.to_host();
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    bad += got_v[i] != want[i] || !same_bits(got_k[i], keys[static_cast<std::size_t>(want[i])]);
  CHECK(bad == 0);
  CHECK(got_v[want.size()] == -1);  // one past the end: poison kept
}

}  // namespace

TEST_CASE(
    "sort_pairs: stable, both orders, odd sizes, empty, ties; full-range unsigned, int32, int64, float") {
  std::uint32_t seed = 7;
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{37}, std::int64_t{1000},
                               std::int64_t{llmk::test::pick<std::int64_t>(5003, 777)}})
    for (const auto order : {dev::SortOrder::kAscending, dev::SortOrder::kDescending}) {
      // pool 3: the edges and 3 random values, many ties (stability shows); pool 0: mostly distinct
      check_sort<unsigned>(n, order, ++seed, 3);  // top bit set and clear
      check_sort<unsigned>(n, order, ++seed, 0);
      check_sort<std::int32_t>(n, order, ++seed, 3);  // INT_MIN .. INT_MAX, negatives
      check_sort<std::int32_t>(n, order, ++seed, 0);
      check_sort<std::int64_t>(n, order, ++seed, 3);  // INT64_MIN .. INT64_MAX, negatives
      check_sort<std::int64_t>(n, order, ++seed, 0);
      check_sort<float>(n, order, ++seed, 3);  // -Inf .. +Inf, -0.0 and +0.0 (equal: their input order)
      check_sort<float>(n, order, ++seed, 0);
    }
}

namespace {

template <class Key>
void check_segmented_sort_pairs(std::uint32_t seed) {
  const std::string key_type = key_name<Key>();
  CAPTURE(key_type);
  const std::vector<std::int64_t> offsets = {0, 0, 5, 6, 6, 40, 41, 100};  // empty, 5, 1, empty, 34, 1, 59
  const std::int64_t n = 104;  // elements 100 .. 103 belong to no segment: not written
  const std::int64_t segments = static_cast<std::int64_t>(offsets.size()) - 1;
  const std::vector<Key> keys = full_range_keys<Key>(n, seed, 2);  // the range's edges, many ties
  std::vector<std::int32_t> vals(static_cast<std::size_t>(n));
  std::iota(vals.begin(), vals.end(), 0);
  for (const auto order : {dev::SortOrder::kAscending, dev::SortOrder::kDescending}) {
    llmk::DeviceBuffer<Key> dk(keys), dk_out(keys.size());
    llmk::DeviceBuffer<std::int32_t> dv(vals), dv_out(vals.size());
    llmk::DeviceBuffer<std::int64_t> doff(offsets);
    dk_out.poison();
    dv_out.poison();
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::segmented_sort_pairs<Key, std::int32_t>(t, b, dk.data(), dk_out.data(), dv.data(),
                                                                  dv_out.data(), n, segments, doff.data(),
                                                                  order, nullptr);
            }).ok());
    const std::vector<std::int32_t> got = dv_out.to_host();
    const std::vector<Key> got_k = dk_out.to_host();
    std::vector<std::int32_t> want = vals;
    for (std::int64_t s = 0; s < segments; ++s)
      std::stable_sort(
          want.begin() + offsets[static_cast<std::size_t>(s)],
          want.begin() + offsets[static_cast<std::size_t>(s) + 1], [&](std::int32_t a, std::int32_t b) {
            const Key ka = keys[static_cast<std::size_t>(a)], kb = keys[static_cast<std::size_t>(b)];
            return order == dev::SortOrder::kAscending ? ka < kb : kb < ka;
          });
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < 100; ++i)
      bad += got[i] != want[i] || !same_bits(got_k[i], keys[static_cast<std::size_t>(want[i])]);
    CHECK(bad == 0);
    for (std::size_t i = 100; i < keys.size(); ++i) {  // poison kept
      CHECK(got[i] == -1);
      CHECK(same_bits(got_k[i], poisoned<Key>()));
    }
  }
}

}  // namespace

TEST_CASE(
    "segmented_sort_pairs: every segment sorted stably, empty segments, gaps untouched; full-range keys") {
  check_segmented_sort_pairs<unsigned>(3);      // top bit set and clear
  check_segmented_sort_pairs<std::int64_t>(4);  // INT64_MIN .. INT64_MAX, negatives
}

TEST_CASE("scans, reductions and select_flagged against std:: (exact integer and max results)") {
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{255}, std::int64_t{4099}}) {
    CAPTURE(n);
    std::mt19937 rng(static_cast<std::uint32_t>(n) + 1);
    // -50 .. 50 without 0: the inclusive sum differs from the exclusive one everywhere
    std::uniform_int_distribution<int> d(-50, 49);
    std::vector<std::int64_t> x(static_cast<std::size_t>(n));
    for (auto& v : x) {
      const int r = d(rng);
      v = r >= 0 ? r + 1 : r;
    }
    llmk::DeviceBuffer<std::int64_t> dx(x), dout(x.size() + 1), dsum(1);
    dout.poison();  // each scan writes dout: poisoned before each, so that one writing nothing fails
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::exclusive_sum<std::int64_t>(t, b, dx.data(), dout.data(), n, nullptr);
            }).ok());
    std::vector<std::int64_t> want(x.size());
    std::exclusive_scan(x.begin(), x.end(), want.begin(), std::int64_t{0});
    std::vector<std::int64_t> got = dout.to_host();
    CHECK(got.back() == -1);  // one past the end: poison kept
    got.resize(x.size());
    CHECK(got == want);
    dout.poison();
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::inclusive_sum<std::int64_t>(t, b, dx.data(), dout.data(), n, nullptr);
            }).ok());
    std::inclusive_scan(x.begin(), x.end(), want.begin());
    got = dout.to_host();
    CHECK(got.back() == -1);
    got.resize(x.size());
    CHECK(got == want);
    dsum.poison();
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::reduce_sum<std::int64_t>(t, b, dx.data(), dsum.data(), n, nullptr);
            }).ok());
    CHECK(dsum.to_host()[0] == std::accumulate(x.begin(), x.end(), std::int64_t{0}));

    // max |x| skipping NaN and Inf (0 when nothing is finite)
    std::vector<float> f(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(x[i]) * 0.37f;
    if (n > 3) {
      f[1] = std::numeric_limits<float>::quiet_NaN();
      f[2] = -std::numeric_limits<float>::infinity();
    }
    float want_amax = 0.0f;
    for (float v : f)
      if (std::isfinite(v)) want_amax = std::max(want_amax, std::fabs(v));
    llmk::DeviceBuffer<float> df(f), damax(1);
    damax.poison();
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::reduce_max_abs<float>(t, b, df.data(), damax.data(), n, nullptr);
            }).ok());
    CHECK(damax.to_host()[0] == want_amax);

    // select the positive elements' indices
    std::vector<std::int32_t> idx(x.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::vector<std::uint8_t> flags(x.size());
    std::vector<std::int32_t> want_sel;
    for (std::size_t i = 0; i < x.size(); ++i) {
      flags[i] = x[i] > 0 ? 1 : 0;
      if (flags[i]) want_sel.push_back(static_cast<std::int32_t>(i));
    }
    llmk::DeviceBuffer<std::int32_t> didx(idx), dsel(idx.size() + 1);
    llmk::DeviceBuffer<std::uint8_t> dflags(flags);
    llmk::DeviceBuffer<std::int64_t> dcount(1);
    dsel.poison();
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::select_flagged<std::int32_t>(t, b, didx.data(), dflags.data(), dsel.data(),
                                                       dcount.data(), n, nullptr);
            }).ok());
    REQUIRE(dcount.to_host()[0] == static_cast<std::int64_t>(want_sel.size()));
    std::vector<std::int32_t> sel = dsel.to_host();
    sel.resize(want_sel.size());
    CHECK(sel == want_sel);
  }
}

TEST_CASE("segmented_reduce_max_abs and lowest_k_mask (the pruning rank rule: ties to the lower index)") {
  const std::vector<std::int64_t> offsets = {0, 3, 3, 50, 51};
  std::vector<float> x(51);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (auto& v : x) v = nd(rng);
  x[10] = std::numeric_limits<float>::infinity();
  llmk::DeviceBuffer<float> dx(x), dout(4);
  llmk::DeviceBuffer<std::int64_t> doff(offsets);
  dout.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::segmented_reduce_max_abs<float>(t, b, dx.data(), dout.data(), 4, doff.data(),
                                                        nullptr);
          }).ok());
  const std::vector<float> got = dout.to_host();
  for (std::size_t s = 0; s < 4; ++s) {
    float want = 0.0f;
    for (std::int64_t i = offsets[s]; i < offsets[s + 1]; ++i)
      if (std::isfinite(x[static_cast<std::size_t>(i)]))
        want = std::max(want, std::fabs(x[static_cast<std::size_t>(i)]));
    CHECK(got[s] == want);
  }

  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{300}, std::int64_t{1031}})
    for (const std::int64_t k : {std::int64_t{0}, std::int64_t{1}, n / 2, n, n + 5}) {
      CAPTURE(n);
      CAPTURE(k);
      const std::vector<unsigned> keys = random_keys<unsigned>(n, static_cast<std::uint32_t>(n + k), 7);
      llmk::DeviceBuffer<unsigned> dk(keys);
      llmk::DeviceBuffer<std::uint8_t> keep(keys.size());
      keep.poison();
      REQUIRE(with_temp([&](void* t, std::size_t* b) {
                return dev::lowest_k_mask<unsigned>(t, b, dk.data(), n, k, keep.data(), nullptr);
              }).ok());
      const std::vector<std::uint8_t> m = keep.to_host();
      // rank_t = #{u : s_u < s_t or (s_u == s_t and u < t)}; pruned iff rank < k
      std::int64_t bad = 0;
      for (std::int64_t t = 0; t < n; ++t) {
        std::int64_t rank = 0;
        for (std::int64_t u = 0; u < n; ++u)
          rank += keys[static_cast<std::size_t>(u)] < keys[static_cast<std::size_t>(t)] ||
                  (keys[static_cast<std::size_t>(u)] == keys[static_cast<std::size_t>(t)] && u < t);
        bad += m[static_cast<std::size_t>(t)] != (rank < k ? 0 : 1);
      }
      CHECK(bad == 0);
    }
}

TEST_CASE("segmented_lowest_k_mask: equal segments, per-segment k, ties, 64-bit keys") {
  // rows x cols score matrices as the per-row pruning selections use them; few distinct keys (many ties)
  for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{5}})
    for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{77}})
      for (const std::int64_t k : {std::int64_t{0}, cols / 3, cols, cols + 2}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(k);
        std::vector<unsigned long long> keys(static_cast<std::size_t>(rows * cols));
        std::mt19937 rng(static_cast<std::uint32_t>(rows * 131 + cols * 7 + k));
        std::uniform_int_distribution<int> few(0, 5);
        for (auto& v : keys) v = (static_cast<unsigned long long>(few(rng)) << 40) + 3;  // high bits matter
        llmk::DeviceBuffer<unsigned long long> dk(keys);
        llmk::DeviceBuffer<std::uint8_t> keep(keys.size());
        keep.poison();
        REQUIRE(with_temp([&](void* t, std::size_t* b) {
                  return dev::segmented_lowest_k_mask<unsigned long long>(t, b, dk.data(), rows, cols, k,
                                                                          keep.data(), nullptr);
                }).ok());
        const std::vector<std::uint8_t> m = keep.to_host();
        std::int64_t bad = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t t = 0; t < cols; ++t) {
            const auto key = [&](std::int64_t c) { return keys[static_cast<std::size_t>(r * cols + c)]; };
            std::int64_t rank = 0;
            for (std::int64_t u = 0; u < cols; ++u) rank += key(u) < key(t) || (key(u) == key(t) && u < t);
            bad += m[static_cast<std::size_t>(r * cols + t)] != (rank < k ? 0 : 1);
          }
        CHECK(bad == 0);
      }
  std::size_t bytes = 0;
  auto has = [](const llmk::Status& s, const char* arg) {
    return !s.ok() && s.message().find(std::string("'") + arg + "'") != std::string::npos;
  };
  CHECK(has(dev::segmented_lowest_k_mask<unsigned>(nullptr, &bytes, nullptr, -1, 4, 1, nullptr, nullptr),
            "segments"));
  CHECK(has(dev::segmented_lowest_k_mask<unsigned>(nullptr, &bytes, nullptr, 2, -4, 1, nullptr, nullptr),
            "length"));
  CHECK(
      has(dev::segmented_lowest_k_mask<unsigned>(nullptr, &bytes, nullptr, 65536, 65536, 1, nullptr, nullptr),
          "count"));
  REQUIRE(dev::segmented_lowest_k_mask<unsigned>(nullptr, &bytes, nullptr, 0, 4, 1, nullptr, nullptr).ok());
  CHECK(bytes > 0);  // never 0: "allocate, then call" must not pass nullptr again
}

TEST_CASE("device algorithms: bad arguments are named") {
  llmk::DeviceBuffer<unsigned> k(8);
  llmk::DeviceBuffer<std::int32_t> v(8);
  std::size_t bytes = 0;
  auto has = [](const llmk::Status& s, const char* arg) {
    return !s.ok() && s.message().find(std::string("'") + arg + "'") != std::string::npos;
  };
  CHECK(has(dev::sort_pairs<unsigned, std::int32_t>(nullptr, nullptr, k.data(), k.data(), v.data(), v.data(),
                                                    8, dev::SortOrder::kAscending, nullptr),
            "temp_bytes"));
  CHECK(has(dev::sort_pairs<unsigned, std::int32_t>(nullptr, &bytes, k.data(), k.data(), v.data(), v.data(),
                                                    -1, dev::SortOrder::kAscending, nullptr),
            "count"));
  REQUIRE(dev::sort_pairs<unsigned, std::int32_t>(nullptr, &bytes, k.data(), k.data(), v.data(), v.data(), 8,
                                                  dev::SortOrder::kAscending, nullptr)
              .ok());
  llmk::DeviceBuffer<unsigned char> temp(bytes + 16);
  std::size_t small = bytes - 1;
  CHECK(has(dev::sort_pairs<unsigned, std::int32_t>(temp.data(), &small, k.data(), k.data(), v.data(),
                                                    v.data(), 8, dev::SortOrder::kAscending, nullptr),
            "temp_bytes"));
  std::size_t enough = bytes + 8;
  CHECK(has(dev::sort_pairs<unsigned, std::int32_t>(temp.data() + 1, &enough, k.data(), k.data(), v.data(),
                                                    v.data(), 8, dev::SortOrder::kAscending, nullptr),
            "temp"));
  CHECK(has(dev::sort_pairs<unsigned, std::int32_t>(temp.data(), &bytes, nullptr, k.data(), v.data(),
                                                    v.data(), 8, dev::SortOrder::kAscending, nullptr),
            "keys_in"));
  CHECK(has(dev::segmented_sort_pairs<unsigned, std::int32_t>(nullptr, &bytes, k.data(), k.data(), v.data(),
                                                              v.data(), 8, -2, nullptr,
                                                              dev::SortOrder::kAscending, nullptr),
            "segments"));
  CHECK(has(dev::lowest_k_mask<unsigned>(nullptr, &bytes, k.data(), -3, 1, nullptr, nullptr), "count"));
  // Each null pointer is named itself (not the first pointer of the list).
  CHECK(has(dev::sort_pairs<unsigned, std::int32_t>(temp.data(), &bytes, k.data(), k.data(), v.data(),
                                                    nullptr, 8, dev::SortOrder::kAscending, nullptr),
            "values_out"));
  CHECK(has(dev::sort_pairs<unsigned, std::int32_t>(temp.data(), &bytes, k.data(), nullptr, v.data(),
                                                    v.data(), 8, dev::SortOrder::kAscending, nullptr),
            "keys_out"));
}

namespace {

template <class Key>
void check_segmented_sort_keys(std::uint32_t seed, int pool) {
  const std::string key_type = key_name<Key>();
  CAPTURE(key_type);
  const std::vector<std::int64_t> offsets = {0, 0, 5, 6, 6, 40, 41, 100};
  const std::int64_t n = 103, segments = 7;  // 100 .. 102 in no segment: not written
  const std::vector<Key> keys = full_range_keys<Key>(n, seed, pool);
  llmk::DeviceBuffer<std::int64_t> doff(offsets);
  for (const auto order : {dev::SortOrder::kAscending, dev::SortOrder::kDescending}) {
    llmk::DeviceBuffer<Key> dk(keys), dout(keys.size());
    dout.poison();
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::segmented_sort_keys<Key>(t, b, dk.data(), dout.data(), n, segments, doff.data(),
                                                   order, nullptr);
            }).ok());
    std::vector<Key> want = keys;
    for (std::size_t s = 0; s < 7; ++s)  // stable: -0.0 and +0.0 keep their input order
      std::stable_sort(want.begin() + offsets[s], want.begin() + offsets[s + 1],
                       [&](Key a, Key b) { return order == dev::SortOrder::kAscending ? a < b : b < a; });
    const std::vector<Key> got = dout.to_host();
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < 100; ++i) bad += !same_bits(got[i], want[i]);
    CHECK(bad == 0);
    for (std::size_t i = 100; i < 103; ++i) CHECK(same_bits(got[i], poisoned<Key>()));  // poison kept
  }
}

template <class Key>
void check_sort_keys(std::int64_t n, dev::SortOrder order, std::uint32_t seed, int pool) {
  CAPTURE(n);
  const std::string key_type = key_name<Key>();
  CAPTURE(key_type);
  const std::vector<Key> keys = full_range_keys<Key>(n, seed, pool);
  llmk::DeviceBuffer<Key> dk(keys), dout(keys.size() + 1);
  dout.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::sort_keys<Key>(t, b, dk.data(), dout.data(), n, order, nullptr);
          }).ok());
  std::vector<Key> want = keys;  // stable: -0.0 and +0.0 keep their input order
  std::stable_sort(want.begin(), want.end(),
                   [&](Key a, Key b) { return order == dev::SortOrder::kAscending ? a < b : b < a; });
  const std::vector<Key> got = dout.to_host();
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += !same_bits(got[i], want[i]);
  CHECK(bad == 0);
  CHECK(same_bits(got[want.size()], poisoned<Key>()));  // one past the end: poison kept
}

}  // namespace

TEST_CASE("sort_keys and segmented_sort_keys: stable (signed zeros keep their order), both orders, empty") {
  // Key types with a CUB instantiation elsewhere in this file (the misaligned-pointer and order tests): a
  // signed integer type here would add one (nvcc time); signed keys go through sort_pairs (int32, int64) and
  // segmented_sort_pairs (int64).
  std::uint32_t seed = 101;
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{37},
                               std::int64_t{llmk::test::pick<std::int64_t>(3001, 515)}})
    for (const auto order : {dev::SortOrder::kAscending, dev::SortOrder::kDescending}) {
      check_sort_keys<float>(n, order, ++seed, 3);     // -Inf .. +Inf, negatives, ties, -0.0 next to +0.0
      check_sort_keys<unsigned>(n, order, ++seed, 0);  // top bit set and clear, random bit patterns
    }
  check_segmented_sort_keys<unsigned>(9, 0);
  check_segmented_sort_keys<float>(10, 2);
}

TEST_CASE("segmented_reduce_sum: exact integer sums, empty segments") {
  const std::vector<std::int64_t> offsets = {0, 4, 4, 61, 62, 62};
  std::vector<std::int64_t> x(62);
  std::mt19937 rng(13);
  std::uniform_int_distribution<std::int64_t> d(-(std::int64_t{1} << 40), std::int64_t{1} << 40);
  for (auto& v : x) v = d(rng);
  llmk::DeviceBuffer<std::int64_t> dx(x), dout(5), doff(offsets);
  dout.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::segmented_reduce_sum<std::int64_t>(t, b, dx.data(), dout.data(), 5, doff.data(),
                                                           nullptr);
          }).ok());
  const std::vector<std::int64_t> got = dout.to_host();
  for (std::size_t s = 0; s < 5; ++s)
    CHECK(got[s] == std::accumulate(x.begin() + offsets[s], x.begin() + offsets[s + 1], std::int64_t{0}));
}

namespace {

// The pruning rank rule within one segment: the stable order of its positions by key.
template <class Key>
std::vector<std::int64_t> stable_order(const std::vector<Key>& keys, std::int64_t b, std::int64_t e) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(e - b));
  std::iota(pos.begin(), pos.end(), b);
  std::stable_sort(pos.begin(), pos.end(), [&](std::int64_t x, std::int64_t y) {
    return keys[static_cast<std::size_t>(x)] < keys[static_cast<std::size_t>(y)];
  });
  return pos;
}

}  // namespace

TEST_CASE("ragged segments: segmented_lowest_k_mask with offsets and ks, segmented_kth_value, kth_value") {
  // segments of different lengths, empty ones among them; few distinct keys (ties); k out of range both ways
  const std::vector<std::int64_t> offsets = {0, 0, 5, 6, 6, 40, 41, 100, 173};
  const std::int64_t segments = 8, n = 173;
  const std::vector<std::int64_t> ks = {3, 2, 1, 0, 17, -4, 30, 100};
  for (const int distinct : {3, 1 << 30}) {
    CAPTURE(distinct);
    const std::vector<float> keys = random_keys<float>(n, static_cast<std::uint32_t>(distinct), distinct);
    llmk::DeviceBuffer<float> dk(keys), dkth(segments);
    llmk::DeviceBuffer<std::int64_t> doff(offsets), dks(ks);
    llmk::DeviceBuffer<std::uint8_t> keep(keys.size());
    keep.poison();
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::segmented_lowest_k_mask<float>(t, b, dk.data(), n, segments, doff.data(),
                                                         dks.data(), keep.data(), nullptr);
            }).ok());
    const std::vector<std::uint8_t> m = keep.to_host();
    std::vector<std::uint8_t> want(keys.size(), 1);
    for (std::size_t s = 0; s < 8; ++s) {
      const std::vector<std::int64_t> pos = stable_order(keys, offsets[s], offsets[s + 1]);
      const std::int64_t k = std::clamp<std::int64_t>(ks[s], 0, static_cast<std::int64_t>(pos.size()));
      for (std::int64_t i = 0; i < k; ++i)
        want[static_cast<std::size_t>(pos[static_cast<std::size_t>(i)])] = 0;
    }
    CHECK(m == want);
    for (const std::int64_t k : {std::int64_t{-1}, std::int64_t{0}, std::int64_t{4}, std::int64_t{1000}}) {
      CAPTURE(k);
      dkth.poison();
      REQUIRE(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_kth_value<float>(t, b, dk.data(), n, segments, doff.data(), k,
                                                       dkth.data(), nullptr);
              }).ok());
      const std::vector<float> got = dkth.to_host();
      for (std::size_t s = 0; s < 8; ++s) {
        const std::vector<std::int64_t> pos = stable_order(keys, offsets[s], offsets[s + 1]);
        const std::int64_t r = std::clamp<std::int64_t>(k, 0, static_cast<std::int64_t>(pos.size()) - 1);
        CHECK(got[s] ==
              (pos.empty() ? 0.0f : keys[static_cast<std::size_t>(pos[static_cast<std::size_t>(r)])]));
      }
      llmk::DeviceBuffer<float> one(1);
      one.poison();
      REQUIRE(with_temp([&](void* t, std::size_t* b) {
                return dev::kth_value<float>(t, b, dk.data(), n, k, one.data(), nullptr);
              }).ok());
      std::vector<float> sorted = keys;
      std::sort(sorted.begin(), sorted.end());
      CHECK(one.to_host()[0] == sorted[static_cast<std::size_t>(std::clamp<std::int64_t>(k, 0, n - 1))]);
    }
  }
  // one segment (no grouping sort) and an empty tensor
  const std::vector<unsigned> keys = random_keys<unsigned>(50, 4, 6);
  const std::vector<std::int64_t> off1 = {0, 50}, k1 = {20};
  llmk::DeviceBuffer<unsigned> dk(keys), one(1);
  llmk::DeviceBuffer<std::int64_t> doff(off1), dks(k1);
  llmk::DeviceBuffer<std::uint8_t> keep(keys.size());
  keep.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::segmented_lowest_k_mask<unsigned>(t, b, dk.data(), 50, 1, doff.data(), dks.data(),
                                                          keep.data(), nullptr);
          }).ok());
  const std::vector<std::int64_t> pos = stable_order(keys, 0, 50);
  std::vector<std::uint8_t> want(50, 1);
  for (std::size_t i = 0; i < 20; ++i) want[static_cast<std::size_t>(pos[i])] = 0;
  CHECK(keep.to_host() == want);
  one.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::kth_value<unsigned>(t, b, dk.data(), 0, 3, one.data(), nullptr);
          }).ok());
  CHECK(one.to_host()[0] == 0u);  // empty: Key{}
}

TEST_CASE("select_less_than: the positions below a threshold, in order") {
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{999}})
    for (const float threshold : {-10.0f, 0.0f, 0.5f, 10.0f}) {
      CAPTURE(n);
      CAPTURE(threshold);
      const std::vector<float> keys = random_keys<float>(n, static_cast<std::uint32_t>(n) + 77, 9);
      llmk::DeviceBuffer<float> dk(keys);
      llmk::DeviceBuffer<std::int32_t> out(keys.size() + 1);
      llmk::DeviceBuffer<std::int64_t> count(1);
      out.poison();
      count.poison();
      REQUIRE(with_temp([&](void* t, std::size_t* b) {
                return dev::select_less_than<float, std::int32_t>(t, b, dk.data(), n, threshold, out.data(),
                                                                  count.data(), nullptr);
              }).ok());
      std::vector<std::int32_t> want;
      for (std::int32_t i = 0; i < static_cast<std::int32_t>(n); ++i)
        if (keys[static_cast<std::size_t>(i)] < threshold) want.push_back(i);
      REQUIRE(count.to_host()[0] == static_cast<std::int64_t>(want.size()));
      const std::vector<std::int32_t> got = out.to_host();
      CHECK(std::vector<std::int32_t>(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(want.size())) ==
            want);
    }
}

TEST_CASE(
    "segmented_select_less_than: per-segment thresholds, empty segments, ties, the per-segment counts") {
  // ragged segments with empty ones (first, middle, last); thresholds per segment, some equal to keys (ties
  // are not below); few distinct keys
  const std::vector<std::int64_t> offsets = {0, 0, 5, 6, 6, 40, 41, 100, 173, 173};
  const std::int64_t segments = 9, n = 173;
  const std::vector<float> thresholds = {0.0f, 0.25f, -0.5f, 7.0f, 0.0f, -10.0f, 0.5f, 10.0f, 1.0f};
  const std::vector<float> keys = random_keys<float>(n, 4242, 9);
  llmk::DeviceBuffer<float> dk(keys), dth(thresholds);
  llmk::DeviceBuffer<std::int64_t> doff(offsets), total(1), per(static_cast<std::size_t>(segments));
  llmk::DeviceBuffer<std::int32_t> out(keys.size() + 1);
  out.poison();
  total.poison();
  per.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::segmented_select_less_than<float, std::int32_t>(t, b, dk.data(), n, segments,
                                                                        doff.data(), dth.data(), out.data(),
                                                                        total.data(), per.data(), nullptr);
          }).ok());
  std::vector<std::int32_t> want;
  std::vector<std::int64_t> want_per(static_cast<std::size_t>(segments), 0);
  for (std::size_t s = 0; s < static_cast<std::size_t>(segments); ++s)
    for (std::int64_t i = offsets[s]; i < offsets[s + 1]; ++i)
      if (keys[static_cast<std::size_t>(i)] < thresholds[s]) {
        want.push_back(static_cast<std::int32_t>(i));
        ++want_per[s];
      }
  REQUIRE(total.to_host()[0] == static_cast<std::int64_t>(want.size()));
  const std::vector<std::int32_t> got = out.to_host();
  CHECK(std::vector<std::int32_t>(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(want.size())) ==
        want);
  CHECK(per.to_host() == want_per);
  CHECK(want.size() > 10);  // the case selects something, and not everything
  CHECK(want.size() < keys.size() - 10);
  // empty input (no segments) and counts left out
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::segmented_select_less_than<float, std::int32_t>(
                t, b, nullptr, 0, 0, nullptr, nullptr, nullptr, total.data(), nullptr, nullptr);
          }).ok());
  CHECK(total.to_host()[0] == 0);
  // one segment: select_less_than's answer
  const std::vector<std::int64_t> off1 = {0, n};
  llmk::DeviceBuffer<std::int64_t> doff1(off1);
  out.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::segmented_select_less_than<float, std::int32_t>(t, b, dk.data(), n, 1, doff1.data(),
                                                                        dth.data() + 6, out.data(),
                                                                        total.data(), nullptr, nullptr);
          }).ok());
  std::vector<std::int32_t> one;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(n); ++i)
    if (keys[static_cast<std::size_t>(i)] < 0.5f) one.push_back(i);
  REQUIRE(total.to_host()[0] == static_cast<std::int64_t>(one.size()));
  const std::vector<std::int32_t> got1 = out.to_host();
  CHECK(std::vector<std::int32_t>(got1.begin(), got1.begin() + static_cast<std::ptrdiff_t>(one.size())) ==
        one);
  // bad arguments are named
  std::size_t bytes = 0;
  auto has = [](const llmk::Status& st, const char* arg) {
    return !st.ok() && st.message().find(std::string("'") + arg + "'") != std::string::npos;
  };
  CHECK(has(dev::segmented_select_less_than<float, std::int32_t>(nullptr, &bytes, dk.data(), n, 0, nullptr,
                                                                 nullptr, nullptr, nullptr, nullptr, nullptr),
            "segments"));
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            const llmk::Status st = dev::segmented_select_less_than<float, std::int32_t>(
                t, b, dk.data(), n, segments, nullptr, dth.data(), out.data(), total.data(), nullptr,
                nullptr);
            if (t == nullptr) return st;  // the size query needs no offsets
            CHECK(has(st, "offsets"));
            return llmk::Status{};
          }).ok());
}

TEST_CASE("device algorithms: the new entries name their bad arguments") {
  std::size_t bytes = 0;
  auto has = [](const llmk::Status& s, const char* arg) {
    return !s.ok() && s.message().find(std::string("'") + arg + "'") != std::string::npos;
  };
  llmk::DeviceBuffer<float> k(8), out(2);
  llmk::DeviceBuffer<std::int64_t> ks(2);
  CHECK(
      has(dev::sort_keys<float>(nullptr, &bytes, k.data(), k.data(), -1, dev::SortOrder::kAscending, nullptr),
          "count"));
  CHECK(has(dev::segmented_reduce_sum<std::int64_t>(nullptr, &bytes, nullptr, nullptr, -1, nullptr, nullptr),
            "segments"));
  CHECK(has(dev::segmented_kth_value<float>(nullptr, &bytes, k.data(), 8, 0, nullptr, 1, out.data(), nullptr),
            "segments"));
  CHECK(has(dev::kth_value<float>(nullptr, &bytes, k.data(), std::int64_t{1} << 33, 1, out.data(), nullptr),
            "count"));
  CHECK(has(dev::select_less_than<float, std::int32_t>(nullptr, &bytes, k.data(), std::int64_t{1} << 31, 0.0f,
                                                       nullptr, nullptr, nullptr),
            "count"));
  REQUIRE(
      dev::segmented_kth_value<float>(nullptr, &bytes, k.data(), 8, 2, nullptr, 1, out.data(), nullptr).ok());
  llmk::DeviceBuffer<unsigned char> temp(bytes);
  CHECK(has(
      dev::segmented_kth_value<float>(temp.data(), &bytes, k.data(), 8, 2, nullptr, 1, out.data(), nullptr),
      "offsets"));  // each null pointer named itself
  CHECK(has(dev::segmented_lowest_k_mask<float>(temp.data(), &bytes, k.data(), 8, 2, ks.data(), nullptr,
                                                nullptr, nullptr),
            "ks"));
#if defined(LLMK_SIM)  // offsets are read on the host only in the simulator (on a GPU: the caller's contract)
  const std::vector<std::int64_t> bad_end = {0, 3, 7};
  llmk::DeviceBuffer<std::int64_t> doff(bad_end);
  CHECK(has(dev::segmented_kth_value<float>(temp.data(), &bytes, k.data(), 8, 2, doff.data(), 1, out.data(),
                                            nullptr),
            "offsets"));
#endif
}

namespace {

// p moved by `bytes`: a pointer misaligned for T (never dereferenced: the entries must reject it first).
template <class T>
T* shifted(T* p, std::size_t bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(p) + bytes);
}

// An invalid_argument naming `arg` for the rule that contains `rule`.
bool names(const llmk::Status& s, const char* arg, const char* rule) {
  return s.code() == llmk::Status::Code::kInvalidArgument &&
         s.message().find(std::string("'") + arg + "'") != std::string::npos &&
         s.message().find(rule) != std::string::npos;
}

}  // namespace

TEST_CASE("device algorithms: misaligned pointers are named (sorts, scans and reductions, selections)") {
  constexpr auto asc = dev::SortOrder::kAscending;
  const char* aligned = "must be aligned to its element size";
  const std::vector<float> hf = {3, 1, 2, 0, 5, 4, 7, 6, 0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<std::int64_t> hoff = {0, 3, 8, 0};
  llmk::DeviceBuffer<float> kf(hf), kf_out(16), thr(std::vector<float>{2, 5, 0, 0});
  llmk::DeviceBuffer<unsigned> ku(std::vector<unsigned>(16, 1u)), ku_out(16);
  llmk::DeviceBuffer<std::int32_t> vi(std::vector<std::int32_t>(16, 1)), vi_out(16);
  llmk::DeviceBuffer<std::int64_t> off(hoff), ks(std::vector<std::int64_t>{1, 2, 0, 0}), i64(16);
  llmk::DeviceBuffer<std::uint8_t> keep(16);
  // Sorts: the review's case (float keys 2 bytes off), each array named itself, the int64 offsets 4 off.
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::sort_keys<float>(t, b, shifted(kf.data(), 2), kf_out.data(), 8, asc, nullptr);
              }),
              "keys_in", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::sort_pairs<unsigned, std::int32_t>(t, b, ku.data(), ku_out.data(), vi.data(),
                                                               shifted(vi_out.data(), 1), 8, asc, nullptr);
              }),
              "values_out", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_sort_keys<float>(t, b, kf.data(), kf_out.data(), 8, 2,
                                                       shifted(off.data(), 4), asc, nullptr);
              }),
              "offsets", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_sort_pairs<unsigned, std::int32_t>(t, b, ku.data(), ku_out.data(),
                                                                         shifted(vi.data(), 2), vi_out.data(),
                                                                         8, 2, off.data(), asc, nullptr);
              }),
              "values_in", aligned));
  // One element further is aligned: accepted.
  CHECK(with_temp([&](void* t, std::size_t* b) {
          return dev::sort_keys<unsigned>(t, b, ku.data() + 1, ku_out.data() + 1, 7, asc, nullptr);
        }).ok());
  // Scans and reductions.
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::exclusive_sum<std::int32_t>(t, b, shifted(vi.data(), 2), vi_out.data(), 8,
                                                        nullptr);
              }),
              "in", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::reduce_sum<std::int64_t>(t, b, i64.data(), shifted(i64.data() + 8, 4), 0,
                                                     nullptr);
              }),
              "out", aligned));  // the output is written even for count 0
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::reduce_max_abs<float>(t, b, shifted(kf.data(), 1), kf_out.data(), 8, nullptr);
              }),
              "in", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_reduce_sum<std::int64_t>(t, b, i64.data(), i64.data() + 8, 2,
                                                               shifted(off.data(), 4), nullptr);
              }),
              "offsets", aligned));
  // Selections, the int64 outputs and per-segment inputs included.
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::select_flagged<std::int32_t>(t, b, vi.data(), keep.data(), vi_out.data(),
                                                         shifted(i64.data(), 4), 8, nullptr);
              }),
              "num_selected", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::select_less_than<float, std::int32_t>(t, b, shifted(kf.data(), 2), 8, 2.0f,
                                                                  vi_out.data(), i64.data(), nullptr);
              }),
              "keys", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::lowest_k_mask<unsigned>(t, b, shifted(ku.data(), 2), 8, 3, keep.data(), nullptr);
              }),
              "keys", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_lowest_k_mask<float>(t, b, kf.data(), 8, 2, off.data(),
                                                           shifted(ks.data(), 4), keep.data(), nullptr);
              }),
              "ks", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_kth_value<float>(t, b, kf.data(), 8, 2, shifted(off.data(), 4), 1,
                                                       kf_out.data(), nullptr);
              }),
              "offsets", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::kth_value<float>(t, b, kf.data(), 8, 1, shifted(kf_out.data(), 2), nullptr);
              }),
              "out", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_select_less_than<float, std::int32_t>(
                    t, b, kf.data(), 8, 2, off.data(), shifted(thr.data(), 2), vi_out.data(), i64.data(),
                    i64.data() + 8, nullptr);
              }),
              "thresholds", aligned));
  CHECK(names(with_temp([&](void* t, std::size_t* b) {
                return dev::segmented_select_less_than<float, std::int32_t>(
                    t, b, kf.data(), 8, 2, off.data(), thr.data(), vi_out.data(), i64.data(),
                    shifted(i64.data() + 8, 4), nullptr);
              }),
              "segment_counts", aligned));
}

TEST_CASE("device algorithms: the ragged rank-based forms bound segments below 2^32 (32-bit segment ids)") {
  // Checked first, on the size query, before anything is allocated: a huge segment count needs no memory.
  llmk::DeviceBuffer<float> k(8), out(1);
  std::size_t bytes = 0;
  const std::int64_t two32 = std::int64_t{1} << 32;
  for (const std::int64_t segments : {two32, two32 + 1}) {
    CHECK(names(dev::segmented_lowest_k_mask<float>(nullptr, &bytes, k.data(), 8, segments, nullptr, nullptr,
                                                    nullptr, nullptr),
                "segments", "2^32"));
    CHECK(names(dev::segmented_kth_value<float>(nullptr, &bytes, k.data(), 8, segments, nullptr, 1,
                                                out.data(), nullptr),
                "segments", "2^32"));
  }
  CHECK(dev::segmented_lowest_k_mask<float>(nullptr, &bytes, k.data(), 8, two32 - 1, nullptr, nullptr,
                                            nullptr, nullptr)
            .ok());
  CHECK(dev::segmented_kth_value<float>(nullptr, &bytes, k.data(), 8, two32 - 1, nullptr, 1, out.data(),
                                        nullptr)
            .ok());
}

TEST_CASE("device algorithms: a SortOrder that is not an enumerator is named 'order'") {
  llmk::DeviceBuffer<unsigned> k(8);
  llmk::DeviceBuffer<std::int32_t> v(8);
  llmk::DeviceBuffer<std::int64_t> off(std::vector<std::int64_t>{0, 8});
  std::size_t bytes = 0;
  for (const int raw : {2, -1, 255}) {
    const auto order = static_cast<dev::SortOrder>(raw);
    CHECK(names(dev::sort_keys<unsigned>(nullptr, &bytes, k.data(), k.data(), 8, order, nullptr), "order",
                "SortOrder"));
    CHECK(names(dev::sort_pairs<unsigned, std::int32_t>(nullptr, &bytes, k.data(), k.data(), v.data(),
                                                        v.data(), 8, order, nullptr),
                "order", "SortOrder"));
    CHECK(names(dev::segmented_sort_keys<unsigned>(nullptr, &bytes, k.data(), k.data(), 8, 1, off.data(),
                                                   order, nullptr),
                "order", "SortOrder"));
    CHECK(
        names(dev::segmented_sort_pairs<unsigned, std::int32_t>(nullptr, &bytes, k.data(), k.data(), v.data(),
                                                                v.data(), 8, 1, off.data(), order, nullptr),
              "order", "SortOrder"));
  }
  CHECK(dev::sort_keys<unsigned>(nullptr, &bytes, k.data(), k.data(), 8, dev::SortOrder::kDescending, nullptr)
            .ok());
}

TEST_CASE("float sort keys with NaN: a positive NaN after +Inf, a negative one before -Inf (CUB's order)") {
  // device_algorithms.cuh: floats sort as CUB's radix sort orders them, in both builds. Reference: NaNs by
  // sign at the ends, the rest by value (-0.0 == +0.0); stable, compared bit for bit.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto rank = [](float v) { return std::isnan(v) ? (std::signbit(v) ? 0 : 2) : 1; };
  auto less = [&](float a, float b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : (rank(a) == 1 && a < b);
  };
  std::vector<float> keys = full_range_keys<float>(301, 77, 3);
  for (std::size_t i = 0; i < keys.size(); i += 7) keys[i] = (i / 7) % 2 == 0 ? nan : -nan;
  const std::int64_t n = static_cast<std::int64_t>(keys.size());
  std::vector<std::int32_t> vals(keys.size());
  std::iota(vals.begin(), vals.end(), 0);
  const std::vector<std::int64_t> offsets = {0, 100, 100, n};
  for (const auto order : {dev::SortOrder::kAscending, dev::SortOrder::kDescending}) {
    auto before = [&](float a, float b) {
      return order == dev::SortOrder::kAscending ? less(a, b) : less(b, a);
    };
    std::vector<std::int32_t> want = vals;
    std::stable_sort(want.begin(), want.end(), [&](std::int32_t a, std::int32_t b) {
      return before(keys[static_cast<std::size_t>(a)], keys[static_cast<std::size_t>(b)]);
    });
    std::vector<float> want_seg = keys;
    for (std::size_t s = 0; s + 1 < offsets.size(); ++s)
      std::stable_sort(want_seg.begin() + offsets[s], want_seg.begin() + offsets[s + 1], before);
    llmk::DeviceBuffer<float> dk(keys), dk_out(keys.size()), dkeys_out(keys.size()), dseg_out(keys.size());
    llmk::DeviceBuffer<std::int32_t> dv(vals), dv_out(vals.size());
    llmk::DeviceBuffer<std::int64_t> doff(offsets);
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::sort_pairs<float, std::int32_t>(t, b, dk.data(), dk_out.data(), dv.data(),
                                                          dv_out.data(), n, order, nullptr);
            }).ok());
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::sort_keys<float>(t, b, dk.data(), dkeys_out.data(), n, order, nullptr);
            }).ok());
    REQUIRE(with_temp([&](void* t, std::size_t* b) {
              return dev::segmented_sort_keys<float>(t, b, dk.data(), dseg_out.data(), n, 3, doff.data(),
                                                     order, nullptr);
            }).ok());
    const std::vector<std::int32_t> got_v = dv_out.to_host();
    const std::vector<float> got_k = dk_out.to_host(), got_keys = dkeys_out.to_host(),
                             got_seg = dseg_out.to_host();
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const float w = keys[static_cast<std::size_t>(want[i])];
      bad += got_v[i] != want[i] || !same_bits(got_k[i], w) || !same_bits(got_keys[i], w) ||
             !same_bits(got_seg[i], want_seg[i]);
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("segmented_at_or_below_kth_mask: every key at or below the rank-k key of its segment (ties too)") {
  // The reference codes' threshold rule (PruneCount::kThreshold): prune every score <= sorted[k]. Few
  // distinct keys, so the rank-k key has ties on both sides of it; k past the end is clamped to the last key.
  for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{4}})
    for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{53}})
      for (const std::int64_t k : {std::int64_t{-1}, std::int64_t{0}, cols / 2, cols - 1, cols + 3}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(k);
        std::vector<unsigned> keys(static_cast<std::size_t>(rows * cols));
        std::mt19937 rng(static_cast<std::uint32_t>(rows * 17 + cols * 3 + k + 5));
        std::uniform_int_distribution<int> few(0, 6);
        for (auto& v : keys) v = 0x80000000u + static_cast<unsigned>(few(rng)) * 0x01000001u;
        llmk::DeviceBuffer<unsigned> dk(keys);
        llmk::DeviceBuffer<std::uint8_t> keep(keys.size());
        keep.poison();
        REQUIRE(with_temp([&](void* t, std::size_t* b) {
                  return dev::segmented_at_or_below_kth_mask<unsigned>(t, b, dk.data(), rows, cols, k,
                                                                       keep.data(), nullptr);
                }).ok());
        const std::vector<std::uint8_t> m = keep.to_host();
        const std::int64_t rank = std::clamp<std::int64_t>(k, 0, cols - 1);
        std::int64_t bad = 0, pruned = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
          std::vector<unsigned> sorted(keys.begin() + r * cols, keys.begin() + (r + 1) * cols);
          std::sort(sorted.begin(), sorted.end());
          const unsigned threshold = sorted[static_cast<std::size_t>(rank)];
          for (std::int64_t t = 0; t < cols; ++t) {
            const bool prune = keys[static_cast<std::size_t>(r * cols + t)] <= threshold;
            pruned += prune;
            bad += m[static_cast<std::size_t>(r * cols + t)] != (prune ? 0 : 1);
          }
        }
        CHECK(bad == 0);
        CHECK(pruned >= rows * (rank + 1));
      }
  // One segment (at_or_below_kth_mask), float keys with -0.0 and +0.0 equal: both pruned with the rank's 0.
  const std::vector<float> f = {3.0f, -0.0f, 1.0f, 0.0f, -2.0f, 0.0f, 5.0f};
  llmk::DeviceBuffer<float> df(f);
  llmk::DeviceBuffer<std::uint8_t> fk(f.size());
  fk.poison();
  REQUIRE(with_temp([&](void* t, std::size_t* b) {
            return dev::at_or_below_kth_mask<float>(t, b, df.data(), 7, 1, fk.data(), nullptr);
          }).ok());
  CHECK(fk.to_host() == std::vector<std::uint8_t>{1, 0, 1, 0, 0, 0, 1});  // sorted[1] is a zero
  // The size query is segmented_lowest_k_mask's; the argument rules too.
  std::size_t a = 0, b = 0;
  REQUIRE(dev::segmented_lowest_k_mask<unsigned>(nullptr, &a, nullptr, 3, 40, 1, nullptr, nullptr).ok());
  REQUIRE(
      dev::segmented_at_or_below_kth_mask<unsigned>(nullptr, &b, nullptr, 3, 40, 1, nullptr, nullptr).ok());
  CHECK(a == b);
  const llmk::Status neg =
      dev::segmented_at_or_below_kth_mask<unsigned>(nullptr, &b, nullptr, -1, 4, 1, nullptr, nullptr);
  CHECK(neg.message().find("'segments'") != std::string::npos);
}

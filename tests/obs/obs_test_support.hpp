// What the OBS tests share: the synthetic layer (correlated inputs with planted outlier channels, as in LLM
// activations), the output / trace errors, bit comparisons, and for the GPU-path tests the backend of the
// build and the damping / timing report checks.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/obs.hpp"

#if !defined(LLMK_SIM) && defined(LLMK_CUDA)
#include "llmk/obs/linalg_cuda.cuh"
#endif

namespace llmk::test::obs {

/// How the synthetic inputs are made: x = sum_r f_r mix_r + noise N(0, noise^2), with channel i multiplied by
/// outlier_gain when i % outlier_every == outlier_at (0 = every k / 3 columns at offset 1), dead channels 0.
struct LayerSpec {
  int rank = 4;
  float noise = 0.3f;
  std::int64_t outlier_every = 0;
  std::int64_t outlier_at = 1;
  float outlier_gain = 20.0f;
  std::int64_t ldw_pad = 0, ldh_pad = 0;  // paddings hold NaN: a path that reads them fails
  std::vector<std::int64_t> dead;
};

/// W [n, ldw] ~ N(0, 0.1^2), X [samples, k], H [k, ldh] = (2 / samples) X^T X (fp64 host accumulation).
struct Layer {
  std::int64_t n, k, samples, ldw, ldh;
  std::vector<float> w, x, h;
};

inline Layer make_layer(std::int64_t n, std::int64_t k, std::int64_t samples, std::uint32_t seed,
                        const LayerSpec& spec = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Layer l{n, k, samples, k + spec.ldw_pad, k + spec.ldh_pad, {}, {}, {}};
  l.w.resize(static_cast<std::size_t>(n * l.ldw));
  for (std::int64_t i = 0; i < n * l.ldw; ++i)
    l.w[static_cast<std::size_t>(i)] = i % l.ldw < k ? nd(rng) * 0.1f : std::nanf("");
  l.x.resize(static_cast<std::size_t>(samples * k));
  std::vector<float> mix(static_cast<std::size_t>(spec.rank * k)), f(static_cast<std::size_t>(spec.rank));
  for (float& v : mix) v = nd(rng);
  const std::int64_t every = spec.outlier_every > 0 ? spec.outlier_every : std::max<std::int64_t>(1, k / 3);
  for (std::int64_t s = 0; s < samples; ++s) {
    for (float& v : f) v = nd(rng);
    for (std::int64_t i = 0; i < k; ++i) {
      float v = spec.noise * nd(rng);
      for (int r = 0; r < spec.rank; ++r)
        v += f[static_cast<std::size_t>(r)] * mix[static_cast<std::size_t>(r * k + i)];
      if (i % every == spec.outlier_at) v *= spec.outlier_gain;
      if (std::find(spec.dead.begin(), spec.dead.end(), i) != spec.dead.end()) v = 0.0f;
      l.x[static_cast<std::size_t>(s * k + i)] = v;
    }
  }
  llmk::obs::HessianAccumulator acc(k);
  REQUIRE(acc.add_batch(l.x.data(), samples, k).ok());
  l.h.assign(static_cast<std::size_t>(k * l.ldh), std::nanf(""));
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < k; ++j)
      l.h[static_cast<std::size_t>(i * l.ldh + j)] = acc.hessian()[static_cast<std::size_t>(i * k + j)];
  return l;
}

/// ||W X^T - Q X^T||_F^2 over the samples (fp64); q dense [n, k].
inline double output_error(const Layer& l, const std::vector<float>& q) {
  double e = 0.0;
  for (std::int64_t s = 0; s < l.samples; ++s)
    for (std::int64_t r = 0; r < l.n; ++r) {
      double d = 0.0;
      for (std::int64_t i = 0; i < l.k; ++i)
        d += (static_cast<double>(l.w[static_cast<std::size_t>(r * l.ldw + i)]) -
              q[static_cast<std::size_t>(r * l.k + i)]) *
             l.x[static_cast<std::size_t>(s * l.k + i)];
      e += d * d;
    }
  return e;
}

/// 1/2 tr((W - Q) H (W - Q)^T) in fp64; all dense with leading dimension k.
inline double trace_loss(const std::vector<float>& w, const std::vector<float>& q,
                         const std::vector<float>& h, std::int64_t n, std::int64_t k) {
  double t = 0.0;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t j = 0; j < k; ++j)
        t += (static_cast<double>(w[static_cast<std::size_t>(r * k + i)]) -
              q[static_cast<std::size_t>(r * k + i)]) *
             h[static_cast<std::size_t>(i * k + j)] *
             (static_cast<double>(w[static_cast<std::size_t>(r * k + j)]) -
              q[static_cast<std::size_t>(r * k + j)]);
  return 0.5 * t;
}

/// The Status is an error naming argument `arg`.
inline bool has(const llmk::Status& s, const char* arg) {
  return !s.ok() && s.message().find(std::string("'") + arg + "'") != std::string::npos;
}

/// The Status is an invalid_argument naming `arg` with `rule` in its message.
inline bool rejects(const llmk::Status& s, const char* arg, const char* rule) {
  return s.code() == llmk::Status::Code::kInvalidArgument && has(s, arg) &&
         s.message().find(rule) != std::string::npos;
}

/// p moved by `bytes` (a misaligned pointer into the same allocation).
template <class T>
T* shifted(T* p, std::ptrdiff_t bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(p) + bytes);
}

inline bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

inline bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The device buffers' poison (all bits set).
inline bool is_poison(float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits == 0xFFFFFFFFu;
}

inline void check_rel(double got, double want, double rel) {
  CHECK(std::fabs(got - want) <= rel * std::fabs(want) + 1e-30);
}

// ---- the GPU-path tests

/// The backend of the GPU paths: LAPACK on simulated device memory (results equal the host's bit for bit),
/// cuSOLVER / cuBLAS on a GPU (fp32 tolerances).
#if defined(LLMK_SIM)
using DeviceBackend = llmk::obs::HostLapackBackend;
inline constexpr bool kExact = true;
#elif defined(LLMK_CUDA)
using DeviceBackend = llmk::obs::CudaLinalgBackend;
inline constexpr bool kExact = false;
#endif

inline void check_damping(const llmk::obs::DampingReport& got, const llmk::obs::DampingReport& want,
                          bool exact) {
  CHECK(got.dead_columns == want.dead_columns);
  CHECK(got.retries == want.retries);
  if (exact)
    CHECK(got.failed_pivot == want.failed_pivot);
  else  // cuSOLVER may break at another pivot of the same singular matrix
    CHECK((got.failed_pivot == 0) == (want.failed_pivot == 0));
  CHECK(got.percdamp == want.percdamp);
  CHECK(got.damp == want.damp);
}

// The GPU entries' phases: prepare, inverse, column loop and loss always run (each launches and waits for
// work, so each takes time: a phase never timed stays 0); the trailing updates only with several blocks.
inline void check_timings(const llmk::obs::ObsTimings& t) {
  CHECK(t.prepare_s > 0.0);
  CHECK(t.inverse_s > 0.0);
  CHECK(t.column_loop_s > 0.0);
  CHECK(t.trailing_s >= 0.0);
  CHECK(t.loss_s > 0.0);
}

}  // namespace llmk::test::obs

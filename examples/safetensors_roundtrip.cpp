// A GPTQ checkpoint through a safetensors file and back into the weight-only GEMM (docs/gemm.md, "Importing
// GPTQ and AWQ checkpoints"):
//   1. a quantized layer in llmk's format (llmk::obs::QuantizedLayer: 4-bit, group 32, act-order, zero
//   points;
//      random here, what llmk::obs::gptq_quantize returns in practice),
//   2. export_gptq_host -> qweight / qzeros / scales / g_idx in the GPTQ v1 layout ("checkpoint_format":
//   "gptq"),
//   3. write them to a safetensors file: 8-byte little-endian header length, a JSON header
//      {"<name>": {"dtype": "I32", "shape": [...], "data_offsets": [begin, end]}, ...}, then the raw
//      little-endian data (offsets relative to the end of the header),
//   4. read the file back with a minimal reader, import_checkpoint_host, and
//   5. run weight_only_gemm (here in the CPU simulator: this example is built as safetensors_roundtrip_sim)
//   and
//      compare D with the host reference computed from the original layer.
//
//   safetensors_roundtrip [path]     (default: safetensors_roundtrip.safetensors in the working directory)
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/checkpoint.cuh"
#include "llmk/gemm/weight_only.cuh"
#include "llmk/reference/weight_only.hpp"

namespace {

static_assert(sizeof(std::int32_t) == 4 && sizeof(llmk::half) == 2);

// ---- writing ----

struct TensorOut {
  std::string name, dtype;  // "I32" or "F16"
  std::vector<std::int64_t> shape;
  const void* data;
  std::size_t bytes;
};

void put_u64_le(std::string& s, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Host byte order is little-endian on every platform llmk supports (x86-64, aarch64), as safetensors
// requires.
bool write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::uint64_t offset = 0;
  for (const TensorOut& t : tensors) {
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';  // the data starts 8-byte aligned
  std::string file;
  put_u64_le(file, header.size());
  file += header;
  for (const TensorOut& t : tensors) file.append(static_cast<const char*>(t.data), t.bytes);
  std::ofstream out(path, std::ios::binary);
  out.write(file.data(), static_cast<std::streamsize>(file.size()));
  return static_cast<bool>(out);
}

// ---- reading: the subset of JSON a safetensors header uses ----

struct TensorIn {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

class HeaderParser {
 public:
  explicit HeaderParser(const std::string& s) : s_(s) {}

  // {"name": {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, "__metadata__": {...}}
  bool parse(std::map<std::string, TensorIn>* out) {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    do {
      std::string name;
      if (!string(&name) || !eat(':')) return false;
      if (name == "__metadata__") {
        if (!skip_string_map()) return false;
        continue;
      }
      TensorIn t;
      if (!tensor(&t)) return false;
      (*out)[name] = t;
    } while (eat(','));
    return eat('}');
  }

 private:
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool string(std::string* v) {
    if (!eat('"')) return false;
    v->clear();
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;  // \" and \\ (names here have no other escapes)
      v->push_back(s_[i_++]);
    }
    return i_++ < s_.size();
  }
  bool integer(std::uint64_t* v) {
    ws();
    const std::size_t start = i_;
    *v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])))
      *v = *v * 10 + static_cast<std::uint64_t>(s_[i_++] - '0');
    return i_ > start;
  }
  bool int_array(std::vector<std::uint64_t>* v) {
    if (!eat('[')) return false;
    v->clear();
    if (eat(']')) return true;
    do {
      std::uint64_t x;
      if (!integer(&x)) return false;
      v->push_back(x);
    } while (eat(','));
    return eat(']');
  }
  bool skip_string_map() {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    do {
      std::string k, v;
      if (!string(&k) || !eat(':') || !string(&v)) return false;
    } while (eat(','));
    return eat('}');
  }
  bool tensor(TensorIn* t) {
    if (!eat('{')) return false;
    do {
      std::string key;
      if (!string(&key) || !eat(':')) return false;
      std::vector<std::uint64_t> a;
      if (key == "dtype") {
        if (!string(&t->dtype)) return false;
      } else if (key == "shape") {
        if (!int_array(&a)) return false;
        t->shape.assign(a.begin(), a.end());
      } else if (key == "data_offsets") {
        if (!int_array(&a) || a.size() != 2) return false;
        t->begin = a[0];
        t->end = a[1];
      } else {
        return false;
      }
    } while (eat(','));
    return eat('}');
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

struct SafetensorsFile {
  std::map<std::string, TensorIn> tensors;
  std::string data;  // the byte buffer after the header

  // A tensor's elements as T, checking dtype, shape and size.
  template <class T>
  bool get(const std::string& name, const char* dtype, const std::vector<std::int64_t>& shape,
           std::vector<T>* out) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) return std::fprintf(stderr, "missing tensor %s\n", name.c_str()), false;
    const TensorIn& t = it->second;
    std::int64_t count = 1;
    for (std::int64_t d : t.shape) count *= d;
    if (t.dtype != dtype || t.shape != shape || t.end < t.begin || t.end > data.size() ||
        t.end - t.begin != static_cast<std::uint64_t>(count) * sizeof(T))
      return std::fprintf(stderr, "tensor %s: unexpected dtype, shape or offsets\n", name.c_str()), false;
    out->resize(static_cast<std::size_t>(count));
    std::memcpy(static_cast<void*>(out->data()), data.data() + t.begin, t.end - t.begin);
    return true;
  }
};

bool read_safetensors(const std::string& path, SafetensorsFile* f) {
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < 8) return false;
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(file[i])) << (8 * i);
  if (n > file.size() - 8) return false;
  const std::string header = file.substr(8, n);
  f->data = file.substr(8 + n);
  return HeaderParser(header).parse(&f->tensors);
}

int fail(const char* what, const llmk::Status& s = {}) {
  std::fprintf(stderr, "FAILED: %s %s\n", what, s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "safetensors_roundtrip.safetensors";
  const int n = 48, k = 256, group = 32, bits = 4, m = 5;
  const std::string prefix = "model.layers.0.mlp.down_proj.";
  std::mt19937 rng(11);

  // 1. A quantized layer in llmk's format, with act-order (g_idx a shuffle of k / G).
  llmk::obs::QuantizedLayer q;
  q.rows = n;
  q.cols = k;
  q.bits = bits;
  q.symmetric = false;
  q.group_size = group;
  q.groups = k / group;
  std::uniform_int_distribution<int> code(0, 15), zero(1, 15);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  for (int i = 0; i < n * k; ++i) q.codes.push_back(static_cast<std::uint8_t>(code(rng)));
  for (int i = 0; i < (k / group) * n; ++i) {
    q.scales.push_back(scale(rng));
    q.zeros.push_back(static_cast<std::uint8_t>(zero(rng)));
  }
  for (int i = 0; i < k; ++i) q.g_idx.push_back(i / group);
  std::shuffle(q.g_idx.begin(), q.g_idx.end(), rng);

  // 2. GPTQ v1 tensors.
  llmk::gemm::GptqCheckpoint ck;
  if (llmk::Status s = llmk::gemm::export_gptq_host(q, llmk::gemm::GptqExportFormat::kV1, &ck); !s.ok())
    return fail("export_gptq_host", s);

  // 3. The safetensors file (quantize_config.json would say {"bits": 4, "group_size": 32, "desc_act": true,
  //    "sym": false, "checkpoint_format": "gptq"}).
  const std::int64_t groups = k / group;
  const std::vector<TensorOut> out = {
      {prefix + "qweight", "I32", {k * bits / 32, n}, ck.qweight.data(), ck.qweight.size() * 4},
      {prefix + "qzeros", "I32", {groups, n * bits / 32}, ck.qzeros.data(), ck.qzeros.size() * 4},
      {prefix + "scales", "F16", {groups, n}, ck.scales.data(), ck.scales.size() * 2},
      {prefix + "g_idx", "I32", {k}, ck.g_idx.data(), ck.g_idx.size() * 4}};
  if (!write_safetensors(path, out)) return fail("writing the safetensors file");

  // 4. Read it back and import.
  SafetensorsFile f;
  if (!read_safetensors(path, &f)) return fail("reading the safetensors file");
  std::vector<std::int32_t> qweight, qzeros, g_idx;
  std::vector<llmk::half> scales;
  if (!f.get(prefix + "qweight", "I32", {k * bits / 32, n}, &qweight) ||
      !f.get(prefix + "qzeros", "I32", {groups, n * bits / 32}, &qzeros) ||
      !f.get(prefix + "scales", "F16", {groups, n}, &scales) || !f.get(prefix + "g_idx", "I32", {k}, &g_idx))
    return fail("reading the tensors");
  llmk::gemm::CheckpointTensors src;
  src.format = llmk::gemm::CheckpointFormat::kGptqV1;  // checkpoint_format "gptq"
  src.qweight = qweight.data();
  src.qzeros = qzeros.data();
  src.scales = scales.data();
  src.g_idx = g_idx.data();
  src.n = n;
  src.k = k;
  src.bits = bits;
  src.group_size = group;
  std::vector<std::uint8_t> w(llmk::gemm::weight_only_packed_bytes(n, k, bits)), zeros(groups * n);
  std::vector<llmk::half> sc(groups * n);
  std::vector<std::int32_t> perm(k);
  llmk::gemm::CheckpointImportInfo info;
  if (llmk::Status s = llmk::gemm::import_checkpoint_host(
          src, llmk::gemm::CheckpointImportOutput<llmk::half>{w.data(), sc.data(), zeros.data(), perm.data()},
          &info);
      !s.ok())
    return fail("import_checkpoint_host", s);
  std::printf("imported %s: N=%d K=%d, %d-bit, group %d, zero points %s, act-order %s\n", path.c_str(), n, k,
              bits, group, info.zeros ? "yes" : "no", info.act_order ? "yes" : "no");

  // 5. The GEMM on the imported weights (the device is the simulator here) against the host reference
  // computed
  //    from the original layer (scales rounded to fp16 as the checkpoint stores them).
  std::uniform_real_distribution<float> ad(-1.0f, 1.0f);
  std::vector<llmk::half> a(static_cast<std::size_t>(m) * k);
  for (auto& v : a) v = llmk::half(ad(rng));
  llmk::DeviceBuffer<llmk::half> d_a(a), d_sc(sc), d_out(static_cast<std::size_t>(m) * n);
  llmk::DeviceBuffer<std::uint8_t> d_w(w), d_zeros(zeros);
  llmk::DeviceBuffer<std::int32_t> d_perm(perm);
  llmk::gemm::CheckpointImportOutput<llmk::half> on_device{d_w.data(), d_sc.data(), d_zeros.data(),
                                                           d_perm.data()};
  llmk::gemm::WeightOnlyArgs<llmk::half> x = llmk::gemm::checkpoint_gemm_args(src, on_device, info);
  x.a = d_a.data();
  x.lda = k;
  x.d = d_out.data();
  x.ldd = n;
  x.m = m;
  llmk::DeviceBuffer<std::uint8_t> ws(std::max<std::size_t>(llmk::gemm::weight_only_workspace_bytes(x), 16));
  if (llmk::Status s =
          llmk::gemm::weight_only_gemm(x, ws.data(), llmk::gemm::weight_only_workspace_bytes(x), nullptr);
      !s.ok())
    return fail("weight_only_gemm", s);
  if (llmk::Status s = llmk::device_synchronize(); !s.ok()) return fail("device_synchronize", s);
  const std::vector<llmk::half> got = d_out.to_host();

  std::vector<std::uint8_t> plain;
  if (llmk::Status s = llmk::obs::pack_plain_codes(q, &plain); !s.ok()) return fail("pack_plain_codes", s);
  std::vector<llmk::half> s16(q.scales.size());
  for (std::size_t i = 0; i < s16.size(); ++i) s16[i] = llmk::half(q.scales[i]);
  std::vector<double> want(static_cast<std::size_t>(m) * n), mag(want.size());
  llmk::reference::weight_only_gemm(a.data(), k, plain.data(), k / 2, bits, s16.data(), q.zeros.data(),
                                    q.g_idx.data(), group, static_cast<const llmk::half*>(nullptr), m, n, k,
                                    want.data(), mag.data());
  // Tolerance of tests/gemm/weight_only.cu: fp32 accumulation (K / 16 + 6 roundings of sum |a w|, doubled)
  // and the final rounding to fp16.
  double worst = 0.0;
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i].to_float()) - want[i]);
    const double tol =
        0x1p-11 * std::fabs(want[i]) + 2.0 * (k / 16 + 6) * std::ldexp(mag[i], -24) * (1 + 0x1p-11) + 0x1p-24;
    worst = std::max(worst, err / tol);
    bad += !(err <= tol);
  }
  std::printf(
      "weight_only_gemm vs host reference: %d / %zu outside the tolerance (worst error / tolerance %.3f)\n",
      bad, want.size(), worst);
  if (bad != 0) return fail("the GEMM on the imported checkpoint does not match the layer");
  std::printf("OK\n");
  return 0;
}

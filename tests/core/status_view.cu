// Tests for llmk/core/status.cuh, tensor_view.cuh and vector.cuh.
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/core/vector.cuh"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#if defined(LLMK_SIM) || defined(__CUDACC__)
#define LLMK_TEST_HAVE_KERNELS 1
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/numeric.cuh"
#endif

namespace {

llmk::Status check_leading_dimension(int64_t lda, int64_t k) {
  if (lda < k) {
    return llmk::Status::invalid_argument("lda", llmk::str_cat("must be >= K (K=", k, ", lda=", lda, ")"));
  }
  return {};
}

// Counts how far it got, to show LLMK_RETURN_IF_ERROR stops at the first failure.
llmk::Status validate_both(int64_t lda, int64_t ldb, int64_t k, int& checks_passed) {
  checks_passed = 0;
  LLMK_RETURN_IF_ERROR(check_leading_dimension(lda, k));
  ++checks_passed;
  LLMK_RETURN_IF_ERROR(check_leading_dimension(ldb, k));
  ++checks_passed;
  return {};
}

}  // namespace

TEST_CASE("Status: codes and messages name the argument and the rule") {
  const llmk::Status ok;
  CHECK(ok.ok());
  CHECK(ok.code() == llmk::Status::Code::kOk);
  CHECK(ok.message().empty());

  const llmk::Status bad = check_leading_dimension(100, 200);
  CHECK_FALSE(bad.ok());
  CHECK(bad.code() == llmk::Status::Code::kInvalidArgument);
  CHECK(bad.message() == "invalid argument 'lda': must be >= K (K=200, lda=100)");

  CHECK(llmk::Status::unsupported("head_dim=96").message() == "unsupported: head_dim=96");
  CHECK(llmk::Status::unsupported("x").code() == llmk::Status::Code::kUnsupported);
  CHECK(llmk::Status::out_of_memory("workspace of 8 bytes").code() == llmk::Status::Code::kOutOfMemory);
  CHECK(llmk::Status::cuda_error("cudaMemcpy", "invalid argument").message() ==
        "CUDA error in cudaMemcpy: invalid argument");
  CHECK(llmk::Status::simulator_error("deadlock").code() == llmk::Status::Code::kSimulatorError);
  CHECK(llmk::Status::internal("tile mismatch").message() == "internal error: tile mismatch");
  CHECK(std::string(llmk::to_string(llmk::Status::Code::kCudaError)) == "kCudaError");
  CHECK(llmk::str_cat("a", 1, ' ', 2.5, "b") == "a1 2.5b");
  CHECK(llmk::str_cat() == "");
}

TEST_CASE("LLMK_RETURN_IF_ERROR and throw_if_error") {
  int checks_passed = -1;
  CHECK(validate_both(300, 300, 200, checks_passed).ok());
  CHECK(checks_passed == 2);
  const llmk::Status failed = validate_both(300, 10, 200, checks_passed);
  CHECK(checks_passed == 1);
  CHECK(failed.message() == "invalid argument 'lda': must be >= K (K=200, lda=10)");

  CHECK_NOTHROW(llmk::throw_if_error(llmk::Status{}));
  try {
    llmk::throw_if_error(failed);
    FAIL("throw_if_error did not throw");
  } catch (const llmk::Error& error) {
    CHECK(std::string(error.what()) == failed.message());
    CHECK(error.status().code() == llmk::Status::Code::kInvalidArgument);
  }
  static_assert(std::is_base_of_v<std::exception, llmk::Error>);
}

TEST_CASE("TensorView: 64-bit offsets and strides beyond 2^31 elements") {
  // A fake base pointer: only offsets are computed, nothing is dereferenced.
  llmk::TensorView<const float, 3> view{reinterpret_cast<const float*>(uintptr_t(0x1000)),
                                        {4, 100000, 70000},
                                        {int64_t(7'000'000'000), 70000, 1}};
  CHECK(view.offset(0, 0, 0) == 0);
  CHECK(view.offset(3, 99999, 69999) == 3 * int64_t(7'000'000'000) + 99999 * int64_t(70000) + 69999);
  CHECK(view.offset(1, 2, 3) == int64_t(7'000'000'000) + 140003);
  CHECK(view.offset(0, 99999, 0) == int64_t(6'999'930'000));  // the int32 product would overflow
  CHECK(view.numel() == int64_t(4) * 100000 * 70000);
  CHECK(view.extent(1) == 100000);
  CHECK(view.stride_of(0) == int64_t(7'000'000'000));
  CHECK(view.offset(int64_t(2), 5u, short(1)) == 2 * int64_t(7'000'000'000) + 5 * 70000 + 1);

  float storage[2 * 3 * 4];
  std::iota(std::begin(storage), std::end(storage), 0.0f);
  const auto dense = llmk::make_row_major(storage, 2, 3, 4);
  static_assert(std::is_same_v<std::remove_const_t<decltype(dense)>, llmk::TensorView<float, 3>>);
  CHECK(dense.stride == std::array<int64_t, 3>{12, 4, 1});
  CHECK(dense.shape == std::array<int64_t, 3>{2, 3, 4});
  CHECK(dense(1, 2, 3) == 23.0f);
  dense(0, 1, 0) = -1.0f;
  CHECK(storage[4] == -1.0f);
  const llmk::TensorView<const float, 3> read_only = dense;  // T -> const T
  CHECK(read_only(0, 1, 0) == -1.0f);
  const auto from_array = llmk::make_row_major(storage, std::array<int64_t, 2>{6, 4});
  CHECK(from_array.stride == std::array<int64_t, 2>{4, 1});
  CHECK(&from_array(5, 3) == &storage[23]);
}

TEST_CASE("TensorView validation messages") {
  alignas(16) uint16_t buffer[64] = {};
  const llmk::TensorView<uint16_t, 2> null_view{nullptr, {4, 8}, {8, 1}};
  CHECK(null_view.check_not_null("a").message() == "invalid argument 'a': data must not be null");

  const llmk::TensorView<uint16_t, 2> a{buffer, {4, 8}, {8, 1}};
  constexpr int64_t kAny = llmk::TensorView<uint16_t, 2>::kAnyExtent;
  CHECK(a.check_not_null("a").ok());
  CHECK(a.check_shape("a", {4, 8}).ok());
  CHECK(a.check_shape("a", {4, kAny}).ok());
  CHECK(a.check_shape("a", {4, 7}).message() == "invalid argument 'a': shape must be [4, 7] (got [4, 8])");
  CHECK(a.check_shape("a", {kAny, 9}).message() == "invalid argument 'a': shape must be [*, 9] (got [4, 8])");
  CHECK(a.check_contiguous_last_dim("a").ok());
  CHECK(a.check_row_major("a").ok());
  CHECK(a.check_non_negative("a").ok());
  CHECK(a.check_aligned("a", 16).ok());  // 8 halves per row = 16 bytes

  const llmk::TensorView<uint16_t, 2> transposed{buffer, {8, 4}, {1, 8}};
  CHECK(transposed.check_contiguous_last_dim("b").message() ==
        "invalid argument 'b': last dimension must be contiguous (stride[1] must be 1, got 8)");
  CHECK(transposed.check_row_major("b").message() ==
        "invalid argument 'b': must be packed row-major (stride[1] must be 1, got 8)");

  const llmk::TensorView<uint16_t, 2> padded{buffer, {4, 6}, {7, 1}};
  CHECK(padded.check_row_major("c").message() ==
        "invalid argument 'c': must be packed row-major (stride[0] must be 6, got 7)");
  CHECK(padded.check_aligned("c", 16).message() ==
        "invalid argument 'c': stride[0] (7 elements of 2 bytes) must be a multiple of 16 bytes");
  CHECK(padded.check_aligned("c", 2).ok());

  const llmk::TensorView<uint16_t, 2> offset_start{buffer + 1, {4, 8}, {8, 1}};
  const llmk::Status misaligned = offset_start.check_aligned("d", 16);
  CHECK(misaligned.code() == llmk::Status::Code::kInvalidArgument);
  CHECK(misaligned.message().rfind("invalid argument 'd': data pointer must be 16-byte aligned", 0) == 0);

  const llmk::TensorView<uint16_t, 1> negative{buffer, {4}, {-1}};
  CHECK(negative.check_non_negative("e").message() ==
        "invalid argument 'e': extents and strides must be >= 0 (shape=[4], stride=[-1])");
}

TEST_CASE("vector loads and stores on the host") {
  alignas(16) int32_t source[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  alignas(16) int32_t destination[8] = {};
  const llmk::Vector16<int32_t> first = llmk::load16(source);
  static_assert(sizeof(first) == 16 && alignof(llmk::Vector16<int32_t>) == 16 && first.kSize == 4);
  CHECK(first.elements[3] == 4);
  llmk::store16(destination + 4, first);
  CHECK(destination[4] == 1);
  CHECK(destination[7] == 4);
  const llmk::Vector8<int32_t> pair = llmk::load8(source + 2);
  CHECK(pair.elements[0] == 3);
  CHECK(pair.elements[1] == 4);
  llmk::store8(destination, pair);
  const llmk::Vector4<int32_t> single = llmk::load4(source + 7);
  llmk::store4(destination + 2, single);
  CHECK(destination[0] == 3);
  CHECK(destination[2] == 8);
  static_assert(llmk::Vector16<uint16_t>::kSize == 8 && llmk::Vector4<int8_t>::kSize == 4);

  CHECK(llmk::is_aligned(source, 16));
  CHECK_FALSE(llmk::is_aligned(source + 1, 16));
  CHECK(llmk::is_aligned(source + 1, 4));
  CHECK(llmk::is_aligned(source + 2, 8));
  CHECK(llmk::is_aligned(reinterpret_cast<const void*>(uintptr_t(96)), 48));  // not only powers of two
}

#if defined(LLMK_TEST_HAVE_KERNELS)
// Copies rows of a strided source view into a packed destination with 16-byte vectors, then scales the
// first element of each row through TensorView indexing: load16/store16 and TensorView on the device.
__global__ void copy_rows_with_vectors(llmk::TensorView<const llmk::half, 2> source,
                                       llmk::TensorView<llmk::half, 2> destination) {
  const int64_t row = blockIdx.x;
  const int64_t column = int64_t(threadIdx.x) * llmk::Vector16<llmk::half>::kSize;
  if (row < source.extent(0) && column < source.extent(1)) {
    llmk::store16(&destination(row, column), llmk::load16(&source(row, column)));
  }
}

__global__ void load16_from(const llmk::half* source, llmk::half* destination) {
  llmk::store16(destination, llmk::load16(source));
}

TEST_CASE("vector access and TensorView inside a kernel") {
  constexpr int kRows = 5, kColumns = 64, kSourceStride = 80;  // padded rows, 160 bytes each
  std::vector<llmk::half> host_source(kRows * kSourceStride);
  for (std::size_t i = 0; i < host_source.size(); ++i) host_source[i] = llmk::half(float(i % 1000));
  llmk::DeviceBuffer<llmk::half> device_source(host_source);
  llmk::DeviceBuffer<llmk::half> device_destination(kRows * kColumns);
  const llmk::TensorView<const llmk::half, 2> source{
      device_source.data(), {kRows, kColumns}, {kSourceStride, 1}};
  const auto destination = llmk::make_row_major(device_destination.data(), kRows, kColumns);
  REQUIRE(source.check_aligned("source", 16).ok());
  REQUIRE(
      llmk::launch(copy_rows_with_vectors, dim3(kRows), dim3(kColumns / 8), 0, nullptr, source, destination)
          .ok());
  const std::vector<llmk::half> copied = device_destination.to_host();
  for (int row = 0; row < kRows; ++row) {
    for (int column = 0; column < kColumns; ++column) {
      REQUIRE(copied[row * kColumns + column].bits == host_source[row * kSourceStride + column].bits);
    }
  }

#if defined(LLMK_SIM)
  // A misaligned vector load faults on the GPU; the simulator reports it with the caller's location.
  const llmk::Status misaligned = llmk::launch(load16_from, dim3(1), dim3(1), 0, nullptr,
                                               device_source.data() + 1, device_destination.data());
  CHECK_FALSE(misaligned.ok());
  CHECK(misaligned.message().find("16-byte aligned") != std::string::npos);
  CHECK(misaligned.message().find("vector.cuh") == std::string::npos);  // names the caller, not the header
  MESSAGE("simulator report: " << misaligned.message());
#endif
}
#endif

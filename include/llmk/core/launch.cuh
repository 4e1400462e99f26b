// llmk/core/launch.cuh: the one way llmk starts a kernel, in both backends.
//
// CUDA: validates the configuration, raises the dynamic shared-memory limit when a kernel needs more than the
// default 48 KiB (once per kernel, device and size: DynamicSmemLimits), and calls cudaLaunchKernel.
// Simulator: runs the grid on the CPU before returning.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "llmk/config.cuh"
#include "llmk/core/status.cuh"

#if defined(LLMK_SIM)
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#endif

namespace llmk {

/// Largest dynamic shared memory per block llmk launches ask for (sm_90: 227 KiB; sm_80: 163 KiB, the driver
/// rejects more on such a device with a clear CUDA error).
inline constexpr std::size_t kMaxDynamicSharedBytes = 227 * 1024;

namespace detail {

inline Status check_launch_config(bool kernel_null, dim3 grid, dim3 block, std::size_t smem_bytes) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (kernel_null) return Status::invalid_argument("kernel", "must not be null");
  if (threads == 0 || threads > 1024)
    return Status::invalid_argument("block",
                                    str_cat("threads per block must be in [1, 1024], got ", threads));
  if (block.z > 64) return Status::invalid_argument("block", str_cat("block.z must be <= 64, got ", block.z));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    return Status::invalid_argument("grid", "every dimension must be >= 1");
  if (grid.x >= (1u << 31) || grid.y > 65535 || grid.z > 65535)
    return Status::invalid_argument("grid", "must be at most (2^31-1, 65535, 65535)");
  if (smem_bytes > kMaxDynamicSharedBytes)
    return Status::invalid_argument(
        "smem_bytes", str_cat("must be <= ", kMaxDynamicSharedBytes, " bytes per block, got ", smem_bytes));
  return {};
}

// The dynamic shared-memory limit each (kernel, device) was raised to. A kernel above the default 48 KiB
// needs cudaFuncSetAttribute, a driver call, before its launch (FlashAttention-2 makes it on every call); the
// limit only ever has to grow, so llmk raises it once per size. Bounded: past kMaxEntries pairs, new pairs
// ask the driver on every launch. Host code, the same in both builds (tests/core/launch.cu).
class DynamicSmemLimits {
 public:
  static constexpr std::size_t kMaxEntries = 1024;
  // Whether `kernel` on `device` was raised to at least `bytes` (no driver call needed).
  bool allows(const void* kernel, int device, std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = limits_.find({kernel, device});
    return it != limits_.end() && it->second >= bytes;
  }
  // Records a successful raise to `bytes`.
  void raised(const void* kernel, int device, std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = limits_.find({kernel, device});
    if (it != limits_.end())
      it->second = std::max(it->second, bytes);
    else if (limits_.size() < kMaxEntries)
      limits_.emplace(std::make_pair(kernel, device), bytes);
  }
  // Drops what is known of `kernel` on `device` (the driver lost the raise: a device reset).
  void forget(const void* kernel, int device) {
    const std::lock_guard<std::mutex> lock(mutex_);
    limits_.erase({kernel, device});
  }
  std::size_t size() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return limits_.size();
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<const void*, int>, std::size_t> limits_;
};

inline DynamicSmemLimits& dynamic_smem_limits() {
  static DynamicSmemLimits limits;
  return limits;
}

#if defined(LLMK_SIM)
// Demangled symbol name of a kernel for simulator reports (needs -rdynamic, which llmk::sim adds).
inline std::string kernel_symbol_name(const void* fn) {
  Dl_info info{};
  if (dladdr(fn, &info) == 0 || info.dli_sname == nullptr) return "<kernel>";
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = (status == 0 && demangled) ? demangled : info.dli_sname;
  std::free(demangled);
  return name;
}
#endif

// The launch itself, once the configuration is checked: the simulator, or the CUDA runtime (cudaLaunchKernel;
// cudaLaunchKernelExC with the cluster attribute when `cluster` has more than one block).
template <class... Params, class... Args>
Status launch_checked(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster, std::size_t smem_bytes,
                      cudaStream_t stream, Args&&... args) {
#if defined(LLMK_SIM)
  (void)stream;
  const std::string name = kernel_symbol_name(reinterpret_cast<const void*>(kernel));
  sim::LaunchResult r = sim::launch_kernel_cluster(kernel, grid, block, cluster, smem_bytes, name.c_str(),
                                                   std::forward<Args>(args)...);
  if (!r.ok()) return Status(Status::Code::kSimulatorError, r.error);
  return {};
#elif defined(LLMK_CUDA)
  const void* fn = reinterpret_cast<const void*>(kernel);
  int device = -1;
  bool known = false;  // raised by an earlier launch (DynamicSmemLimits): no driver call now
  auto raise = [&]() -> Status {
    const cudaError_t e =
        cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
    if (e != cudaSuccess)
      return Status::cuda_error("cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", cudaGetErrorString(e));
    dynamic_smem_limits().raised(fn, device, smem_bytes);
    return {};
  };
  if (smem_bytes > 48 * 1024) {
    if (cudaGetDevice(&device) != cudaSuccess) device = -1;
    known = device >= 0 && dynamic_smem_limits().allows(fn, device, smem_bytes);
    if (!known) LLMK_RETURN_IF_ERROR(raise());
  }
  std::tuple<std::decay_t<Params>...> packed(std::forward<Args>(args)...);
  void* arg_ptrs[sizeof...(Params) + 1] = {};
  std::apply(
      [&arg_ptrs](auto&... p) {
        int i = 0;
        ((arg_ptrs[i++] = static_cast<void*>(&p)), ...);
      },
      packed);
  const bool clustered = cluster.x * cluster.y * cluster.z != 1;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster.x;
  attr[0].val.clusterDim.y = cluster.y;
  attr[0].val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  auto start = [&]() {
    return clustered ? cudaLaunchKernelExC(&cfg, fn, arg_ptrs)
                     : cudaLaunchKernel(fn, grid, block, arg_ptrs, smem_bytes, stream);
  };
  cudaError_t e = start();
  if (e != cudaSuccess && known) {  // a raise the driver no longer has (a device reset): raise, retry once
    (void)cudaGetLastError();
    dynamic_smem_limits().forget(fn, device);
    LLMK_RETURN_IF_ERROR(raise());
    e = start();
  }
  if (e != cudaSuccess)
    return Status::cuda_error(clustered ? "cudaLaunchKernelExC (cluster)" : "cudaLaunchKernel",
                              cudaGetErrorString(e));
  return {};
#else
  static_assert(sizeof(kernel) == 0, "llmk::launch needs nvcc or the simulator backend (-DLLMK_SIM)");
  return {};
#endif
}

}  // namespace detail

/// Launches `kernel` on `grid` x `block` threads with `smem_bytes` of dynamic shared memory on `stream`.
/// Arguments are converted to the kernel's parameter types. Never use `<<<>>>` in llmk: this call is what
/// lets the same kernel run in the simulator.
///
///   __global__ void scale(float* x, float a, int n);
///   llmk::Status s = llmk::launch(scale, dim3(llmk::ceil_div(n, 256)), dim3(256), 0, stream, x, 2.0f, n);
///   if (!s.ok()) std::cerr << s.message() << "\n";
///
/// In the simulator the launch is synchronous and its Status carries any failure the simulator detected
/// (deadlock, warp mask errors, bad cp.async/ldmatrix addresses) with block, thread and source location. On
/// the GPU the Status reports launch errors only; asynchronous faults surface at the next synchronisation.
///
/// Errors (Status::invalid_argument naming the argument): kernel null; block threads outside [1, 1024] or
/// block.z above 64 ('block'); a grid dimension 0, grid.x >= 2^31 or grid.y / grid.z above 65535 ('grid');
/// smem_bytes above kMaxDynamicSharedBytes. A failed cudaFuncSetAttribute or launch: Status::cuda_error; a
/// failure the simulator detected: Status::Code::kSimulatorError.
template <class... Params, class... Args>
Status launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes, cudaStream_t stream,
              Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "llmk::launch: argument count differs from the kernel's");
  LLMK_RETURN_IF_ERROR(detail::check_launch_config(kernel == nullptr, grid, block, smem_bytes));
  return detail::launch_checked(kernel, grid, block, dim3(1, 1, 1), smem_bytes, stream,
                                std::forward<Args>(args)...);
}

/// llmk::launch with the grid's blocks in thread-block clusters of `cluster` blocks (sm_90; each dimension of
/// the grid a multiple of the cluster's, at most 8 blocks a cluster). The blocks of a cluster run at once and
/// may wait on and signal each other (llmk/arch/sm90/cluster.cuh); the simulator runs them together.
///
///   llmk::Status s = llmk::launch_cluster(kernel, dim3(2 * n), dim3(384), dim3(2, 1, 1), smem, stream, p);
///
/// Errors: those of llmk::launch, and (invalid_argument naming 'cluster') a cluster dimension 0 or not
/// dividing the grid's, or more than 8 blocks a cluster.
template <class... Params, class... Args>
Status launch_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster, std::size_t smem_bytes,
                      cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "llmk::launch_cluster: argument count differs from the kernel's");
  LLMK_RETURN_IF_ERROR(detail::check_launch_config(kernel == nullptr, grid, block, smem_bytes));
  if (cluster.x == 0 || cluster.y == 0 || cluster.z == 0 || grid.x % cluster.x != 0 ||
      grid.y % cluster.y != 0 || grid.z % cluster.z != 0)
    return Status::invalid_argument("cluster", "must be positive and divide the grid in each dimension");
  if (static_cast<unsigned long long>(cluster.x) * cluster.y * cluster.z > 8)
    return Status::invalid_argument("cluster", "at most 8 blocks (the portable cluster size)");
  return detail::launch_checked(kernel, grid, block, cluster, smem_bytes, stream,
                                std::forward<Args>(args)...);
}

#if defined(LLMK_CUDA)
namespace detail {
// Attribute `attr` of `device`, read from the runtime once per (slot, device) and kept: the attributes the
// launchers ask on every call (compute capability, SM count, shared memory per SM) never change for a device,
// and a few queries per launch add up on a decode step's critical path. 0 when the query fails (not kept).
enum DeviceAttributeSlot : int { kSlotMajor, kSlotMinor, kSlotSms, kSlotSmemPerSm, kSlotCount };
inline int cached_device_attribute(DeviceAttributeSlot slot, cudaDeviceAttr attr, int device) {
  constexpr int kDevices = 64;
  static std::atomic<int> cache[kSlotCount][kDevices];  // value + 1; 0: not read yet
  int value = 0;
  if (device < 0 || device >= kDevices)
    return cudaDeviceGetAttribute(&value, attr, device) == cudaSuccess ? value : 0;
  const int known = cache[slot][device].load(std::memory_order_relaxed);
  if (known > 0) return known - 1;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) return 0;
  cache[slot][device].store(value + 1, std::memory_order_relaxed);
  return value;
}
}  // namespace detail
#endif

/// Compute capability of the current device as 100 * major + 10 * minor (900 on Hopper; 0 when none). The
/// simulator reports 900 (it emulates every atom); LLMK_SIM_ARCH=800 / 890 makes it report an older device
/// (tests of the dispatch and of refusals).
///   if (llmk::device_arch() >= 900) { /* the sm_90 path */ }
inline int device_arch() {
#if defined(LLMK_CUDA)
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  const int major =
      detail::cached_device_attribute(detail::kSlotMajor, cudaDevAttrComputeCapabilityMajor, device);
  const int minor =
      detail::cached_device_attribute(detail::kSlotMinor, cudaDevAttrComputeCapabilityMinor, device);
  return major * 100 + minor * 10;
#elif defined(LLMK_SIM)
  const char* env = std::getenv("LLMK_SIM_ARCH");
  return env != nullptr && *env != '\0' ? std::atoi(env) : 900;
#else
  return 0;
#endif
}

/// Streaming multiprocessors of the current device: the launchers that size their grids to the machine
/// (split-KV decode, the persistent Hopper GEMM) read it. The simulator plans as if it were an H100 SXM
/// (132); LLMK_SIM_SM_COUNT=n makes it report n (tests of the heuristics, and of persistent kernels walking
/// several tiles per block, set it).
///   const dim3 grid(static_cast<unsigned>(llmk::device_sm_count()));   // one persistent block per SM
inline int device_sm_count() {
#if defined(LLMK_CUDA)
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess) {
    const int sms = detail::cached_device_attribute(detail::kSlotSms, cudaDevAttrMultiProcessorCount, device);
    if (sms > 0) return sms;
  }
#elif defined(LLMK_SIM)
  const char* env = std::getenv("LLMK_SIM_SM_COUNT");
  if (env != nullptr && std::atoi(env) > 0) return std::atoi(env);
#endif
  return 132;  // H100 SXM
}

}  // namespace llmk

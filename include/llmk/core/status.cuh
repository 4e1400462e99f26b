// llmk/core/status.cuh: how host entry points report failure (host only; device code never sees a
// Status). Host launchers validate their arguments, then launch, and return a Status whose message
// names the argument and the rule it broke. Users who prefer exceptions wrap the call in
// llmk::throw_if_error.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace llmk {

/// Concatenates anything streamable into a string, for building messages.
///   std::string rule = llmk::str_cat("must be >= K (K=", k, ", lda=", lda, ")");
template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream stream;
  ((stream << parts), ...);
  return stream.str();
}

/// The outcome of a host call: ok, or a code plus a message that names what was wrong.
///   llmk::Status check_lda(int64_t lda, int64_t k) {
///     if (lda < k)
///       return llmk::Status::invalid_argument("lda",
///                                             llmk::str_cat("must be >= K (K=", k, ", lda=", lda, ")"));
///     return {};                                      // ok
///   }
///   // message(): "invalid argument 'lda': must be >= K (K=200, lda=100)"
class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,
    kUnsupported,
    kOutOfMemory,
    kCudaError,
    kSimulatorError,
    kInternal
  };

  /// An ok status.
  Status() = default;
  /// A status with an already complete message (prefer the named factories below).
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  /// "invalid argument '<argument>': <rule>"
  static Status invalid_argument(std::string_view argument, std::string_view rule) {
    return {Code::kInvalidArgument, str_cat("invalid argument '", argument, "': ", rule)};
  }
  /// "unsupported: <what>", e.g. Status::unsupported("head_dim=96 (supported: 64, 128)")
  static Status unsupported(std::string_view what) {
    return {Code::kUnsupported, str_cat("unsupported: ", what)};
  }
  /// "out of memory: <what>"
  static Status out_of_memory(std::string_view what) {
    return {Code::kOutOfMemory, str_cat("out of memory: ", what)};
  }
  /// "CUDA error in <call>: <detail>", e.g. Status::cuda_error("cudaMemcpyAsync", cudaGetErrorString(e))
  static Status cuda_error(std::string_view call, std::string_view detail) {
    return {Code::kCudaError, str_cat("CUDA error in ", call, ": ", detail)};
  }
  /// "simulator error: <detail>"
  static Status simulator_error(std::string_view detail) {
    return {Code::kSimulatorError, str_cat("simulator error: ", detail)};
  }
  /// "internal error: <detail>" (a bug in llmk, not in the caller's arguments)
  static Status internal(std::string_view detail) {
    return {Code::kInternal, str_cat("internal error: ", detail)};
  }

  Code code() const { return code_; }
  bool ok() const { return code_ == Code::kOk; }
  /// Empty when ok.
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

/// Name of a status code, e.g. "kInvalidArgument":  std::string code = llmk::to_string(status.code());
inline const char* to_string(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "kOk";
    case Status::Code::kInvalidArgument:
      return "kInvalidArgument";
    case Status::Code::kUnsupported:
      return "kUnsupported";
    case Status::Code::kOutOfMemory:
      return "kOutOfMemory";
    case Status::Code::kCudaError:
      return "kCudaError";
    case Status::Code::kSimulatorError:
      return "kSimulatorError";
    case Status::Code::kInternal:
      return "kInternal";
  }
  return "unknown";
}

/// The exception llmk::throw_if_error throws; what() is the status message.
///   try { llmk::throw_if_error(run()); } catch (const llmk::Error& e) { e.status().code(); }
class Error : public std::runtime_error {
 public:
  explicit Error(Status status) : std::runtime_error(status.message()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

/// Throws llmk::Error when `status` is not ok:  llmk::throw_if_error(llmk::gemm::gemm_f16(args, stream));
inline void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

}  // namespace llmk

/// Returns the status of `expr` from the enclosing function when it is not ok.
///   LLMK_RETURN_IF_ERROR(a.check_not_null("a"));
#define LLMK_RETURN_IF_ERROR(expr)                                 \
  do {                                                             \
    ::llmk::Status llmk_returned_status_ = (expr);                 \
    if (!llmk_returned_status_.ok()) return llmk_returned_status_; \
  } while (0)

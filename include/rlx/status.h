// rlx/status.h: typed errors and Expected<T>, the only way failures leave an rlx function.
//
// No rlx API aborts, asserts or throws on bad input; every fallible function returns a
// Status or an Expected<T> whose error names the file, tensor, node or line at fault.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace rlx {

enum class ErrorCode : uint8_t {
  ok = 0,
  invalid_argument,  // a caller passed something the API does not accept
  parse_error,       // text IR or a command line could not be parsed
  shape_error,       // shapes do not agree
  dtype_error,       // dtypes do not agree or are not accepted
  unknown_op,        // an op name that is not in the ops table
  verify_error,      // an IR invariant does not hold
  illegal,           // a node has no legal way to run on the target device
  io_error,          // the file system failed
  format_error,      // a model or data file is malformed
  unavailable,       // a device or feature is not available on this machine
  unsupported,       // a valid request that rlx does not implement (yet)
  out_of_range,      // an index or size outside its bounds
  overflow,          // size arithmetic on untrusted values overflowed
  runtime_error,     // a kernel or backend failed while running
  internal,          // a bug in rlx
};

std::string_view error_code_name(ErrorCode code);

// Concatenates its arguments with operator<< into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == ErrorCode::ok; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", or "ok".
  std::string to_string() const;
  // Returns a copy whose message is prefixed with `context: `.
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::ok;
  std::string message_;
};

// Builds an error Status from streamable parts: error(ErrorCode::shape_error, "node ", n, ...).
template <class... Args>
Status error(ErrorCode code, const Args&... args) {
  return Status(code, cat(args...));
}

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}                       // NOLINT
  Expected(Status status) : v_(std::move(status)) {}                // NOLINT
  template <class U, class = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                              !std::is_same_v<std::decay_t<U>, Status> &&
                                              !std::is_same_v<std::decay_t<U>, T>>>
  Expected(U&& value) : v_(T(std::forward<U>(value))) {}           // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Status& status() const {
    static const Status ok_status;
    return has_value() ? ok_status : std::get<1>(v_);
  }
  Status take_status() && { return has_value() ? Status::ok() : std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace rlx

#define RLX_CONCAT_INNER(a, b) a##b
#define RLX_CONCAT(a, b) RLX_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function if it is an error.
#define RLX_TRY(expr)                                 \
  do {                                                \
    ::rlx::Status rlx_try_status_ = (expr);           \
    if (!rlx_try_status_.is_ok()) return rlx_try_status_; \
  } while (0)

// Evaluates an Expected<T>; returns its error, or assigns its value to `lhs`.
#define RLX_ASSIGN_OR_RETURN(lhs, expr) \
  RLX_ASSIGN_OR_RETURN_IMPL(RLX_CONCAT(rlx_expected_, __LINE__), lhs, expr)
#define RLX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.has_value()) return std::move(tmp).take_status(); \
  lhs = std::move(tmp).value()

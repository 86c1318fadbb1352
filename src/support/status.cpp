#include "rlx/status.h"

namespace rlx {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::parse_error: return "parse error";
    case ErrorCode::shape_error: return "shape error";
    case ErrorCode::dtype_error: return "dtype error";
    case ErrorCode::unknown_op: return "unknown op";
    case ErrorCode::verify_error: return "verify error";
    case ErrorCode::illegal: return "illegal";
    case ErrorCode::io_error: return "io error";
    case ErrorCode::format_error: return "format error";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::out_of_range: return "out of range";
    case ErrorCode::overflow: return "overflow";
    case ErrorCode::runtime_error: return "runtime error";
    case ErrorCode::internal: return "internal error";
  }
  return "?";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return cat(error_code_name(code_), ": ", message_);
}

Status Status::with_context(std::string_view context) const {
  if (is_ok() || context.empty()) return *this;
  return Status(code_, cat(context, ": ", message_));
}

}  // namespace rlx

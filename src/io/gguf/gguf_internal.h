// Internal helpers shared by the GGUF reader, writer and value code.
#pragma once

#include <cstddef>

#include "rlx/gguf.h"

namespace rlx::gguf {

// Bytes of one scalar of type t in a file (0 for string and array).
size_t scalar_bytes(ValueType t);

}  // namespace rlx::gguf

// Typed functions from a library loaded at run time (dlopen), for the runtimes that load their
// vendor's library only when first used (cuBLAS, NCCL, HIP), so that rlx starts without it.
#pragma once

#include <dlfcn.h>

#include <string_view>

#include "rlx/status.h"

namespace rlx {

// Sets `fn` to the function `name` of the library `lib` (a dlopen handle), or says that
// `library` (its name, for the message) has no such function, with `hint` after it.
template <class Fn>
Status load_function(void* lib, Fn& fn, const char* name, std::string_view library, std::string_view hint = "") {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) return error(ErrorCode::unavailable, library, " has no ", name, hint);
  return Status::ok();
}

}  // namespace rlx

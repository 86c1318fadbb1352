// Compiling rendered C at run time with the system C compiler, with an on-disk cache keyed
// by a hash of the source and the compiler command, and loading the result with dlopen.
#pragma once

#include <memory>
#include <string>

#include "rlx/status.h"

namespace rlx::codegen {

// How compile_c compiles a source other than the generated C: as C++ (`cxx`), with `flags`
// instead of the generated C's code flags (c_code_flags), e.g. an include folder.
struct JitOptions {
  bool cxx = false;
  std::string flags;
};

// A loaded shared object; symbols stay valid while it lives.
class JitModule {
 public:
  ~JitModule();
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;
  // The address of `symbol`, or an error naming it.
  Expected<void*> symbol(const std::string& name) const;
  const std::string& path() const { return path_; }
  bool from_cache() const { return from_cache_; }

 private:
  friend Expected<std::shared_ptr<JitModule>> compile_c(const std::string& source, const JitOptions* options);
  JitModule(void* handle, std::string path, bool cached) : handle_(handle), path_(std::move(path)), from_cache_(cached) {}
  void* handle_;
  std::string path_;
  bool from_cache_;
};

// The compiler command prefix: $RLX_CC, else the compiler CMake found, else "cc".
std::string c_compiler();
// The flags that decide the generated code (optimization, ISA, language, math): compile_c adds
// -fPIC -shared -w to them. GCC-only flags are added when the compiler takes them. Tests compile
// drivers of the C prelude with the same ones.
const char* c_code_flags();
// The cache folder: $RLX_CACHE_DIR, else $XDG_CACHE_HOME/rlx/kernels, else ~/.cache/rlx/kernels.
std::string kernel_cache_dir();
// A 128-bit hex key of `s` (two FNV-1a hashes), for naming cached files.
std::string hex_key(const std::string& s);
// Creates `path` and its parents (like mkdir -p); the error names the folder.
Status make_dirs(const std::string& path);
// Compiles `source` (a complete C file, or what `options` says) to a shared object, or reuses
// the cached one, and loads it. Modules are also cached in memory by the same key. Errors
// carry the compiler's diagnostics.
Expected<std::shared_ptr<JitModule>> compile_c(const std::string& source, const JitOptions* options = nullptr);

}  // namespace rlx::codegen

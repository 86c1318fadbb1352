#include "c_jit.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#ifndef RLX_C_COMPILER
#define RLX_C_COMPILER "cc"
#endif

namespace rlx::codegen {
namespace {

// -mprefer-vector-width=512: with -march=native on an AVX-512 Intel CPU, GCC vectorizes with
// 256-bit registers by default (to spare the clock on mostly scalar code); the generated
// kernels are all vector loops, and the GEMMs they run beside already use 512-bit registers.
// MiniLM's GELU epilogue went from 7.0% to 4.9% of the model's time with it. The flag only
// states a preference, so CPUs without AVX-512 are unaffected; it is x86-only.
#if defined(__x86_64__) || defined(__i386__)
#define RLX_JIT_VECTOR_WIDTH " -mprefer-vector-width=512"
#else
#define RLX_JIT_VECTOR_WIDTH ""
#endif
// -fno-trapping-math: rlx never reads the floating-point exception flags, and with GCC's
// default (-ftrapping-math) a select whose untaken side holds an FP operation that could raise
// one (f16's subnormal widening, a division) is not if-converted, so the loop is not
// vectorized: f16 training's relu backward, 128 x 128, ran at 71 us instead of 2.7 us. The flag
// changes no value (unlike -ffast-math); it only lets the compiler evaluate both sides.
#define RLX_JIT_CODE_FLAGS \
  "-O3 -march=native" RLX_JIT_VECTOR_WIDTH " -std=gnu11 -fwrapv -fno-math-errno -fno-trapping-math -fopenmp-simd"
// -fno-tree-pre (GCC only; clang rejects it): a float max or min is a select on two tests
// (a > b || a != a, so that NaN propagates). When a loop chains several, as max pooling's
// taps over relu do, GCC's partial-redundancy elimination hoists the later tests into
// branches that if-conversion cannot flatten, and the loop stays scalar with data-dependent
// branches: tinyconv's fused bias + relu + 2x2 max pool, 1024 x 169, took 6.4 ms on one Zen 4
// core against 0.44 ms vectorized. Loop-invariant motion, which the generated loops need,
// is a separate pass (-ftree-loop-im) and stays on.
constexpr const char kGccOnlyCodeFlags[] = " -fno-tree-pre";

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::string c_compiler() {
  if (const char* e = std::getenv("RLX_CC")) return e;
  return RLX_C_COMPILER;
}

namespace {

// The first line of `cc --version`: part of every cache key, so a new compiler recompiles.
std::string compiler_version() {
  static const std::string v = [] {
    std::string cmd = c_compiler() + " --version 2>/dev/null";
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) return std::string("unknown");
    char buf[256];
    std::string r;
    if (fgets(buf, sizeof buf, f)) r = buf;
    pclose(f);
    return r;
  }();
  return v;
}

}  // namespace

const char* c_code_flags() {
  static const std::string flags = [] {
    // asked of the compiler itself: "cc" names GCC on Debian without saying so
    const std::string probe = c_compiler() + kGccOnlyCodeFlags + " -E -x c /dev/null > /dev/null 2>&1";
    const bool takes_gcc_flags = std::system(probe.c_str()) == 0;
    return std::string(RLX_JIT_CODE_FLAGS) + (takes_gcc_flags ? kGccOnlyCodeFlags : "");
  }();
  return flags.c_str();
}

// hex_key and make_dirs are shared with the other kernel caches (the cuda device's NVRTC cache).
std::string hex_key(const std::string& s) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(fnv1a(s, 0xcbf29ce484222325ULL)),
                static_cast<unsigned long long>(fnv1a(s, 0x84222325cbf29ce4ULL)));
  return buf;
}

Status make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      return error(ErrorCode::io_error, "cannot create kernel cache folder ", cur, ": ", std::strerror(errno));
  }
  return Status::ok();
}

namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && st.st_size > 0;
}

std::mutex g_mu;
std::map<std::string, std::weak_ptr<JitModule>> g_loaded;

}  // namespace

JitModule::~JitModule() {
  if (handle_) dlclose(handle_);
}

Expected<void*> JitModule::symbol(const std::string& name) const {
  void* p = dlsym(handle_, name.c_str());
  if (!p) return error(ErrorCode::internal, "generated module ", path_, " has no symbol ", name);
  return p;
}

std::string kernel_cache_dir() {
  if (const char* e = std::getenv("RLX_CACHE_DIR")) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/rlx/kernels";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/rlx/kernels";
  return "/tmp/rlx-kernels";
}

Expected<std::shared_ptr<JitModule>> compile_c(const std::string& source, const JitOptions* options) {
  const std::string cc = c_compiler();
  // C++ through the same driver (gcc and clang take -x c++); nothing of C++'s library is linked
  const std::string flags = options ? (options->cxx ? "-x c++ " : "") + options->flags + " -fPIC -shared -w" : c_code_flags() + std::string(" -fPIC -shared -w");
  const std::string key = hex_key(source + "\n//" + cc + " " + flags + "\n//" + compiler_version());
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_loaded.find(key);
  if (it != g_loaded.end())
    if (auto m = it->second.lock()) return m;
  const std::string dir = kernel_cache_dir();
  RLX_TRY(make_dirs(dir));
  const std::string so = dir + "/" + key + ".so";
  bool cached = file_exists(so);
  if (!cached) {
    // write source and compile to a private temporary name, then rename atomically so that
    // concurrent processes never load a half-written file
    const std::string tag = std::to_string(getpid()) + "." + std::to_string(reinterpret_cast<uintptr_t>(&source));
    const std::string c_path = dir + "/" + key + "." + tag + ".c";
    const std::string tmp_so = dir + "/" + key + "." + tag + ".so.tmp";
    const std::string log = dir + "/" + key + "." + tag + ".log";
    {
      std::ofstream f(c_path);
      f << source;
      if (!f) return error(ErrorCode::io_error, "cannot write ", c_path);
    }
    std::string cmd = cc + " " + flags + " -o '" + tmp_so + "' '" + c_path + "' -lm > '" + log + "' 2>&1";
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
      std::ifstream lf(log);
      std::stringstream ss;
      ss << lf.rdbuf();
      std::string diag = ss.str();
      if (diag.size() > 4000) diag = diag.substr(0, 4000) + "...";
      std::remove(tmp_so.c_str());
      std::remove(log.c_str());
      return error(ErrorCode::runtime_error, "the C compiler failed on generated kernels (source kept at ", c_path,
                   "): ", diag);
    }
    std::remove(log.c_str());
    std::rename(c_path.c_str(), (dir + "/" + key + ".c").c_str());  // kept for reading and debugging
    if (std::rename(tmp_so.c_str(), so.c_str()) != 0)
      return error(ErrorCode::io_error, "cannot move compiled kernels to ", so, ": ", std::strerror(errno));
  }
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return error(ErrorCode::runtime_error, "cannot load generated kernels ", so, ": ", dlerror());
  std::shared_ptr<JitModule> m(new JitModule(h, so, cached));
  g_loaded[key] = m;
  return m;
}

}  // namespace rlx::codegen

#include "metal_shim_runtime.h"

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include "codegen/c_jit.h"

namespace rlx::metal {
namespace {

// rlx's `metal_stdlib`: what the generated MSL uses of Metal, in C++17 on compiler built-ins
// (no <cmath>: its global isnan, fabs and friends would be ambiguous beside these after the
// MSL's `using namespace metal;`). Then the launcher that fills a kernel's arguments by their
// types (device pointers from the buffers, constant int64_t references from the scalars, the
// first uint3 the thread's position, the second the grid's size) and runs the grid.
constexpr const char* kShim = R"SHIM(/* rlx's shim of the Metal built-ins (src/backends/metal/metal_shim_runtime.h) */
#pragma once
#include <stdint.h>
#include <type_traits>
#include <utility>
#define kernel
#define device
#define constant const
#define thread
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
namespace metal {
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
struct uint2 {
  uint x, y;
  uint2() = default;
  uint2(uint a, uint b) : x(a), y(b) {}
};
struct uint3 {
  uint x, y, z;
};
template <class T, class U>
inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type between types of different sizes");
  T t;
  __builtin_memcpy(&t, &u, sizeof t);
  return t;
}
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline float fabs(float x) { return __builtin_fabsf(x); }
inline float abs(float x) { return __builtin_fabsf(x); }
inline float floor(float x) { return __builtin_floorf(x); }
inline float ceil(float x) { return __builtin_ceilf(x); }
inline float trunc(float x) { return __builtin_truncf(x); }
inline float rint(float x) { return __builtin_rintf(x); }
inline float sqrt(float x) { return __builtin_sqrtf(x); }
inline float exp2(float x) { return __builtin_exp2f(x); }
inline float log2(float x) { return __builtin_log2f(x); }
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline float clamp(float x, float lo, float hi) { return __builtin_fminf(__builtin_fmaxf(x, lo), hi); }
inline int clamp(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }
}  // namespace metal

namespace rlx_shim {
struct Args {
  void* const* bufs;
  const int64_t* scalars;
  metal::uint3 gid, grid;
};
template <class T>
constexpr int kind() {
  return std::is_pointer_v<T> ? 0 : (std::is_same_v<T, const int64_t&> ? 1 : 2);
}
constexpr int count(const int* kinds, std::size_t before, int k) {
  int n = 0;
  for (std::size_t i = 0; i < before; ++i) n += kinds[i] == k;
  return n;
}
template <class T>
struct Take;
template <class T>
struct Take<T*> {
  static T* get(const Args& a, int b, int, int) { return static_cast<T*>(a.bufs[b]); }
};
template <>
struct Take<const int64_t&> {
  static const int64_t& get(const Args& a, int, int s, int) { return a.scalars[s]; }
};
template <>
struct Take<metal::uint3> {
  static metal::uint3 get(const Args& a, int, int, int u) { return u == 0 ? a.gid : a.grid; }
};
template <class... P, std::size_t... I>
void call(void (*k)(P...), const Args& a, std::index_sequence<I...>) {
  constexpr int kinds[] = {kind<P>()..., -1};
  k(Take<P>::get(a, count(kinds, I, 0), count(kinds, I, 1), count(kinds, I, 2))...);
}
template <class... P>
void run(void (*k)(P...), void* const* bufs, const int64_t* scalars, uint64_t gx, uint64_t gy) {
  Args a{bufs, scalars, {0, 0, 0}, {(metal::uint)gx, (metal::uint)gy, 1}};
  for (uint64_t y = 0; y < gy; ++y)
    for (uint64_t x = 0; x < gx; ++x) {
      a.gid = {(metal::uint)x, (metal::uint)y, 0};
      call(k, a, std::index_sequence_for<P...>{});
    }
}
}  // namespace rlx_shim
)SHIM";

using EntryFn = void (*)(void* const*, const int64_t*, uint64_t, uint64_t);

struct ShimKernel {
  EntryFn fn = nullptr;
  std::shared_ptr<codegen::JitModule> module;
};

// A grid of at most 2^31 threads a row (Metal's positions are 32-bit): x + y * width.
constexpr int64_t kRow = int64_t{1} << 31;

class ShimRuntime final : public hal::StreamRuntime {
 public:
  ShimRuntime() : hal::StreamRuntime("metal") {}
  ~ShimRuntime() override = default;

  Status open() {
    dir_ = codegen::kernel_cache_dir() + "/metal-shim-" + codegen::hex_key(kShim).substr(0, 16);
    RLX_TRY(codegen::make_dirs(dir_));
    const std::string path = dir_ + "/metal_stdlib";
    std::ofstream f(path, std::ios::binary);
    f << kShim;
    if (!f) return error(ErrorCode::io_error, "metal: cannot write the Metal shim header ", path);
    return Status::ok();
  }

  Expected<hal::Buffer> allocate(uint64_t bytes, const std::string& what) override {
    const uint64_t n = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, n);
    if (!p) return error(ErrorCode::runtime_error, "metal: no host memory for ", what, " (", bytes, " bytes)");
    std::memset(p, 0xAB, n);  // what no one wrote reads as garbage, not as zeros
    return hal::Buffer{reinterpret_cast<uint64_t>(p), bytes};
  }
  void release(hal::Buffer b) override { std::free(reinterpret_cast<void*>(b.id)); }
  Status upload(const hal::BufferRange& r, const void* data, uint64_t bytes) override { return write(r, data, bytes); }
  Status download(const hal::BufferRange& r, void* data, uint64_t bytes) override { return read(r, data, bytes); }

  Expected<std::vector<hal::Kernel>> build(const hal::KernelModule& module) override {
    std::string source = module.source + "\n/* ---- the shim's entry points ---- */\n";
    for (const hal::KernelEntry& e : module.entries)
      source += "extern \"C\" void rlx_shim_entry_" + e.name + "(void* const* b, const int64_t* s, uint64_t gx, uint64_t gy) " +
                "{ rlx_shim::run(" + e.name + ", b, s, gx, gy); }\n";
    const codegen::JitOptions options{true, "-O1 -std=c++17 -fwrapv -fno-math-errno -I'" + dir_ + "'"};
    RLX_ASSIGN_OR_RETURN(std::shared_ptr<codegen::JitModule> m, codegen::compile_c(source, &options));
    std::vector<hal::Kernel> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const hal::KernelEntry& e : module.entries) {
      RLX_ASSIGN_OR_RETURN(void* fn, m->symbol("rlx_shim_entry_" + e.name));
      kernels_.push_back(std::make_unique<ShimKernel>(ShimKernel{reinterpret_cast<EntryFn>(fn), m}));
      out.push_back({reinterpret_cast<uint64_t>(kernels_.back().get())});
    }
    return out;
  }

  Status check_dispatch(const hal::Dispatch& d) const override {
    if (d.items <= 0)
      return error(ErrorCode::unsupported, "metal: ", d.name, " is a launch of work groups; the shim runs grids of threads only");
    if ((d.items + kRow - 1) / kRow > kRow) return error(ErrorCode::unsupported, "metal: ", d.name, " runs too many threads");
    return Status::ok();
  }

 protected:
  Status write(const hal::BufferRange& r, const void* data, uint64_t bytes) override {
    if (bytes) std::memcpy(at(r), data, bytes);
    return Status::ok();
  }
  Status read(const hal::BufferRange& r, void* data, uint64_t bytes) override {
    if (bytes) std::memcpy(data, at(r), bytes);
    return Status::ok();
  }
  Status enqueue(const hal::Command& c) override {
    if (c.kind == hal::Command::Kind::zero) {
      std::memset(at(c.range), 0, c.range.bytes);
      return Status::ok();
    }
    if (c.kind != hal::Command::Kind::dispatch) return error(ErrorCode::unsupported, "metal: ", c.name, " is a library call");
    const hal::Dispatch& d = c.dispatch;
    RLX_TRY(check_dispatch(d));
    std::vector<void*> bufs;
    for (const hal::BufferRange& r : d.buffers) bufs.push_back(at(r));
    const auto* k = reinterpret_cast<const ShimKernel*>(d.kernel.id);
    const uint64_t gx = static_cast<uint64_t>(std::min(d.items, kRow));
    const uint64_t gy = static_cast<uint64_t>((d.items + kRow - 1) / kRow);
    k->fn(bufs.data(), d.scalars.data(), gx, gy);
    return Status::ok();
  }
  Status finish() override { return Status::ok(); }

 private:
  static uint8_t* at(const hal::BufferRange& r) { return reinterpret_cast<uint8_t*>(r.buffer.id) + r.offset; }

  std::string dir_;
  std::mutex mu_;
  std::vector<std::unique_ptr<ShimKernel>> kernels_;
};

}  // namespace

Expected<std::shared_ptr<hal::Runtime>> create_shim_runtime() {
  auto rt = std::make_shared<ShimRuntime>();
  RLX_TRY(rt->open());
  return std::shared_ptr<hal::Runtime>(rt);
}

}  // namespace rlx::metal

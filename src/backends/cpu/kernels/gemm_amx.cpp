// AMX-BF16 pieces of the GEMM (see gemm.h, "AMX"): the run-time checks (shared with the int8
// layer's AMX-INT8 kernel, qgemm_amx.cpp), the tile configuration, the packing of A rows and B
// pairs into the layouts the tile loads read, and the 32 x 32 block kernel.
//
// The tiles (palette 1) are all configured alike: 16 rows of 64 bytes. tmm0..3 hold a 2 x 2
// grid of 16 x 16 f32 blocks of C, tmm4/5 two 16-row slices of A (16 rows x 32 bf16 k-values)
// and tmm6/7 two 16-column slices of B (16 k-pairs x 16 columns x 2 bf16). One step of k = 32
// is then 2 A loads, 2 B loads and 4 tdpbf16ps, each of which adds 16 x 16 x 32 products: the
// 2 x 2 grid is the largest that leaves room for both operands in the 8 tile registers.
//
// tdpbf16ps multiplies bf16 pairs exactly and adds them into the f32 lanes with round to
// nearest even, treating denormal inputs and results as zero: the numerics of vdpbf16ps.
//
// Linux hands out the 8 KiB of tile state only to a process that asks for it
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); a kernel that refuses (too old, or a
// signal stack too small for the larger frame) leaves the feature off, and the AVX-512 kernels
// run instead. Each thread loads the tile configuration once, before its first block.
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/gemm.h"

#if defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RLX_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl")))

namespace rlx::cpu::gemm_detail {
namespace {

constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// cpuid leaf 7, sub-leaf 0, edx: bit 22 amx-bf16, bit 24 amx-tile, bit 25 amx-int8.
unsigned cpuid7_edx() {
  unsigned eax = 7, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  return edx;
}

// AMX tiles with AVX-512 (which every kernel here uses around them), and the tile state
// granted (asked once per process).
bool tiles_usable() {
  static const bool ok = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq") || !((cpuid7_edx() >> 24) & 1))
      return false;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

thread_local bool t_configured = false;

}  // namespace

RLX_AMX void amx_configure_tiles() {
  if (t_configured) return;
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  // not _tile_loadconfig: GCC 12's asm for it names only the first 8 bytes of the
  // configuration as read, and the stores of the rest were removed as dead
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
  t_configured = true;
}

namespace {

// The block for `R` 16-row slices of A and `C` 16-column slices of B; see amx_bf16_block.
template <int R, int C>
RLX_AMX void block(const uint16_t* a, int64_t kp, const uint16_t* b, float* c, int64_t ldc, bool load_c) {
  const int64_t c_stride = ldc * 4, a_stride = kp * 2;
  // The tile intrinsics are asm statements without a memory clobber: these barriers keep the
  // compiler from moving the packing stores or C's reads across them.
  __asm__ volatile("" ::: "memory");
  if (load_c) {
    _tile_loadd(0, c, c_stride);
    if (C > 1) _tile_loadd(1, c + 16, c_stride);
    if (R > 1) _tile_loadd(2, c + 16 * ldc, c_stride);
    if (R > 1 && C > 1) _tile_loadd(3, c + 16 * ldc + 16, c_stride);
  } else {
    _tile_zero(0);
    if (C > 1) _tile_zero(1);
    if (R > 1) _tile_zero(2);
    if (R > 1 && C > 1) _tile_zero(3);
  }
  for (int64_t p = 0; p < kp; p += 32, b += 16 * 64) {
    _tile_loadd(4, a + p, a_stride);
    _tile_loadd(6, b, 128);
    if (C > 1) _tile_loadd(7, b + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    if (C > 1) _tile_dpbf16ps(1, 4, 7);
    if (R > 1) {
      _tile_loadd(5, a + 16 * kp + p, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      if (C > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, c_stride);
  if (C > 1) _tile_stored(1, c + 16, c_stride);
  if (R > 1) _tile_stored(2, c + 16 * ldc, c_stride);
  if (R > 1 && C > 1) _tile_stored(3, c + 16 * ldc + 16, c_stride);
  __asm__ volatile("" ::: "memory");
}

}  // namespace

bool amx_bf16_supported() { return tiles_usable() && ((cpuid7_edx() >> 22) & 1); }
bool amx_int8_supported() { return tiles_usable() && ((cpuid7_edx() >> 25) & 1); }

void amx_bf16_block(const uint16_t* a, int64_t kp, const uint16_t* b, float* c, int64_t ldc, int rows16, int cols16,
                    bool load_c) {
  amx_configure_tiles();
  if (rows16 > 1)
    cols16 > 1 ? block<2, 2>(a, kp, b, c, ldc, load_c) : block<2, 1>(a, kp, b, c, ldc, load_c);
  else
    cols16 > 1 ? block<1, 2>(a, kp, b, c, ldc, load_c) : block<1, 1>(a, kp, b, c, ldc, load_c);
}

}  // namespace rlx::cpu::gemm_detail

#else

namespace rlx::cpu::gemm_detail {
bool amx_bf16_supported() { return false; }
bool amx_int8_supported() { return false; }
void amx_configure_tiles() {}
void amx_bf16_block(const uint16_t*, int64_t, const uint16_t*, float*, int64_t, int, int, bool) {}
}  // namespace rlx::cpu::gemm_detail

#endif

namespace rlx::cpu::gemm_detail {

void amx_pack_a_bf16(const uint16_t* a, int64_t lda, bool trans, int64_t mr, int64_t kc, int64_t kp, int64_t rows,
                     uint16_t* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    uint16_t* d = dst + i * kp;
    if (i >= mr) {
      std::memset(d, 0, static_cast<size_t>(kp) * 2);
      continue;
    }
    if (trans)
      for (int64_t p = 0; p < kc; ++p) d[p] = a[p * lda + i];
    else
      std::memcpy(d, a + i * lda, static_cast<size_t>(kc) * 2);
    std::memset(d + kc, 0, static_cast<size_t>(kp - kc) * 2);
  }
}

void amx_pack_b_pairs_bf16(const uint16_t* b, int64_t ldb, bool trans_b, int64_t kc, int64_t w, uint16_t* out) {
  const int64_t kp = (kc + 31) / 32 * 32;
  std::memset(out, 0, static_cast<size_t>(kp / 2 * 64) * 2);
  for (int64_t j = 0; j < w; ++j)
    for (int64_t p = 0; p < kc; ++p) out[(p / 2) * 64 + j * 2 + (p & 1)] = trans_b ? b[j * ldb + p] : b[p * ldb + j];
}

}  // namespace rlx::cpu::gemm_detail

// The int8 linear layer's panel kernel on AMX-INT8 tiles (I8PanelArgs, pack_i8's layout; see
// qgemm.h, set_qgemm_amx). pack_i8's panel already is the tiles' B layout: one quad of k
// (4 consecutive k-values) of 32 channels is a 128-byte row, so columns 0-15 and 16-31 of a
// step of 16 quads are two tiles of 16 rows x 64 bytes, 128 bytes apart. x's quants (u8,
// q + 128) are A: 16 rows x 64 k-values a tile, read in place (row stride ldq). tdpbusd
// multiplies u8 by s8 and sums exactly in int32, as vpdpbusd does, so the results are the VNNI
// kernel's bit for bit: 2 x 2 tiles of 16 x 16 int32 sums per 32 rows, then the same epilogue
// (offset, scales, bias) on AVX-512.
//
// What the tiles read past the valid data: i8gemm pads x's quants to ldq = k rounded up to 64
// bytes and to a multiple of 16 rows, and pack_i8 pads the quads to a multiple of 16 (zero
// weights), so every tile load stays inside those buffers; rows past m are computed and
// dropped, and k-values past k meet zero weights.
#include <algorithm>
#include <cstdint>

#include "backends/cpu/kernels/qgemm.h"

#if defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>

#define RLX_AMX_I8 __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq")))

namespace rlx::cpu::qgemm_detail {
namespace {

// The int32 sums of R 16-row slices of x (rows from x, stride ldq bytes) by the panel's 32
// channels, over `quads` (a multiple of 16) quads, into acc (32 x 32, row stride 32).
template <int R>
RLX_AMX_I8 void sums(const uint8_t* x, int64_t ldq, const int8_t* w, int64_t quads, int32_t* acc) {
  __asm__ volatile("" ::: "memory");  // the tile intrinsics are asm without memory operands
  _tile_zero(0);
  _tile_zero(1);
  if (R > 1) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t q = 0; q < quads; q += 16, w += 16 * 128, x += 64) {
    _tile_loadd(4, x, ldq);
    _tile_loadd(6, w, 128);
    _tile_loadd(7, w + 64, 128);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    if (R > 1) {
      _tile_loadd(5, x + 16 * ldq, ldq);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
  }
  _tile_stored(0, acc, 128);
  _tile_stored(1, acc + 16, 128);
  if (R > 1) {
    _tile_stored(2, acc + 16 * 32, 128);
    _tile_stored(3, acc + 16 * 32 + 16, 128);
  }
  __asm__ volatile("" ::: "memory");
}

}  // namespace

RLX_AMX_I8 void i8_panel_amx(const I8PanelArgs& a, int64_t i0, int64_t i1) {
  gemm_detail::amx_configure_tiles();
  alignas(64) int32_t acc[32 * 32];
  const __mmask16 m0 = static_cast<__mmask16>(a.cols >= 16 ? 0xFFFF : (1u << a.cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(a.cols >= 32 ? 0xFFFF : a.cols <= 16 ? 0 : (1u << (a.cols - 16)) - 1);
  const __m512i k128 = _mm512_set1_epi32(128);
  const __m512i off0 = _mm512_mullo_epi32(_mm512_loadu_si512(a.sums), k128);
  const __m512i off1 = _mm512_mullo_epi32(_mm512_loadu_si512(a.sums + 16), k128);
  const __m512 ws0 = a.ws_stride ? _mm512_maskz_loadu_ps(m0, a.ws) : _mm512_set1_ps(a.ws[0]);
  const __m512 ws1 = a.ws_stride ? _mm512_maskz_loadu_ps(m1, a.ws + 16) : _mm512_set1_ps(a.ws[0]);
  const __m512 b0 = a.bias ? _mm512_maskz_loadu_ps(m0, a.bias) : _mm512_setzero_ps();
  const __m512 b1 = a.bias ? _mm512_maskz_loadu_ps(m1, a.bias + 16) : _mm512_setzero_ps();
  for (int64_t i = i0; i < i1; i += 32) {
    const int64_t rows = std::min<int64_t>(32, i1 - i);
    const uint8_t* x = a.qx + i * a.ldq;
    if (rows > 16)
      sums<2>(x, a.ldq, a.panel, a.quads, acc);
    else
      sums<1>(x, a.ldq, a.panel, a.quads, acc);
    // the VNNI kernel's epilogue, operation for operation
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 s = _mm512_set1_ps(a.sx[i + r]);
      float* y = a.y + (i + r) * a.ldy;
      const __m512 y0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(acc + r * 32), off0)), s);
      const __m512 y1 =
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(acc + r * 32 + 16), off1)), s);
      _mm512_mask_storeu_ps(y, m0, _mm512_fmadd_ps(y0, ws0, b0));
      _mm512_mask_storeu_ps(y + 16, m1, _mm512_fmadd_ps(y1, ws1, b1));
    }
  }
}

}  // namespace rlx::cpu::qgemm_detail

#else

namespace rlx::cpu::qgemm_detail {
void i8_panel_amx(const I8PanelArgs&, int64_t, int64_t) {}
}  // namespace rlx::cpu::qgemm_detail

#endif

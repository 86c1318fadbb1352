/* rlx_mcu_kernels.h: the int8 arithmetic of rlx's ahead-of-time targets, in plain C99.
 *
 * This one file is both compiled into rlx's host int8 reference (src/targets/int8) and written
 * verbatim into every generated Cortex-M project, so the host and the microcontroller run the
 * same integer arithmetic by construction (the targets tests check it bit for bit in QEMU); the
 * FPGA target's SystemVerilog is checked against the same reference in Verilator.
 *
 * Quantization (TFLite / CMSIS-NN conventions):
 *   real = scale * (q - zero_point); weights symmetric per output channel (zero point 0),
 *   activations asymmetric per tensor, biases int32 with scale in_scale * w_scale[o].
 *   A dense layer accumulates acc = bias'[o] + sum_i in[i] * w[o][i] in int32, where the
 *   generator folded the input zero point into bias' = bias - in_zp * sum_i w[o][i], then
 *   requantizes: out = clamp(((acc * M[o]) >> s[o]) rounded + out_zp, act_min, act_max), with
 *   M[o] in [2^30, 2^31) and s[o] in [1, 62] chosen so that M * 2^-s = in_scale * w_scale / out_scale.
 *   ReLU is the clamp at act_min = out_zp (the quantized 0). Convolutions work the same way per
 *   output channel; max pooling compares int8 values directly.
 *
 * Requires: >> on a negative int64_t is an arithmetic shift (true for GCC and Clang on every
 * target rlx supports); nothing else is implementation-defined. No heap, no libc. */
#ifndef RLX_MCU_KERNELS_H
#define RLX_MCU_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one definition of requantization: round half up, then add the zero point and clamp.
 * |acc * mult| < 2^62, so adding the rounding bias cannot overflow int64. */
static inline int8_t rlx_mcu_requantize(int32_t acc, int32_t mult, int32_t shift, int32_t out_zp, int32_t act_min,
                                        int32_t act_max) {
  const int64_t prod = (int64_t)acc * (int64_t)mult;
  const int64_t rounded = (prod + ((int64_t)1 << (shift - 1))) >> shift;
  int64_t v = rounded + out_zp;
  if (v < act_min) v = act_min;
  if (v > act_max) v = act_max;
  return (int8_t)v;
}

/* The int8 dot product of n elements. On cores with the DSP extension (Cortex-M4/M7/M33 with
 * __ARM_FEATURE_DSP) four bytes are sign-extended into two 16-bit pairs (SXTB16) and
 * multiplied-accumulated two at a time (SMLAD); the sums are exact either way, so both paths
 * give the same int32. */
static inline int32_t rlx_mcu_dot_s8(const int8_t* a, const int8_t* b, int32_t n) {
  int32_t acc = 0;
  int32_t i = 0;
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
  for (; i + 4 <= n; i += 4) {
    uint32_t va, vb;
    __builtin_memcpy(&va, a + i, 4);
    __builtin_memcpy(&vb, b + i, 4);
    uint32_t a02, a13, b02, b13;
    __asm__("sxtb16 %0, %1" : "=r"(a02) : "r"(va));
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(a13) : "r"(va));
    __asm__("sxtb16 %0, %1" : "=r"(b02) : "r"(vb));
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(b13) : "r"(vb));
    __asm__("smlad %0, %1, %2, %0" : "+r"(acc) : "r"(a02), "r"(b02));
    __asm__("smlad %0, %1, %2, %0" : "+r"(acc) : "r"(a13), "r"(b13));
  }
#endif
  for (; i < n; ++i) acc += (int32_t)a[i] * (int32_t)b[i];
  return acc;
}

/* One quantized dense layer: out[o] = requantize(bias[o] + dot(in, w + o * n_in)), o < n_out.
 * w is [n_out][n_in] (each output channel's weights contiguous); bias has the input zero
 * point folded in (see above); mult and shift are per output channel. */
static inline void rlx_mcu_dense_s8(const int8_t* in, int32_t n_in, const int8_t* w, const int32_t* bias,
                                    const int32_t* mult, const int32_t* shift, int32_t n_out, int32_t out_zp,
                                    int32_t act_min, int32_t act_max, int8_t* out) {
  for (int32_t o = 0; o < n_out; ++o) {
    const int32_t acc = bias[o] + rlx_mcu_dot_s8(in, w + (int32_t)o * n_in, n_in);
    out[o] = rlx_mcu_requantize(acc, mult[o], shift[o], out_zp, act_min, act_max);
  }
}

/* One quantized NCHW convolution (group 1, dilation 1): for output channel m and pixel (y, x),
 * out = requantize(bias[m] + sum_{c,ky,kx} in[c][y*sh+ky-pt][x*sw+kx-pl] * w[m][c][ky][kx]).
 * Each pixel's window is first gathered into `col` (c_in * kh * kw bytes of scratch, in the
 * weights' [c][ky][kx] order), then every output channel is one rlx_mcu_dot_s8 of it, so the
 * M4 gets its SMLAD path and the gather is shared by all channels. A tap outside the input
 * reads in_zp (the quantized 0), which is what the folded bias (bias - in_zp * sum w[m])
 * expects of every tap. w is [c_out][c_in][kh][kw]. */
static inline void rlx_mcu_conv2d_s8(const int8_t* in, int32_t c_in, int32_t h_in, int32_t w_in, int32_t in_zp,
                                     const int8_t* w, int32_t c_out, int32_t kh, int32_t kw, int32_t sh, int32_t sw,
                                     int32_t pt, int32_t pl, const int32_t* bias, const int32_t* mult,
                                     const int32_t* shift, int32_t h_out, int32_t w_out, int32_t out_zp,
                                     int32_t act_min, int32_t act_max, int8_t* col, int8_t* out) {
  const int32_t taps = c_in * kh * kw;
  for (int32_t y = 0; y < h_out; ++y) {
    for (int32_t x = 0; x < w_out; ++x) {
      const int32_t y0 = y * sh - pt, x0 = x * sw - pl;
      int8_t* cp = col;
      if (y0 >= 0 && y0 + kh <= h_in && x0 >= 0 && x0 + kw <= w_in) {
        /* the window lies inside the input: no bounds checks */
        for (int32_t c = 0; c < c_in; ++c) {
          const int8_t* ip = in + (c * h_in + y0) * w_in + x0;
          for (int32_t ky = 0; ky < kh; ++ky, ip += w_in)
            for (int32_t kx = 0; kx < kw; ++kx) *cp++ = ip[kx];
        }
      } else {
        for (int32_t c = 0; c < c_in; ++c) {
          const int8_t* ic = in + c * h_in * w_in;
          for (int32_t ky = 0; ky < kh; ++ky) {
            const int32_t iy = y0 + ky;
            for (int32_t kx = 0; kx < kw; ++kx) {
              const int32_t ix = x0 + kx;
              *cp++ = (iy >= 0 && iy < h_in && ix >= 0 && ix < w_in) ? ic[iy * w_in + ix] : (int8_t)in_zp;
            }
          }
        }
      }
      for (int32_t m = 0; m < c_out; ++m) {
        const int32_t acc = bias[m] + rlx_mcu_dot_s8(col, w + m * taps, taps);
        out[(m * h_out + y) * w_out + x] = rlx_mcu_requantize(acc, mult[m], shift[m], out_zp, act_min, act_max);
      }
    }
  }
}

/* NCHW max pooling (no padding, dilation 1) straight on int8: requantization is monotonic, so
 * the output keeps the input's scale and zero point and equals pooling before quantization. */
static inline void rlx_mcu_maxpool2d_s8(const int8_t* in, int32_t c, int32_t h_in, int32_t w_in, int32_t kh,
                                        int32_t kw, int32_t sh, int32_t sw, int32_t h_out, int32_t w_out,
                                        int8_t* out) {
  for (int32_t ch = 0; ch < c; ++ch) {
    const int8_t* ic = in + ch * h_in * w_in;
    for (int32_t y = 0; y < h_out; ++y) {
      for (int32_t x = 0; x < w_out; ++x) {
        int8_t best = -128;
        for (int32_t ky = 0; ky < kh; ++ky)
          for (int32_t kx = 0; kx < kw; ++kx) {
            const int8_t v = ic[(y * sh + ky) * w_in + x * sw + kx];
            if (v > best) best = v;
          }
        out[(ch * h_out + y) * w_out + x] = best;
      }
    }
  }
}

/* The index of the largest of n int8 values (the first one on ties). */
static inline int32_t rlx_mcu_argmax_s8(const int8_t* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

#ifdef __cplusplus
}
#endif

#endif /* RLX_MCU_KERNELS_H */

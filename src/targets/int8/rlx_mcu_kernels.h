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
 *   output channel; max pooling compares int8 values directly, average pooling averages them
 *   (both keep the input's scale), and a residual add rescales both operands to the output's.
 *
 * Requires: >> on a negative int64_t is an arithmetic shift (true for GCC and Clang on every
 * target rlx supports); nothing else is implementation-defined. No heap, no libc. */
#ifndef RLX_MCU_KERNELS_H
#define RLX_MCU_KERNELS_H

#include <stdint.h>

#if defined(__hexagon__) && defined(__HVX__) && defined(__HVX_LENGTH__) && __HVX_LENGTH__ == 128
#include <hexagon_protos.h>
#include <hexagon_types.h>
#define RLX_MCU_HVX 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* (acc * mult) >> shift, rounded half up, in int64: the fixed-point multiply every kernel
 * uses. |acc * mult| < 2^62 for every caller, so adding the rounding bias cannot overflow. */
static inline int64_t rlx_mcu_scale(int32_t acc, int32_t mult, int32_t shift) {
  const int64_t prod = (int64_t)acc * (int64_t)mult;
  return (prod + ((int64_t)1 << (shift - 1))) >> shift;
}

/* The one definition of requantization: the fixed-point multiply, then add the zero point and
 * clamp. */
static inline int8_t rlx_mcu_requantize(int32_t acc, int32_t mult, int32_t shift, int32_t out_zp, int32_t act_min,
                                        int32_t act_max) {
  int64_t v = rlx_mcu_scale(acc, mult, shift) + out_zp;
  if (v < act_min) v = act_min;
  if (v > act_max) v = act_max;
  return (int8_t)v;
}

/* The int8 dot product of n elements. On cores with the DSP extension (Cortex-M4/M7/M33 with
 * __ARM_FEATURE_DSP) four bytes are sign-extended into two 16-bit pairs (SXTB16) and
 * multiplied-accumulated two at a time (SMLAD); on Hexagon with 128-byte HVX, 128 bytes a
 * packet are multiplied and summed four at a time into 32 int32 lanes (vrmpy), added up at the
 * end. The sums are exact on every path, so all give the same int32. */
static inline int32_t rlx_mcu_dot_s8(const int8_t* a, const int8_t* b, int32_t n) {
  int32_t acc = 0;
  int32_t i = 0;
#if defined(RLX_MCU_HVX)
  if (n >= 128) {
    HVX_Vector vacc = Q6_V_vzero();
    for (; i + 128 <= n; i += 128) {
      HVX_Vector va, vb;
      __builtin_memcpy(&va, a + i, 128);  /* unaligned loads (vmemu) */
      __builtin_memcpy(&vb, b + i, 128);
      vacc = Q6_Vw_vrmpyacc_VwVbVb(vacc, va, vb);
    }
    int32_t lanes[32] __attribute__((aligned(128)));
    __builtin_memcpy(lanes, &vacc, 128);
    for (int32_t k = 0; k < 32; ++k) acc += lanes[k];
  }
#elif defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
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

/* One quantized NCHW convolution (dilation 1) in `groups` groups: output channel m of group
 * g = m / (c_out / groups) reads input channels [g * cg, (g + 1) * cg), cg = c_in / groups
 * (groups == c_in == c_out is a depthwise convolution). For pixel (y, x):
 * out = requantize(bias[m] + sum_{c,ky,kx} in[g*cg + c][y*sh+ky-pt][x*sw+kx-pl] * w[m][c][ky][kx]).
 * Each pixel's window of one group is first gathered into `col` (cg * kh * kw bytes of scratch,
 * in the weights' [c][ky][kx] order), then each of the group's output channels is one
 * rlx_mcu_dot_s8 of it, so the M4 gets its SMLAD path and the gather is shared by the group's
 * channels. A tap outside the input reads in_zp (the quantized 0), which is what the folded
 * bias (bias - in_zp * sum w[m]) expects of every tap. w is [c_out][cg][kh][kw]. */
static inline void rlx_mcu_conv2d_s8(const int8_t* in, int32_t c_in, int32_t h_in, int32_t w_in, int32_t in_zp,
                                     const int8_t* w, int32_t c_out, int32_t groups, int32_t kh, int32_t kw,
                                     int32_t sh, int32_t sw, int32_t pt, int32_t pl, const int32_t* bias,
                                     const int32_t* mult, const int32_t* shift, int32_t h_out, int32_t w_out,
                                     int32_t out_zp, int32_t act_min, int32_t act_max, int8_t* col, int8_t* out) {
  const int32_t cg = c_in / groups, mg = c_out / groups, taps = cg * kh * kw;
  for (int32_t y = 0; y < h_out; ++y) {
    for (int32_t x = 0; x < w_out; ++x) {
      const int32_t y0 = y * sh - pt, x0 = x * sw - pl;
      const int inside = y0 >= 0 && y0 + kh <= h_in && x0 >= 0 && x0 + kw <= w_in;
      for (int32_t g = 0; g < groups; ++g) {
        int8_t* cp = col;
        if (inside) {
          /* the window lies inside the input: no bounds checks */
          for (int32_t c = g * cg; c < (g + 1) * cg; ++c) {
            const int8_t* ip = in + (c * h_in + y0) * w_in + x0;
            for (int32_t ky = 0; ky < kh; ++ky, ip += w_in)
              for (int32_t kx = 0; kx < kw; ++kx) *cp++ = ip[kx];
          }
        } else {
          for (int32_t c = g * cg; c < (g + 1) * cg; ++c) {
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
        for (int32_t m = g * mg; m < (g + 1) * mg; ++m) {
          const int32_t acc = bias[m] + rlx_mcu_dot_s8(col, w + m * taps, taps);
          out[(m * h_out + y) * w_out + x] = rlx_mcu_requantize(acc, mult[m], shift[m], out_zp, act_min, act_max);
        }
      }
    }
  }
}

/* NCHW max pooling (dilation 1) straight on int8: requantization is monotonic, so the output
 * keeps the input's scale and zero point and equals pooling before quantization. Taps outside
 * the input (padding pt/pl, or a ceil_mode window's overhang) are skipped, as if -infinity;
 * every window holds at least one input tap (padding < kernel, as the graph requires). */
static inline void rlx_mcu_maxpool2d_s8(const int8_t* in, int32_t c, int32_t h_in, int32_t w_in, int32_t kh,
                                        int32_t kw, int32_t sh, int32_t sw, int32_t pt, int32_t pl, int32_t h_out,
                                        int32_t w_out, int8_t* out) {
  for (int32_t ch = 0; ch < c; ++ch) {
    const int8_t* ic = in + ch * h_in * w_in;
    for (int32_t y = 0; y < h_out; ++y) {
      for (int32_t x = 0; x < w_out; ++x) {
        int8_t best = -128;
        for (int32_t ky = 0; ky < kh; ++ky) {
          const int32_t iy = y * sh - pt + ky;
          if (iy < 0 || iy >= h_in) continue;
          for (int32_t kx = 0; kx < kw; ++kx) {
            const int32_t ix = x * sw - pl + kx;
            if (ix < 0 || ix >= w_in) continue;
            const int8_t v = ic[iy * w_in + ix];
            if (v > best) best = v;
          }
        }
        out[(ch * h_out + y) * w_out + x] = best;
      }
    }
  }
}

/* NCHW average pooling (dilation 1) on int8, keeping the input's scale and zero point:
 * out = zp + round(sum (q - zp) / count), rounded half away from zero (as TFLite does), the
 * sum over the window's taps inside the input. count is the number of those taps, or with
 * include_pad the taps inside the input plus its explicit padding (pt, pl, pb, pr), which read
 * 0 (q = zp); a ceil_mode window's overhang beyond the padding never counts. */
static inline void rlx_mcu_avgpool2d_s8(const int8_t* in, int32_t c, int32_t h_in, int32_t w_in, int32_t zp,
                                        int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t pt, int32_t pl,
                                        int32_t pb, int32_t pr, int32_t include_pad, int32_t h_out, int32_t w_out,
                                        int8_t* out) {
  for (int32_t ch = 0; ch < c; ++ch) {
    const int8_t* ic = in + ch * h_in * w_in;
    for (int32_t y = 0; y < h_out; ++y) {
      for (int32_t x = 0; x < w_out; ++x) {
        int32_t sum = 0, count = 0;
        for (int32_t ky = 0; ky < kh; ++ky) {
          const int32_t iy = y * sh - pt + ky;
          for (int32_t kx = 0; kx < kw; ++kx) {
            const int32_t ix = x * sw - pl + kx;
            if (iy >= 0 && iy < h_in && ix >= 0 && ix < w_in) {
              sum += ic[iy * w_in + ix] - zp;
              ++count;
            } else if (include_pad && iy >= -pt && iy < h_in + pb && ix >= -pl && ix < w_in + pr) {
              ++count;
            }
          }
        }
        if (count == 0) count = 1;
        const int32_t q = sum >= 0 ? (sum + count / 2) / count : -((-sum + count / 2) / count);
        int32_t v = q + zp;
        if (v < -128) v = -128;
        if (v > 127) v = 127;
        out[(ch * h_out + y) * w_out + x] = (int8_t)v;
      }
    }
  }
}

/* Elementwise add of two int8 tensors with their own scales and zero points (TFLite's
 * quantized add): each operand's offset from its zero point is shifted left by 20 bits and
 * brought to a common scale (twice the larger input scale, 2^-20 per unit) by its multiplier
 * (a_mult * 2^-a_shift = a_scale / (2 * max(a_scale, b_scale)), <= 1/2), the two are summed,
 * and the sum is requantized to the output scale (out_mult * 2^-out_shift =
 * 2 * max(a_scale, b_scale) / (2^20 * out_scale)). |(q - zp) << 20| < 2^28, so nothing
 * overflows int32 before the int64 products. ReLU is the clamp at act_min = out_zp. */
static inline void rlx_mcu_add_s8(const int8_t* a, int32_t a_zp, int32_t a_mult, int32_t a_shift, const int8_t* b,
                                  int32_t b_zp, int32_t b_mult, int32_t b_shift, int32_t n, int32_t out_mult,
                                  int32_t out_shift, int32_t out_zp, int32_t act_min, int32_t act_max, int8_t* out) {
  for (int32_t i = 0; i < n; ++i) {
    const int32_t sa = (int32_t)rlx_mcu_scale((a[i] - a_zp) * (1 << 20), a_mult, a_shift);
    const int32_t sb = (int32_t)rlx_mcu_scale((b[i] - b_zp) * (1 << 20), b_mult, b_shift);
    out[i] = rlx_mcu_requantize(sa + sb, out_mult, out_shift, out_zp, act_min, act_max);
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

// cpu/kernels/qgemm_impl.h: the quantized kernels written once over a 16-float vector type,
// and instantiated per ISA by qgemm_avx512.cpp, qgemm_avx2.cpp and qgemm.cpp (portable).
//
// Include this after defining RLX_QK (the function attributes: a target and always_inline) and
// a struct `Isa` with the vector operations listed below, inside an anonymous namespace: every
// function here must have internal linkage, so that code compiled for one ISA is never picked
// by the linker for another. For the same reason nothing here calls into the standard library.
//
// Isa provides: V (16 floats); zero, load, store, set1, halves(a, b) (8 x a then 8 x b),
// fma(a, b, c) = a * b + c, mul, sub, hsum; h2f (one f16 scalar); conversions of 16 inputs to
// floats: i8, u8, f16, bf16, nib_lo / nib_hi
// (the low / high nibbles of 16 bytes), lut_lo / lut_hi (a 16-float table indexed by those
// nibbles), crumb(p, shift) (the 2-bit fields (p[l] >> shift) & 3), q6 (ggml's 6-bit quants: a nibble of ql plus 2 bits of qh shifted down by `shift`);
// add_bits(q, bits, v) (v added to lanes whose bit in `bits` is set) and add_bytebit(q, p, m, v)
// (v added to lanes l whose byte p[l] has a bit of m set); q6_unpack(block, q) (the 256
// values of a q6_k block as int8 q - 32, in element order).
//
// Each decoder turns one block into its values, 16 at a time, handing each vector to a sink:
// a dot-product sink multiplies them into up to 4 rows of x; a store sink writes them out.

// (this header is meant to be included inside `namespace { ... }`)

using QT = ::rlx::quant::QType;

template <QT T>
struct Block;
#define RLX_QBLOCK(t, e, b) \
  template <>               \
  struct Block<QT::t> {     \
    static constexpr int64_t elems = e, bytes = b; \
  };
RLX_QBLOCK(f32, 16, 64)  // f32 / f16 / bf16 rows are processed 16 values at a time
RLX_QBLOCK(f16, 16, 32)
RLX_QBLOCK(bf16, 16, 32)
RLX_QBLOCK(q4_0, 32, 18)
RLX_QBLOCK(q4_1, 32, 20)
RLX_QBLOCK(q5_0, 32, 22)
RLX_QBLOCK(q5_1, 32, 24)
RLX_QBLOCK(q8_0, 32, 34)
RLX_QBLOCK(q2_k, 256, 84)
RLX_QBLOCK(q3_k, 256, 110)
RLX_QBLOCK(q4_k, 256, 144)
RLX_QBLOCK(q5_k, 256, 176)
RLX_QBLOCK(q6_k, 256, 210)
RLX_QBLOCK(q8_k, 256, 292)
RLX_QBLOCK(iq4_nl, 32, 18)
RLX_QBLOCK(iq4_xs, 256, 136)
RLX_QBLOCK(int4_g128, 128, 66)
RLX_QBLOCK(int4_g128_asym, 128, 68)
#undef RLX_QBLOCK

using V = Isa::V;

alignas(64) constexpr float kIq4nlLut[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

RLX_QK uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  __builtin_memcpy(&v, p, 2);
  return v;
}
RLX_QK uint32_t ld32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

// Scales (lanes 0-7, times d) and mins (lanes 8-15, times dmin) of the 8 sub-blocks of a
// q4_k / q5_k block into sm[0..16), zeros into sm[16..32): the 6-bit fields are regrouped
// with 32-bit masks (4 bytes at a time) and converted 16 at once.
RLX_QK void k4_scales(const uint8_t* b, float* sm) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[4];
  __builtin_memcpy(u, b + 4, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t mins_lo = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = mins_lo;
  u[0] &= kmask1;
  Isa::store(sm, Isa::mul(Isa::u8(reinterpret_cast<const uint8_t*>(u)), Isa::halves(Isa::h2f(b), Isa::h2f(b + 2))));
  Isa::store(sm + 16, Isa::zero());
}

// Formats whose blocks start with their one f16 scale (32 values; int4_g128: 128): their
// scales are converted 16 blocks at a time, off the vector ports.
template <QT T>
constexpr bool kBatchedScale = T == QT::q4_0 || T == QT::q8_0 || T == QT::iq4_nl || T == QT::q5_0 || T == QT::int4_g128;
// Formats with per-sub-block mins, applied through the sums of x's 32-value chunks.
template <QT T>
constexpr bool kUsesXsums = T == QT::q4_k || T == QT::q5_k;

alignas(64) constexpr float kQ40Lut[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
alignas(64) constexpr float kQ50Lut[16] = {-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1};

// A block of a kBatchedScale format whose scale (already f32) is *d.
template <QT T, class S>
RLX_QK void decode_scaled(const uint8_t* b, int64_t e0, S& s, const float* d) {
  if constexpr (T == QT::q4_0) {
    s.put2s(e0, Isa::lut_lo(b + 2, kQ40Lut), Isa::lut_hi(b + 2, kQ40Lut), d);
  } else if constexpr (T == QT::iq4_nl) {
    s.put2s(e0, Isa::lut_lo(b + 2, kIq4nlLut), Isa::lut_hi(b + 2, kIq4nlLut), d);
  } else if constexpr (T == QT::q8_0) {
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
    s.put2s(e0, Isa::i8(q), Isa::i8(q + 16), d);
  } else if constexpr (T == QT::int4_g128) {
    // 4 chunks of 32, each a q4_0 body
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c)
      s.put2s(e0 + 32 * c, Isa::lut_lo(b + 2 + 16 * c, kQ40Lut), Isa::lut_hi(b + 2 + 16 * c, kQ40Lut), d);
  } else if constexpr (T == QT::q5_0) {
    const uint32_t qh = ld32(b + 2);
    s.put2s(e0, Isa::add_bits(Isa::lut_lo(b + 6, kQ50Lut), qh & 0xFFFF, 16.f),
            Isa::add_bits(Isa::lut_hi(b + 6, kQ50Lut), qh >> 16, 16.f), d);
  }
}

// Decodes the block at b (its first value is element e0 of the row) into sink s.
template <QT T, class S>
RLX_QK void decode_block(const uint8_t* b, int64_t e0, S& s) {
  if constexpr (kBatchedScale<T>) {
    const float d = Isa::h2f(b);
    decode_scaled<T>(b, e0, s, &d);
  } else if constexpr (T == QT::f32) {
    s.put(e0, Isa::load(reinterpret_cast<const float*>(b)));
  } else if constexpr (T == QT::f16) {
    s.put(e0, Isa::f16(b));
  } else if constexpr (T == QT::bf16) {
    s.put(e0, Isa::bf16(b));
  } else if constexpr (T == QT::q4_1) {
    const V dv = Isa::set1(Isa::h2f(b)), m = Isa::set1(Isa::h2f(b + 2));
    s.put(e0, Isa::fma(Isa::nib_lo(b + 4), dv, m));
    s.put(e0 + 16, Isa::fma(Isa::nib_hi(b + 4), dv, m));
  } else if constexpr (T == QT::int4_g128_asym) {
    const V dv = Isa::set1(Isa::h2f(b)), m = Isa::set1(Isa::h2f(b + 2));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      s.put(e0 + 32 * c, Isa::fma(Isa::nib_lo(b + 4 + 16 * c), dv, m));
      s.put(e0 + 32 * c + 16, Isa::fma(Isa::nib_hi(b + 4 + 16 * c), dv, m));
    }
  } else if constexpr (T == QT::q5_1) {
    const V dv = Isa::set1(Isa::h2f(b)), m = Isa::set1(Isa::h2f(b + 2));
    const uint32_t qh = ld32(b + 4);
    s.put(e0, Isa::fma(Isa::add_bits(Isa::nib_lo(b + 8), qh & 0xFFFF, 16.f), dv, m));
    s.put(e0 + 16, Isa::fma(Isa::add_bits(Isa::nib_hi(b + 8), qh >> 16, 16.f), dv, m));
  } else if constexpr (T == QT::q8_k) {
    float d;
    __builtin_memcpy(&d, b, 4);
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 4);
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) s.put1s(e0 + 16 * g, Isa::i8(q + 16 * g), &d);
  } else if constexpr (T == QT::q4_k || T == QT::q5_k) {
    alignas(64) float sm[32];
    k4_scales(b, sm);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + (T == QT::q4_k ? 16 : 48);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = qs + 32 * c;
      V lo0 = Isa::nib_lo(q), lo1 = Isa::nib_lo(q + 16), hi0 = Isa::nib_hi(q), hi1 = Isa::nib_hi(q + 16);
      if constexpr (T == QT::q5_k) {
        const uint8_t mlo = static_cast<uint8_t>(1u << (2 * c)), mhi = static_cast<uint8_t>(2u << (2 * c));
        lo0 = Isa::add_bytebit(lo0, qh, mlo, 16.f);
        lo1 = Isa::add_bytebit(lo1, qh + 16, mlo, 16.f);
        hi0 = Isa::add_bytebit(hi0, qh, mhi, 16.f);
        hi1 = Isa::add_bytebit(hi1, qh + 16, mhi, 16.f);
      }
      s.put2s(e0 + 64 * c, lo0, lo1, &sm[2 * c]);
      s.put2s(e0 + 64 * c + 32, hi0, hi1, &sm[2 * c + 1]);
    }
    s.mins8(e0, &sm[8]);
  } else if constexpr (T == QT::q6_k) {
    alignas(64) int8_t q[256];
    alignas(64) float sc[16];
    Isa::q6_unpack(b, q);
    Isa::store(sc, Isa::mul(Isa::i8(reinterpret_cast<const int8_t*>(b + 192)), Isa::set1(Isa::h2f(b + 208))));
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) s.put1s(e0 + 16 * g, Isa::i8(q + 16 * g), &sc[g]);
  } else if constexpr (T == QT::iq4_xs) {
    const float d = Isa::h2f(b);
    const uint32_t sh = ld16(b + 2);
    const uint8_t* sl = b + 4;
    const uint8_t* qs = b + 8;
    alignas(64) float dl[8];
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = static_cast<int>(((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4));
      dl[ib] = d * static_cast<float>(ls - 32);
    }
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib)
      s.put2s(e0 + 32 * ib, Isa::lut_lo(qs + 16 * ib, kIq4nlLut), Isa::lut_hi(qs + 16 * ib, kIq4nlLut), &dl[ib]);
  } else if constexpr (T == QT::q2_k || T == QT::q3_k) {
    // 2-bit planes (+ a high bit for q3_k): byte l of each 32-byte plane group holds four
    // values, one per 2-bit field; 16 values share a scale (and for q2_k a min)
    const uint8_t* qs = b + (T == QT::q2_k ? 16 : 32);
    float dl[16], ml[16];
    if constexpr (T == QT::q2_k) {
      const float d = Isa::h2f(b + 80), dmin = Isa::h2f(b + 82);
      for (int i = 0; i < 16; ++i) {
        dl[i] = d * static_cast<float>(b[i] & 0xF);
        ml[i] = -dmin * static_cast<float>(b[i] >> 4);
      }
    } else {
      const float d = Isa::h2f(b + 108);
      const uint8_t* s6 = b + 96;
      for (int j = 0; j < 4; ++j) {
        dl[j] = d * static_cast<float>(((s6[j] & 0xF) | (((s6[8 + j] >> 0) & 3) << 4)) - 32);
        dl[j + 4] = d * static_cast<float>(((s6[4 + j] & 0xF) | (((s6[8 + j] >> 2) & 3) << 4)) - 32);
        dl[j + 8] = d * static_cast<float>(((s6[j] >> 4) | (((s6[8 + j] >> 4) & 3) << 4)) - 32);
        dl[j + 12] = d * static_cast<float>(((s6[4 + j] >> 4) | (((s6[8 + j] >> 6) & 3) << 4)) - 32);
        ml[j] = ml[j + 4] = ml[j + 8] = ml[j + 12] = 0.f;
      }
    }
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
#pragma GCC unroll 4
      for (int plane = 0; plane < 4; ++plane) {
#pragma GCC unroll 2
        for (int g = 0; g < 2; ++g) {
          const int is = 8 * half + 2 * plane + g;
          const V v = Isa::crumb(qs + 32 * half + 16 * g, 2 * plane);
          if constexpr (T == QT::q2_k) {
            s.put(e0 + 128 * half + 32 * plane + 16 * g, Isa::fma(v, Isa::set1(dl[is]), Isa::set1(ml[is])));
          } else {
            // value = crumb - 4 unless the hmask bit is set
            const V q = Isa::add_bytebit(v, b + 16 * g, static_cast<uint8_t>(1u << (4 * half + plane)), 4.f);
            s.put(e0 + 128 * half + 32 * plane + 16 * g, Isa::fma(q, Isa::set1(dl[is]), Isa::set1(-4.f * dl[is])));
          }
        }
      }
    }
  }
}

// Multiplies decoded values into MR rows of x. Values that share a scale are multiplied by x
// first and scaled once (put2s, put1s); mins come in through x's chunk sums (mins8).
template <int MR>
struct DotSink {
  V acc[MR], accm[MR];
  const float* x[MR];
  const float* xs[MR];
  RLX_QK void put(int64_t e, V w) {
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) acc[r] = Isa::fma(w, Isa::load(x[r] + e), acc[r]);
  }
  RLX_QK void put2s(int64_t e, V q0, V q1, const float* sp) {
    const V sv = Isa::set1(*sp);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const V t = Isa::fma(q1, Isa::load(x[r] + e + 16), Isa::mul(q0, Isa::load(x[r] + e)));
      acc[r] = Isa::fma(t, sv, acc[r]);
    }
  }
  RLX_QK void put1s(int64_t e, V q, const float* sp) {
    const V sv = Isa::set1(*sp);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) acc[r] = Isa::fma(Isa::mul(q, Isa::load(x[r] + e)), sv, acc[r]);
  }
  // subtract sum_j m16[j] * (sum of x over the j-th 32 values from e0), j < 8; m16[8..16) are 0
  RLX_QK void mins8(int64_t e0, const float* m16) {
    const V mv = Isa::load(m16);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) accm[r] = Isa::fma(mv, Isa::load(xs[r] + e0 / 32), accm[r]);
  }
};

struct StoreSink {
  float* y;
  RLX_QK void put(int64_t e, V w) { Isa::store(y + e, w); }
  RLX_QK void put2s(int64_t e, V q0, V q1, const float* sp) {
    const V sv = Isa::set1(*sp);
    Isa::store(y + e, Isa::mul(q0, sv));
    Isa::store(y + e + 16, Isa::mul(q1, sv));
  }
  RLX_QK void put1s(int64_t e, V q, const float* sp) { Isa::store(y + e, Isa::mul(q, Isa::set1(*sp))); }
  RLX_QK void mins8(int64_t e0, const float* m16) {
    for (int j = 0; j < 8; ++j) {
      const V mv = Isa::set1(m16[j]);
      Isa::store(y + e0 + 32 * j, Isa::sub(Isa::load(y + e0 + 32 * j), mv));
      Isa::store(y + e0 + 32 * j + 16, Isa::sub(Isa::load(y + e0 + 32 * j + 16), mv));
    }
  }
};

constexpr int64_t kPrefetchBytes = 1024;

// Rows [j0, j1) of W against MR rows of x, NR weight rows at a time (independent accumulators).
template <QT T, int MR, int NR>
RLX_QK void rows_kernel_impl(const ::rlx::cpu::qgemm_detail::RowsArgs& a, int64_t nb, int64_t j0, int64_t j1) {
  constexpr int64_t BE = Block<T>::elems, BB = Block<T>::bytes;
  int64_t j = j0;
  for (; j + NR <= j1; j += NR) {
    DotSink<MR> s[NR];
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        s[n].acc[r] = Isa::zero();
        s[n].accm[r] = Isa::zero();
        s[n].x[r] = a.x + r * a.ldx;
        s[n].xs[r] = a.xs ? a.xs + r * a.ldxs : nullptr;
      }
    const uint8_t* wr = a.w + j * a.ldw;
    if constexpr (kBatchedScale<T>) {
      for (int64_t b0 = 0; b0 < nb; b0 += 16) {
        const int64_t cnt = nb - b0 < 16 ? nb - b0 : 16;
        alignas(64) float ds[NR][16];
        alignas(64) uint16_t hs[16];
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) {
          for (int i = 0; i < 16; ++i) hs[i] = i < cnt ? ld16(wr + n * a.ldw + (b0 + i) * BB) : 0;
          Isa::store(ds[n], Isa::f16(reinterpret_cast<const uint8_t*>(hs)));
        }
        for (int64_t i = 0; i < cnt; ++i)
#pragma GCC unroll 4
          for (int n = 0; n < NR; ++n) decode_scaled<T>(wr + n * a.ldw + (b0 + i) * BB, (b0 + i) * BE, s[n], &ds[n][i]);
      }
    } else {
      for (int64_t b = 0; b < nb; ++b) {
        // f32 / f16 / bf16: 64-byte lines of each weight row, fetched ahead of the hardware's
        // stream prefetcher (these rows outrun it on one core)
        if constexpr (T == QT::f16 || T == QT::bf16 || T == QT::f32) {
          if ((b * BB) % 64 == 0) {
#pragma GCC unroll 4
            for (int n = 0; n < NR; ++n) __builtin_prefetch(wr + n * a.ldw + b * BB + kPrefetchBytes);
          }
        }
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) decode_block<T>(wr + n * a.ldw + b * BB, b * BE, s[n]);
      }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        float v = Isa::hsum(s[n].acc[r]);
        if constexpr (kUsesXsums<T>) v -= Isa::hsum(s[n].accm[r]);
        a.y[r * a.ldy + j + n] = v;
      }
  }
  for (; j < j1; ++j) {
    DotSink<MR> s;
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      s.acc[r] = Isa::zero();
      s.accm[r] = Isa::zero();
      s.x[r] = a.x + r * a.ldx;
      s.xs[r] = a.xs ? a.xs + r * a.ldxs : nullptr;
    }
    const uint8_t* wr = a.w + j * a.ldw;
    for (int64_t b = 0; b < nb; ++b) decode_block<T>(wr + b * BB, b * BE, s);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      float v = Isa::hsum(s.acc[r]);
      if constexpr (kUsesXsums<T>) v -= Isa::hsum(s.accm[r]);
      a.y[r * a.ldy + j] = v;
    }
  }
}

// Not always_inline: these are the entry points stored in the kernel table.
template <QT T, int MR>
RLX_QK_ENTRY void rows_kernel(const ::rlx::cpu::qgemm_detail::RowsArgs& a, int64_t j0, int64_t j1) {
  // The weights are read as one sequential stream, a row at a time (llama.cpp reads them the
  // same way): on Zen 4 that ran f16 decode 2x faster at batch 1 and 1.6x at batch 4 than
  // interleaving four (two) rows so that each load of x served several rows.
  constexpr int NR = 1;
  // the table counts blocks of the codec (f32/f16/bf16: single values); this file processes
  // those formats 16 values at a time
  int64_t nb = a.nb;
  if constexpr (T == QT::f32 || T == QT::f16 || T == QT::bf16) nb /= 16;
  rows_kernel_impl<T, MR, NR>(a, nb, j0, j1);
}

template <QT T>
RLX_QK_ENTRY void decode_row(const uint8_t* w, int64_t nb, float* y) {
  constexpr int64_t BE = Block<T>::elems, BB = Block<T>::bytes;
  if constexpr (T == QT::f32 || T == QT::f16 || T == QT::bf16) nb /= 16;
  StoreSink s{y};
  for (int64_t b = 0; b < nb; ++b) decode_block<T>(w + b * BB, b * BE, s);
}

template <QT T>
void fill_family(::rlx::cpu::qgemm_detail::QKernelFamily& f) {
  const int t = static_cast<int>(T);
  f.rows[t][0] = rows_kernel<T, 1>;
  f.rows[t][1] = rows_kernel<T, 2>;
  f.rows[t][2] = rows_kernel<T, 3>;
  f.rows[t][3] = rows_kernel<T, 4>;
  f.decode[t] = decode_row<T>;
}

inline ::rlx::cpu::qgemm_detail::QKernelFamily make_family(const char* name, ::rlx::cpu::GemmIsa isa) {
  ::rlx::cpu::qgemm_detail::QKernelFamily f{};
  f.name = name;
  f.isa = isa;
  fill_family<QT::f32>(f);
  fill_family<QT::f16>(f);
  fill_family<QT::bf16>(f);
  fill_family<QT::q4_0>(f);
  fill_family<QT::q4_1>(f);
  fill_family<QT::q5_0>(f);
  fill_family<QT::q5_1>(f);
  fill_family<QT::q8_0>(f);
  fill_family<QT::q2_k>(f);
  fill_family<QT::q3_k>(f);
  fill_family<QT::q4_k>(f);
  fill_family<QT::q5_k>(f);
  fill_family<QT::q6_k>(f);
  fill_family<QT::q8_k>(f);
  fill_family<QT::iq4_nl>(f);
  fill_family<QT::iq4_xs>(f);
  fill_family<QT::int4_g128>(f);
  fill_family<QT::int4_g128_asym>(f);
  return f;
}

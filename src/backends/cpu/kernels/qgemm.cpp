// The quantized-weight kernels' driver: argument checks, run-time ISA choice, threading, the
// fused decode-and-multiply path for few rows of x and the tile + GEMM path for many; plus the
// portable kernel family.
#include "backends/cpu/kernels/qgemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "rlx/checked.h"
#include "rlx/ops.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace qgemm_detail {
namespace {

// The portable family: each block decoded by the scalar codec into a small buffer, then plain
// loops (vectorized by the compiler for the baseline ISA). Only runs on CPUs without AVX2.
template <int MR>
void portable_rows_t(quant::QType t, const RowsArgs& a, int64_t j0, int64_t j1) {
  const uint8_t* w = a.w;
  const int64_t ldw = a.ldw, nb = a.nb, ldx = a.ldx, ldy = a.ldy;
  const float* x = a.x;
  float* y = a.y;
  const quant::QTypeInfo& info = quant::qtype_info(t);
  float buf[256];
  for (int64_t j = j0; j < j1; ++j) {
    float acc[MR] = {};
    for (int64_t b = 0; b < nb; ++b) {
      quant::dequantize_block(t, w + j * ldw + b * info.block_bytes, buf);
      for (int r = 0; r < MR; ++r) {
        const float* xr = x + r * ldx + b * info.block_elems;
        float s = 0.f;
        for (int64_t e = 0; e < info.block_elems; ++e) s += buf[e] * xr[e];
        acc[r] += s;
      }
    }
    for (int r = 0; r < MR; ++r) y[r * ldy + j] = acc[r];
  }
}

template <quant::QType T, int MR>
void portable_rows(const RowsArgs& a, int64_t j0, int64_t j1) {
  portable_rows_t<MR>(T, a, j0, j1);
}

template <quant::QType T>
void portable_decode(const uint8_t* w, int64_t nb, float* y) {
  quant::dequantize_row(T, w, y, nb * quant::qtype_info(T).block_elems);
}

template <quant::QType T>
void fill(QKernelFamily& f) {
  const int t = static_cast<int>(T);
  f.rows[t][0] = portable_rows<T, 1>;
  f.rows[t][1] = portable_rows<T, 2>;
  f.rows[t][2] = portable_rows<T, 3>;
  f.rows[t][3] = portable_rows<T, 4>;
  f.decode[t] = portable_decode<T>;
}

// The int8 linear layer in plain loops (x quants stored as int8).
void portable_i8_rows(const I8Args& a, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    const int8_t* w = a.w + j * a.ldw;
    for (int64_t i = 0; i < a.m; ++i) {
      const int8_t* x = reinterpret_cast<const int8_t*>(a.qx + i * a.ldq);
      int32_t t = 0;
      for (int64_t p = 0; p < a.k; ++p) t += static_cast<int32_t>(x[p]) * w[p];
      a.y[i * a.ldy + j] = static_cast<float>(t) * a.sx[i] * a.ws[j * a.ws_stride] + (a.bias ? a.bias[j] : 0.f);
    }
  }
}

QKernelFamily make_portable() {
  using quant::QType;
  QKernelFamily f{};
  f.name = "portable";
  f.isa = GemmIsa::portable;
  f.i8rows = portable_i8_rows;
  fill<QType::f32>(f);
  fill<QType::f16>(f);
  fill<QType::bf16>(f);
  fill<QType::q4_0>(f);
  fill<QType::q4_1>(f);
  fill<QType::q5_0>(f);
  fill<QType::q5_1>(f);
  fill<QType::q8_0>(f);
  fill<QType::q2_k>(f);
  fill<QType::q3_k>(f);
  fill<QType::q4_k>(f);
  fill<QType::q5_k>(f);
  fill<QType::q6_k>(f);
  fill<QType::q8_k>(f);
  fill<QType::iq4_nl>(f);
  fill<QType::iq4_xs>(f);
  fill<QType::int4_g128>(f);
  fill<QType::int4_g128_asym>(f);
  return f;
}

}  // namespace

bool needs_xsums(quant::QType t) { return t == quant::QType::q4_k || t == quant::QType::q5_k; }

const QKernelFamily* qgemm_portable_family() {
  static const QKernelFamily f = make_portable();
  return &f;
}

}  // namespace qgemm_detail

namespace {

using qgemm_detail::QKernelFamily;
using quant::QType;

#if defined(__x86_64__)
// F16C through CPUID (leaf 1, ECX bit 29): not every compiler's __builtin_cpu_supports knows it.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

bool cpu_has(GemmIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case GemmIsa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma") &&
             has_f16c() && __builtin_cpu_supports("avx2");
    case GemmIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case GemmIsa::portable: return true;
  }
  return false;
#else
  return isa == GemmIsa::portable;
#endif
}

const QKernelFamily* family_for(GemmIsa isa) {
  if (!cpu_has(isa)) return nullptr;
  switch (isa) {
    case GemmIsa::avx512: return qgemm_detail::qgemm_avx512_family();
    case GemmIsa::avx2: return qgemm_detail::qgemm_avx2_family();
    case GemmIsa::portable: return qgemm_detail::qgemm_portable_family();
  }
  return nullptr;
}

const QKernelFamily* best_family() {
  for (GemmIsa isa : {GemmIsa::avx512, GemmIsa::avx2})
    if (const QKernelFamily* f = family_for(isa)) return f;
  return qgemm_detail::qgemm_portable_family();
}

std::atomic<const QKernelFamily*>& current() {
  static std::atomic<const QKernelFamily*> f{best_family()};
  return f;
}

std::atomic<bool> g_qgemm_amx{true};  // set by set_qgemm_amx

// Whether the integer products run on the AMX-INT8 kernels with family f (see set_qgemm_amx):
// the tiles go with the avx512 family's VNNI kernels, whose packing and epilogues they share.
bool uses_qgemm_amx(const QKernelFamily* f) {
  return f->i8panel && f->isa == GemmIsa::avx512 && g_qgemm_amx.load(std::memory_order_relaxed) &&
         gemm_detail::amx_int8_supported();
}

// A per-thread f32 scratch that only grows (so steady-state calls allocate nothing).
float* scratch(size_t floats) {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float, Free> buf;
  thread_local size_t cap = 0;
  if (floats > cap) {
    const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    buf.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    cap = buf ? floats : 0;
  }
  return buf.get();
}

// f32 / f16 / bf16 rows are processed 16 values at a time; other lengths take the scalar codec.
bool vector_ok(QType t, int64_t k) { return quant::qtype_info(t).block_elems > 1 || k % 16 == 0; }

// Decodes `count` values starting at value `first` of row `row` (first and count are multiples
// of the block size, or any values for single-value formats).
void decode_slice(const QKernelFamily* fam, QType t, const uint8_t* row, int64_t first, int64_t count, float* out) {
  const quant::QTypeInfo& info = quant::qtype_info(t);
  const uint8_t* p = row + first / info.block_elems * info.block_bytes;
  if (vector_ok(t, count)) {
    fam->decode[static_cast<int>(t)](p, count / info.block_elems, out);
  } else {
    quant::dequantize_row(t, p, out, count);
  }
}

constexpr int64_t kPanelRows = 64;     // weight rows per tile
constexpr int64_t kPanelDepth = 1024;  // values per tile row (a multiple of every block size)

Status check(const QGemmArgs& a) {
  auto bad = [](const char* what) { return error(ErrorCode::invalid_argument, "qgemm: ", what); };
  if (a.m < 0 || a.n < 0) return bad("negative m or n");
  if (a.m == 0 || a.n == 0) return Status::ok();
  auto rb = quant::row_bytes(a.type, a.k);
  if (!rb)
    return error(ErrorCode::invalid_argument, "qgemm: k = ", a.k, " is not a positive multiple of the ",
                 quant::qtype_name(a.type), " block (", quant::qtype_info(a.type).block_elems, ")");
  if (!a.x || !a.w || !a.y) return bad("null pointer");
  if (a.ldx < a.k) return bad("ldx < k");
  if (a.ldw < *rb) return bad("ldw is shorter than a row of blocks");
  if (a.ldy < a.n) return bad("ldy < n");
  return Status::ok();
}

// Sums of each row's 32-value chunks, then 16 zeros (RowsArgs::xs), into the caller's scratch.
const float* chunk_sums(const QGemmArgs& a, int64_t& ld) {
  ld = a.k / 32 + 16;
  float* xs = scratch(static_cast<size_t>(a.m * ld));
  if (!xs) return nullptr;
  for (int64_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.ldx;
    for (int64_t c = 0; c < a.k / 32; ++c) {
      float s = 0.f;
      for (int p = 0; p < 32; ++p) s += x[32 * c + p];
      xs[i * ld + c] = s;
    }
    for (int64_t c = a.k / 32; c < ld; ++c) xs[i * ld + c] = 0.f;
  }
  return xs;
}

void fused(const QKernelFamily* fam, const QGemmArgs& a, const float* xs, int64_t ldxs, int64_t j0, int64_t j1) {
  const int t = static_cast<int>(a.type);
  const int64_t nb = a.k / quant::qtype_info(a.type).block_elems;
  // more rows than one call takes: spans of about 128 KiB of weights, each read from memory by
  // the first group of rows and from L2 by the others
  const int64_t span = a.m <= kQGemmFusedMaxRows ? j1 - j0 : std::max<int64_t>(4, (int64_t{128} << 10) / a.ldw);
  for (int64_t jb = j0; jb < j1; jb += span) {
    const int64_t je = std::min(j1, jb + span);
    for (int64_t i = 0; i < a.m; i += kQGemmFusedMaxRows) {
      const int64_t mr = std::min<int64_t>(kQGemmFusedMaxRows, a.m - i);
      const qgemm_detail::RowsArgs r{a.w, a.ldw, nb, a.x + i * a.ldx, a.ldx, xs ? xs + i * ldxs : nullptr, ldxs,
                                     a.y + i * a.ldy, a.ldy};
      fam->rows[t][mr - 1](r, jb, je);
    }
  }
}

// Odd-length f32 / f16 / bf16 rows: decode each weight row, then dot products.
void scalar_rows(const QGemmArgs& a, int64_t j0, int64_t j1) {
  float* row = scratch(static_cast<size_t>(a.k));
  for (int64_t j = j0; j < j1; ++j) {
    quant::dequantize_row(a.type, a.w + j * a.ldw, row, a.k);
    for (int64_t i = 0; i < a.m; ++i) {
      const float* x = a.x + i * a.ldx;
      float s = 0.f;
      for (int64_t p = 0; p < a.k; ++p) s += x[p] * row[p];
      a.y[i * a.ldy + j] = s;
    }
  }
}

// The integer path (qgemm_q8.h): x's rows quantized to Q8_0-style int8 blocks of 32 into the
// caller's scratch (quants, then per-block scales, then for q4_0 the scaled quant sums).
qgemm_detail::Q8RowsFn q8_kernel(const QKernelFamily* fam, QType t, int64_t m) {
  if (m < 1 || m > kQGemmFusedMaxRows) return nullptr;
  return fam->q8rows[static_cast<int>(t)][m - 1];
}

// Rows [i0, i1) of x to int8 blocks of 32 in the portable loop (the vector kernels' q8quant
// does the same arithmetic): d = amax / 127, q = round_half_even(x / d), and cx = d * sum(q)
// (plain_sums) or 8 * d * sum(q) (q4_0's -8 offset).
void quantize_rows_portable(const float* xs, int64_t ldx, int64_t nb, int64_t i0, int64_t i1, int8_t* qx, int64_t ldq,
                            float* dx, float* cx, int64_t ldd, bool plain_sums) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* x = xs + i * ldx;
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + 32 * b;
      float amax = 0.f;
      for (int p = 0; p < 32; ++p) amax = std::max(amax, std::fabs(xb[p]));
      const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      int8_t* qb = qx + i * ldq + 32 * b;
      int sum = 0;
      // round to nearest even (= nearbyint for |x * id| <= 127) without a libm call per value:
      // adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits
      for (int p = 0; p < 32; ++p) {
        const int v = static_cast<int>((xb[p] * id + 12582912.f) - 12582912.f);
        qb[p] = static_cast<int8_t>(v);
        sum += v;
      }
      dx[i * ldd + b] = d;
      cx[i * ldd + b] = (plain_sums ? 1.f : 8.f) * d * static_cast<float>(sum);
    }
  }
}

// The integer path's arguments: x's rows quantized to int8 blocks into the caller's scratch
// (quants, then per-block scales, then the scaled quant sums; rows split over the pool when
// there are many), with a's weights and output.
bool quantize_x(const QKernelFamily* fam, const QGemmArgs& a, qgemm_detail::Q8Args& q) {
  const int64_t nb = a.k / 32;
  // (rows padded to a multiple of 16: the AMX tiles load 16 rows at a time)
  const int64_t qfloats = ((a.m + 15) / 16 * 16 * a.k + 3) / 4;
  float* buf = scratch(static_cast<size_t>(qfloats + 2 * a.m * nb));
  if (!buf) return false;
  int8_t* qx = reinterpret_cast<int8_t*>(buf);
  float* dx = buf + qfloats;
  float* cx = dx + a.m * nb;
  // q4_k's (and int4_g128_asym's) mins take the sum of the rounded x (llama.cpp's Q8_K bsums),
  // so the result is exactly W times the rounded x
  const bool plain_sums = a.type == QType::q4_k || a.type == QType::int4_g128_asym;
  qgemm_detail::Q8QuantFn quant = fam->q8quant ? fam->q8quant : quantize_rows_portable;
  const int64_t grain = std::max<int64_t>(4, 65536 / a.k);
  if (a.m <= grain) {
    quant(a.x, a.ldx, nb, 0, a.m, qx, a.k, dx, cx, nb, plain_sums);
  } else {
    ThreadPool::global().parallel_for(a.m, grain, [&](int64_t i0, int64_t i1) {
      quant(a.x, a.ldx, nb, i0, i1, qx, a.k, dx, cx, nb, plain_sums);
    });
  }
  q.w = a.w;
  q.ldw = a.ldw;
  q.y = a.y;
  q.ldy = a.ldy;
  q.nb = nb;
  q.qx = qx;
  q.ldq = a.k;
  q.dx = dx;
  q.cx = cx;
  q.ldd = nb;
  return true;
}

// Many rows of x on the integer path: x quantized once, then panels of weight rows, each task
// running the family's panel kernel (which repacks its panel) over every row of x. A panel is
// sized so that its repacked form (about k bytes per row) stays in L2, and there are at least
// two per thread.
Status integer_prefill(const QKernelFamily* fam, const QGemmArgs& a) {
  qgemm_detail::Q8Args q{};
  if (!quantize_x(fam, a, q)) return error(ErrorCode::runtime_error, "qgemm: out of memory for quantized x");
  const qgemm_detail::Q8PanelFn amx = fam->q8panel_amx[static_cast<int>(a.type)];
  const qgemm_detail::Q8PanelFn panel = amx && uses_qgemm_amx(fam) ? amx : fam->q8panel[static_cast<int>(a.type)];
  ThreadPool& pool = ThreadPool::global();
  int64_t rows = std::clamp<int64_t>((int64_t{192} << 10) / a.k, 8, 128);
  rows = std::min(rows, (a.n + 2 * pool.size() - 1) / (2 * pool.size()));
  rows = std::max<int64_t>(16, (rows + 15) / 16 * 16);  // whole groups of the 8- and 16-row kernels
  const int64_t panels = (a.n + rows - 1) / rows;
  pool.run(panels, [&](int64_t task, int) { panel(q, a.m, task * rows, std::min(a.n, (task + 1) * rows)); });
  return Status::ok();
}

// Rows of W that are worth one task: enough bytes to amortize waking a thread.
int64_t row_grain(int64_t row_bytes, int64_t m) {
  const int64_t per = std::max<int64_t>(1, row_bytes * std::max<int64_t>(1, m));
  return std::max<int64_t>(4, (int64_t{1} << 16) / per);
}

}  // namespace

std::optional<quant::QType> qgemm_format(std::string_view format) {
  if (!quant_format(format)) return std::nullopt;  // only the ops table's formats
  return quant::qtype_from_name(format);
}

Status qgemm(const QGemmArgs& a) {
  RLX_TRY(check(a));
  if (a.m == 0 || a.n == 0) return Status::ok();
  const QKernelFamily* fam = current().load(std::memory_order_relaxed);
  ThreadPool& pool = ThreadPool::global();
  const int64_t rb = *quant::row_bytes(a.type, a.k);
  if (!vector_ok(a.type, a.k)) {
    pool.parallel_for(a.n, row_grain(rb, a.m), [&](int64_t j0, int64_t j1) { scalar_rows(a, j0, j1); });
    return Status::ok();
  }
  if (a.m > kQGemmFusedMaxRows && fam->q8panel[static_cast<int>(a.type)]) return integer_prefill(fam, a);
  if (qgemm_detail::Q8RowsFn q8 = q8_kernel(fam, a.type, a.m)) {
    qgemm_detail::Q8Args q{};
    if (!quantize_x(fam, a, q)) return error(ErrorCode::runtime_error, "qgemm: out of memory for quantized x");
    // contiguous chunks, one per thread, unless a chunk would be too small to be worth a wake-up
    const int64_t grain = std::max(row_grain(rb, a.m), (a.n + pool.size() - 1) / std::max(1, pool.size()));
    if (a.n <= grain) {
      q8(q, 0, a.n);
    } else {
      pool.parallel_for(a.n, grain, [&](int64_t j0, int64_t j1) { q8(q, j0, j1); });
    }
    return Status::ok();
  }
  if (a.m <= kQGemmFusedDecodeRows) {
    const float* xs = nullptr;
    int64_t ldxs = 0;
    if (qgemm_detail::needs_xsums(a.type) && fam->isa != GemmIsa::portable) {
      xs = chunk_sums(a, ldxs);
      if (!xs) return error(ErrorCode::runtime_error, "qgemm: out of memory for x's chunk sums");
    }
    const int64_t grain = row_grain(rb, a.m);
    if (a.n <= grain) {
      fused(fam, a, xs, ldxs, 0, a.n);
    } else {
      pool.parallel_for(a.n, grain, [&](int64_t j0, int64_t j1) { fused(fam, a, xs, ldxs, j0, j1); });
    }
    return Status::ok();
  }
  // Many rows of x: decode a panel of weight rows into an f32 tile (reused by every row of x)
  // and multiply it with the f32 GEMM, one panel per task.
  const int64_t panels = (a.n + kPanelRows - 1) / kPanelRows;
  std::atomic<bool> failed{false};
  Status first_error;
  std::atomic<int> error_claimed{0};
  pool.run(panels, [&](int64_t task, int) {
    const int64_t j0 = task * kPanelRows, nr = std::min(kPanelRows, a.n - j0);
    float* tile = scratch(static_cast<size_t>(kPanelRows * kPanelDepth));
    if (!tile) {
      failed = true;
      return;
    }
    for (int64_t k0 = 0; k0 < a.k; k0 += kPanelDepth) {
      const int64_t kc = std::min(kPanelDepth, a.k - k0);
      for (int64_t r = 0; r < nr; ++r) decode_slice(fam, a.type, a.w + (j0 + r) * a.ldw, k0, kc, tile + r * kc);
      GemmArgs g;
      g.m = a.m;
      g.n = nr;
      g.k = kc;
      g.a = a.x + k0;
      g.lda = a.ldx;
      g.b = tile;
      g.ldb = kc;
      g.trans_b = true;
      g.c = a.y + j0;
      g.ldc = a.ldy;
      g.beta = k0 == 0 ? 0.f : 1.f;
      Status s = sgemm(g);
      if (!s.is_ok() && error_claimed.fetch_add(1) == 0) {
        first_error = s;
        failed = true;
      }
    }
  });
  if (failed) return first_error.is_ok() ? error(ErrorCode::runtime_error, "qgemm: out of memory for the f32 tile") : first_error;
  return Status::ok();
}

Status dequantize_rows(QType type, const uint8_t* w, int64_t rows, int64_t cols, float* y) {
  if (rows < 0) return error(ErrorCode::invalid_argument, "dequantize: negative row count");
  if (rows == 0) return Status::ok();
  auto rb = quant::row_bytes(type, cols);
  if (!rb)
    return error(ErrorCode::invalid_argument, "dequantize: ", cols, " is not a positive multiple of the ",
                 quant::qtype_name(type), " block");
  if (!w || !y) return error(ErrorCode::invalid_argument, "dequantize: null pointer");
  const QKernelFamily* fam = current().load(std::memory_order_relaxed);
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) decode_slice(fam, type, w + r * *rb, 0, cols, y + r * cols);
  };
  const int64_t grain = row_grain(*rb, 4);
  if (rows <= grain) {
    body(0, rows);
  } else {
    ThreadPool::global().parallel_for(rows, grain, body);
  }
  return Status::ok();
}

PackedI8 pack_i8(const int8_t* w, int64_t ldw, int64_t n, int64_t k) {
  PackedI8 p;
  const QKernelFamily* fam = current().load(std::memory_order_relaxed);
  if (!fam->i8panel || !fam->i8_offset_x || !w || n < 1 || k < 1 || k > kI8GemmMaxK || ldw < k) return p;
  p.n_ = n;
  p.k_ = k;
  const int64_t quads = p.quads(), panels = p.panels();
  const size_t bytes = static_cast<size_t>(panels) * static_cast<size_t>(quads) * 128;
  p.data_.reset(static_cast<int8_t*>(std::aligned_alloc(64, bytes)));
  if (!p.data_) return p;
  p.sums_.assign(static_cast<size_t>(panels * 32), 0);  // padded: the kernel loads whole vectors
  auto body = [&](int64_t p0, int64_t p1) {
    for (int64_t pi = p0; pi < p1; ++pi) {
      int8_t* dst = p.data_.get() + pi * quads * 128;
      for (int64_t c = 0; c < 32; ++c) {
        const int64_t j = pi * 32 + c;
        int32_t sum = 0;
        for (int64_t q = 0; q < quads; ++q)
          for (int64_t e = 0; e < 4; ++e) {
            const int64_t at = 4 * q + e;
            const int8_t v = j < n && at < k ? w[j * ldw + at] : 0;
            dst[q * 128 + 4 * c + e] = v;
            sum += v;
          }
        p.sums_[static_cast<size_t>(j)] = sum;
      }
    }
  };
  ThreadPool::global().parallel_for(panels, 1, body);
  return p;
}

bool I8Quants::reserve(int64_t m, int64_t k, int64_t ldq, float x_scale, int offset) {
  // (rows padded to a multiple of 16: the AMX tiles load 16 rows at a time)
  const size_t bytes = static_cast<size_t>((m + 15) / 16 * 16 * ldq + 4 * m + 64);
  if (bytes > cap_) {
    data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    cap_ = data_ ? bytes : 0;
    if (!data_) return false;
  }
  m_ = m;
  k_ = k;
  ldq_ = ldq;
  x_scale_ = x_scale;
  offset_ = offset;
  return true;
}

namespace {

// Rows [i0, i1) of x quantized to qx (row stride ldq, plus `offset`) with scales sx[i]: per
// tensor with x_scale, per row when it is 0.
void quantize_x_rows(const QKernelFamily* fam, const float* xs, int64_t ldx, int64_t k, float x_scale, int offset,
                     int64_t i0, int64_t i1, uint8_t* qx, int64_t ldq, float* sx) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* x = xs + i * ldx;
    uint8_t* q = qx + i * ldq;
    if (fam->i8quant) {
      sx[i] = fam->i8quant(x, k, x_scale, q);
      continue;
    }
    float s = x_scale;
    if (s == 0.f) {
      float amax = 0.f;
      for (int64_t p = 0; p < k; ++p) amax = std::max(amax, std::fabs(x[p]));
      s = std::max(amax / 127.f, 1e-30f);
    }
    sx[i] = s;
    // x / s (a division, as the reference decomposition does), clamped, then rounded to
    // nearest even by the 1.5 * 2^23 trick (exact for |v| <= 127)
    for (int64_t p = 0; p < k; ++p) {
      const float v = std::min(127.f, std::max(-127.f, x[p] / s));
      q[p] = static_cast<uint8_t>(static_cast<int>((v + 12582912.f) - 12582912.f) + offset);
    }
  }
}

}  // namespace

Status i8gemm(const I8GemmArgs& a) {
  auto bad = [](const char* what) { return error(ErrorCode::invalid_argument, "i8gemm: ", what); };
  if (a.m < 0 || a.n < 0 || a.k < 1) return bad("m, n must be >= 0 and k >= 1");
  if (a.m == 0 || a.n == 0) return Status::ok();
  if (a.k > kI8GemmMaxK)
    return error(ErrorCode::invalid_argument, "i8gemm: k = ", a.k, " is over ", kI8GemmMaxK,
                 " (the int32 sums of the products could overflow)");
  const QKernelFamily* fam = current().load(std::memory_order_relaxed);
  const bool panel = a.packed && a.packed->valid() && fam->i8panel && fam->i8_offset_x;
  if (!a.x || (!a.w && !panel) || !a.w_scale || !a.y) return bad("null pointer");
  if (a.ldx < a.k || (!panel && a.ldw < a.k) || a.ldy < a.n) return bad("a leading dimension is shorter than its row");
  if (panel && (a.packed->n() != a.n || a.packed->k() != a.k)) return bad("the packed weights are not [n, k]");
  if (!(a.x_scale >= 0.f) || !std::isfinite(a.x_scale)) return bad("x_scale must be 0 (per token) or positive");
  // x's quants (k bytes a row, 64-byte aligned rows, so the panel kernel may read whole quads
  // past k: their weights are zero) and per-row scales, in the caller's I8Quants or in scratch
  // memory; the worker threads only read them
  // (rows padded to a multiple of 16: the AMX tiles load 16 rows at a time)
  const int64_t ldq = (a.k + 63) / 64 * 64;
  const int offset = fam->i8_offset_x ? 128 : 0;
  if (a.y_quants && a.ldy != a.n) return bad("y_quants needs ldy == n");
  if (a.x_quants_ready && (!a.x_quants || a.x_quants->m_ != a.m || a.x_quants->k_ != a.k ||
                           a.x_quants->x_scale_ != a.x_scale))
    return bad("x_quants do not hold this x's rows");
  uint8_t* qx;
  float* sx;
  const bool have_quants = a.x_quants_ready && a.x_quants->offset_ == offset;
  if (a.x_quants) {
    if (!have_quants && !a.x_quants->reserve(a.m, a.k, ldq, a.x_scale, offset))
      return error(ErrorCode::runtime_error, "i8gemm: out of memory for quantized x");
    qx = a.x_quants->data_.get();
    sx = reinterpret_cast<float*>(qx + (a.m + 15) / 16 * 16 * ldq);
  } else {
    const int64_t qfloats = (a.m + 15) / 16 * 16 * ldq / 4;
    float* buf = scratch(static_cast<size_t>(qfloats + a.m));
    if (!buf) return error(ErrorCode::runtime_error, "i8gemm: out of memory for quantized x");
    qx = reinterpret_cast<uint8_t*>(buf);
    sx = buf + qfloats;
  }
  ThreadPool& pool = ThreadPool::global();
  if (!have_quants) {
    auto quantize_rows = [&](int64_t i0, int64_t i1) {
      quantize_x_rows(fam, a.x, a.ldx, a.k, a.x_scale, offset, i0, i1, qx, ldq, sx);
    };
    const int64_t qgrain = std::max<int64_t>(1, 16384 / a.k);
    if (a.m <= qgrain) {
      quantize_rows(0, a.m);
    } else {
      pool.parallel_for(a.m, qgrain, quantize_rows);
    }
  }
  // y's quants for the next call, made as blocks of rows are final (or after all of y)
  uint8_t* qy = nullptr;
  float* sy = nullptr;
  const int64_t ldqy = (a.n + 63) / 64 * 64;
  if (a.y_quants) {
    if (!a.y_quants->reserve(a.m, a.n, ldqy, a.y_x_scale, offset))
      return error(ErrorCode::runtime_error, "i8gemm: out of memory for quantized y");
    qy = a.y_quants->data_.get();
    sy = reinterpret_cast<float*>(qy + (a.m + 15) / 16 * 16 * ldqy);
  }
  auto quantize_y = [&](int64_t i0, int64_t i1) {
    quantize_x_rows(fam, a.y, a.ldy, a.n, a.y_x_scale, offset, i0, i1, qy, ldqy, sy);
  };
  auto quantize_all_y = [&] {
    if (!qy) return;
    const int64_t grain = std::max<int64_t>(1, 16384 / a.n);
    if (a.m <= grain) {
      quantize_y(0, a.m);
    } else {
      pool.parallel_for(a.m, grain, quantize_y);
    }
  };
  const int64_t ws_stride = a.w_scale_per_row ? 1 : 0;
  const GemmEpilogue& ep = a.epilogue;
  if (panel) {
    const qgemm_detail::I8PanelFn panel_fn = uses_qgemm_amx(fam) ? qgemm_detail::i8_panel_amx : fam->i8panel;
    constexpr int64_t kChunk = 96;  // a multiple of 16, as i8_panel_amx needs
    const int64_t chunks = (a.m + kChunk - 1) / kChunk, panels = a.packed->panels();
    auto panel_rows = [&](int64_t p, int64_t i0, int64_t i1) {
      const int64_t j0 = 32 * p;
      const qgemm_detail::I8PanelArgs pa{qx, ldq, sx, a.packed->panel(p), a.packed->quads(), a.packed->sums() + j0,
                                         a.w_scale + j0 * ws_stride, ws_stride, a.bias ? a.bias + j0 : nullptr,
                                         a.y + j0, a.ldy, std::min<int64_t>(32, a.n - j0)};
      panel_fn(pa, i0, i1);
    };
    if (chunks >= 2 * pool.size()) {
      // enough chunks of rows for every thread: a unit is a chunk across all the panels, so
      // the chunk's quants stay in L1/L2 while the packed weights stream from L2, and the
      // epilogue runs over whole rows (over 32-column pieces it cost MiniLM's int8 GELU twice
      // its time: 12.3 against 8.4 ms for FFN1 and FFN2 of equal work at batch 32)
      auto rows = [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t i0 = c * kChunk, i1 = std::min(a.m, i0 + kChunk);
          for (int64_t p = 0; p < panels; ++p) panel_rows(p, i0, i1);
          if (ep.fn) ep.fn(ep.ctx, a.y + i0 * a.ldy, a.ldy, i0, 0, i1 - i0, a.n);
          if (qy) quantize_y(i0, i1);  // whole rows, final and still in L2
        }
      };
      pool.parallel_for(chunks, 1, rows);
      return Status::ok();
    }
    // otherwise units of (panel, chunk of rows), so that few rows still spread over the
    // threads; consecutive units share the panel
    auto body = [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t p = u / chunks, i0 = u % chunks * kChunk, i1 = std::min(a.m, i0 + kChunk), j0 = 32 * p;
        panel_rows(p, i0, i1);
        if (ep.fn) ep.fn(ep.ctx, a.y + i0 * a.ldy + j0, a.ldy, i0, j0, i1 - i0, std::min<int64_t>(32, a.n - j0));
      }
    };
    const int64_t units = chunks * panels;
    if (units == 1 || pool.size() == 1) {
      body(0, units);
    } else {
      pool.parallel_for(units, 1, body);
    }
    quantize_all_y();
    return Status::ok();
  }
  qgemm_detail::I8Args k{a.m, a.k, qx, ldq, sx, a.w, a.ldw, a.w_scale, ws_stride, a.bias, a.y, a.ldy};
  auto rows = [&](int64_t j0, int64_t j1) {
    fam->i8rows(k, j0, j1);
    if (ep.fn) ep.fn(ep.ctx, a.y + j0, a.ldy, 0, j0, a.m, j1 - j0);
  };
  const int64_t grain = std::max(row_grain(a.k, a.m), (a.n + pool.size() - 1) / std::max(1, pool.size()));
  if (a.n <= grain) {
    rows(0, a.n);
  } else {
    pool.parallel_for(a.n, grain, rows);
  }
  quantize_all_y();
  return Status::ok();
}

bool qgemm_quantizes_x(QType t, int64_t m) {
  const QKernelFamily* fam = current().load(std::memory_order_relaxed);
  if (m > kQGemmFusedMaxRows) return fam->q8panel[static_cast<int>(t)] != nullptr;
  return q8_kernel(fam, t, m) != nullptr;
}

const char* qgemm_path_name(QType t, int64_t m) {
  if (m <= kQGemmFusedMaxRows) return "fused decode";
  const QKernelFamily* fam = current().load(std::memory_order_relaxed);
  if (fam->q8panel_amx[static_cast<int>(t)] && uses_qgemm_amx(fam)) return "integer panels on amx-int8 tiles";
  if (fam->q8panel[static_cast<int>(t)]) return "integer panels";
  return m <= kQGemmFusedDecodeRows ? "fused decode" : "f32 tiles + gemm";
}

const char* qgemm_kernel_name() { return current().load()->name; }

bool set_qgemm_amx(bool enable) {
  if (enable && !gemm_detail::amx_int8_supported()) return false;
  g_qgemm_amx.store(enable, std::memory_order_relaxed);
  return true;
}

bool qgemm_amx() { return uses_qgemm_amx(current().load(std::memory_order_relaxed)); }

bool set_qgemm_isa(GemmIsa isa) {
  const QKernelFamily* f = family_for(isa);
  if (!f) return false;
  current().store(f);
  return true;
}

}  // namespace rlx::cpu

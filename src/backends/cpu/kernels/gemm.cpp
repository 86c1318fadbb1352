// The GEMM driver: argument checks, kernel-family dispatch, B packing, cache blocking, and
// the split of the work over the thread pool. The micro-kernels live in gemm_<isa>.cpp.
// Element types (f32, f16, bf16 per operand) are a parameter of the packing and micro-kernel
// layer: the driver only moves pointers by the element size and picks the table entries.
//
// Loop structure (per batch item), BLIS style with the roles of A and B suited to row-major C
// and vectors along N:
//   tile of C (rows m0..m1, columns n0..n1: one claim of micro-panels in a column tile)
//     for each K block of kc rows               B block kc x (n1-n0) stays in L2
//       for each MR rows of the tile            A micro-panel (MR x kc) stays in L1
//         for each 32 (or 64) columns           B micro-panel streams from L2
//           micro-kernel (with the bias on the last K block)
//         on the last K block: the epilogue on these MR rows of the tile
// A micro-panels are packed k-major into a thread-local buffer when the sweep over columns is
// long enough to repay it (or A is transposed, where packing is a copy); otherwise the kernels
// read row-major A in place. B is read in place when it is row-major and either few rows of C
// use it, or it fits in L2 and a moderate number do; otherwise it is packed once per call into
// 32-column panels shared by all threads (or was pre-packed by pack_b).
//
// 16-bit operands: A is always packed (widened to f32 as it is packed). B keeps its type in
// place and in its panels, and the kernels widen it as they load it. (Widening each tile's
// block of B to f32 once per K block instead, for M >= 32, was measured slower: 0.93-1.05x of
// f32 against 1.03-1.22x, one thread, same run; the 16-bit block is half the L2 traffic.) A
// 16-bit C is accumulated in a thread-local f32 block (rows of the tile in chunks of
// kNarrowCRows), and each micro-block is rounded into C once it is finished, after bias and
// before the epilogue, so the epilogue sees C's stored values.
//
// A and B both bf16, on a family with AVX-512 BF16 kernels (see set_gemm_bf16_dot): A is
// packed as bf16 pairs instead of widened, and the dot_bf16 kernels replace the ones indexed
// by B's type; everything else (B modes, blocking, C scratch, bias, epilogue) is the same.
//
// A and B both bf16 where the AMX tiles run (uses_amx) go to compute_block_amx instead: the
// same tiles, K blocks, C scratch and epilogue, with row units of 32 rows (two 16-row tile
// slices) aligned to the product's first row, so that every block but the last is whole and
// its f32 C is loaded into and stored from the tiles directly. B is in the tiles' pair layout:
// pre-packed that way (pack_b_for), or packed so by the call (shared, or block by block in each
// tile; never read in place: the tiles need the pairs, and interleaving a block once per tile
// costs less than the vdpbf16ps kernels' interleave on every load).
#include "backends/cpu/kernels/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/huge_page_memory.h"
#include "rlx/checked.h"
#include "rlx/dtype.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
using gemm_detail::KernelFamily;
using gemm_detail::kPanel;
using gemm_detail::MicroArgs;
using gemm_detail::MicroKernel;
using gemm_detail::RowDots;

void PackedB::Free::operator()(void* p) const { huge_page_free(p); }

const char* gemm_type_name(GemmType t) {
  switch (t) {
    case GemmType::f32: return "f32";
    case GemmType::f16: return "f16";
    case GemmType::bf16: return "bf16";
  }
  return "?";
}

namespace {

// ---------------------------------------------------------------------------------------
// Kernel family selection.

const KernelFamily* detect_family() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (gemm_detail::avx512_family() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
    return gemm_detail::avx512_family();
  if (gemm_detail::avx2_family() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return gemm_detail::avx2_family();
#endif
  return gemm_detail::portable_family();
}

// Function-local so that a GEMM from another file's static initializer still finds it.
const KernelFamily* best_family() {
  static const KernelFamily* const best = detect_family();
  return best;
}

std::atomic<const KernelFamily*> g_family{nullptr};  // set by set_gemm_isa
std::atomic<bool> g_bf16_dot{true};                  // set by set_gemm_bf16_dot
std::atomic<bool> g_amx{true};                       // set by set_gemm_amx

const KernelFamily& family() {
  const KernelFamily* f = g_family.load(std::memory_order_relaxed);
  return f ? *f : *best_family();
}

int ti(GemmType t) { return static_cast<int>(t); }

// The family that runs a product whose B has type b: the selected one, or the portable one
// where the selected one cannot widen b on this CPU (f16 without F16C).
const KernelFamily& family_for(GemmType b) {
  const KernelFamily& f = family();
  return f.kernel[ti(b)][0][1][0] ? f : *gemm_detail::portable_family();
}

// Whether family f runs a product of these operand types on its bf16-pair kernels.
bool uses_dot(const KernelFamily& f, GemmType a, GemmType b) {
  return a == GemmType::bf16 && b == GemmType::bf16 && f.dot_bf16[1][0] &&
         g_bf16_dot.load(std::memory_order_relaxed);
}

// Whether products of these types run on the AMX tiles (the tiles belong with the AVX-512
// family: selecting another family for a test turns them off too): bf16 x bf16, and f16 x f16
// with each f16 operand as two bf16 parts (gemm_detail::amx_pack_a_f16).
bool uses_amx(GemmType a, GemmType b) {
  return a == b && (a == GemmType::bf16 || a == GemmType::f16) && g_amx.load(std::memory_order_relaxed) &&
         family().isa == GemmIsa::avx512 && gemm_detail::amx_bf16_supported();
}

// bf16 matrices an operand of type t is the sum of on the AMX tiles: 2 for f16 (hi and lo).
int amx_parts(GemmType t) { return t == GemmType::f16 ? 2 : 1; }

// Whether a product of m rows (m < 0: not known, as when a weight is packed) and depth k with
// these types runs on the tiles. f16 only from 32 rows on (its four products per pair of
// values lose to the widening kernels on few rows: 0.6-0.7x of them at m = 1, 1.3-1.9x f32 at
// m = 128, bench/gemm_bench.cpp --narrow). Both types only when the product fills at least a
// quarter of a tile's 16 rows x 32 k-values: on a Sapphire Rapids core, one thread, B
// unpacked, the tiles took 1.1-2.5x the vdpbf16ps kernels' time below that (m = 1, 2, 3; 8 rows
// at k = 9 and 12, tinyconv's conv1 per image), 0.5-0.9x above it (m = 4 at k = 64 and 384, 8
// rows at k = 24 and 100, 128 rows at k = 10); at a quarter, 8 rows at k = 16 1.1x, 72 at k = 8
// 1.0x. A weight (packed once, `weight`) is filled by k alone: the rows of its calls vary, and
// on a pre-packed B the tiles ran 0.9-1.3x the vdpbf16ps kernels even at m = 1.
bool amx_for(GemmType a, GemmType b, int64_t m, int64_t k, bool weight = false) {
  if (!uses_amx(a, b) || k <= 0 || (a == GemmType::f16 && m >= 0 && m < 32)) return false;
  const double rows = m <= 0 || weight ? 1.0 : static_cast<double>(m) / static_cast<double>((m + 15) / 16 * 16);
  const double depth = static_cast<double>(k) / static_cast<double>((k + 31) / 32 * 32);
  return rows * depth >= 0.25;
}

// ---------------------------------------------------------------------------------------
// Tuning constants (measured on an AVX-512 Xeon with 48 KiB L1d and 2 MiB L2 per core).

// Most rows of B per K block: the A micro-panel (14 x kc floats, 21 KiB) stays in L1.
constexpr int64_t kKcMax = 384;
// Bytes of the B block (kc rows x tile columns) meant to stay in L2.
constexpr int64_t kL2BlockBytes = 1 << 20;
// Row-major B is read in place (not packed) when each thread has at most this many rows of
// C, so that packing would cost more than it saves...
constexpr int64_t kDirectBMaxRows = 32;
// ... or when B is small enough to stay in L2 anyway, and each thread has at most this many
// rows: beyond them the packed panels' contiguous reads repay packing (1024 x 784 x 128, the
// MNIST MLP's layer, ran 1.17-1.22x faster on pre-packed B in bench/gemm_bench.cpp's train group).
constexpr int64_t kDirectBMaxBytes = 512 << 10;
constexpr int64_t kDirectBSmallMaxRows = 64;
// Row-major A micro-panels are packed when a tile spans at least this many columns.
constexpr int64_t kPackAMinCols = 256;
// Products with fewer multiply-adds than this run on one thread.
constexpr double kSerialMaxFma = 1 << 18;
// Work units per thread wanted at least (the units are claimed in shrinking ranges, see
// make_plan): fewer rows than that make the planner split the columns further.
constexpr int64_t kMinUnitsPerThread = 4;
// Largest packed-B scratch per call (in elements); wider products are processed in column
// chunks.
constexpr int64_t kMaxScratchFloats = int64_t{1} << 23;
// Rows of a 16-bit C accumulated in f32 scratch at a time: 2 * lcm(4, 6, 14), a multiple of
// every family's mr_max, so each chunk starts where a micro-panel of the tile does.
constexpr int64_t kNarrowCRows = 168;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// AMX blocks: 32 rows (two 16-row slices of A) by 32 columns (one packed panel), k in steps of
// 32; 16-bit C is accumulated in row chunks of kAmxNarrowCRows (a multiple of 32).
constexpr int64_t kAmxRows = 32;
constexpr int64_t kAmxK = 32;
constexpr int64_t kAmxNarrowCRows = 160;
int64_t amx_kp(int64_t kc) { return ceil_div(kc, kAmxK) * kAmxK; }
// Rows of a B of k rows packed in the pair layout with K blocks of kc (each rounded up to 32).
int64_t amx_k_rows(int64_t k, int64_t kc) {
  const int64_t nkb = ceil_div(k, kc);
  return (nkb - 1) * amx_kp(kc) + amx_kp(k - (nkb - 1) * kc);
}

// K blocks of nearly equal size, at most kKcMax rows each.
int64_t choose_kc(int64_t k) {
  if (k <= kKcMax) return std::max<int64_t>(k, 1);
  return ceil_div(k, ceil_div(k, kKcMax));
}

// ---------------------------------------------------------------------------------------
// Scratch memory: grow-only, 64-byte aligned, one set per thread.

struct Scratch {
  void* p = nullptr;
  size_t cap = 0;  // bytes
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(p); }
  void* bytes(size_t n) {
    if (n <= cap) return p;
    size_t rounded = (n + 63) / 64 * 64;
    void* q = std::aligned_alloc(64, rounded);
    if (!q) return nullptr;
    std::free(p);
    p = q;
    cap = rounded;
    return p;
  }
  float* get(size_t floats) { return static_cast<float*>(bytes(floats * sizeof(float))); }
};

thread_local Scratch t_shared_b;  // B packed by the calling thread for all threads of one call
thread_local Scratch t_bblock;    // one B block packed by the tile that uses it
thread_local Scratch t_apack;     // one A micro-panel
thread_local Scratch t_ctile;     // f32 rows of a 16-bit C being accumulated
thread_local Scratch t_amx_edge;  // one 32 x 32 f32 AMX block at the edges of C

// p advanced by `elems` elements of `esize` bytes.
inline const void* at(const void* p, int64_t elems, int64_t esize) { return static_cast<const char*>(p) + elems * esize; }
inline void* at(void* p, int64_t elems, int64_t esize) { return static_cast<char*>(p) + elems * esize; }

// ---------------------------------------------------------------------------------------
// Packing B into panels. A packed block holds rows k0..k0+kcl of B; inside it, panel q
// (32 columns) is kcl x 32 floats, row by row, zero-padded past the last column. A fully
// packed B (pack_b, or the shared scratch) is its K blocks one after the other: block kb
// starts at kb*kc*npad floats.

int64_t padded_n(int64_t n) { return ceil_div(n, kPanel) * kPanel; }

// Panels per packing task: at least 64K floats, so that small packs stay on one thread.
int64_t pack_grain(int64_t k) { return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, k * kPanel)); }

// Rounds n floats at p to f16 and back, in place: an f32 operand read as f16 (a_as_f16,
// b_as_f16) off the AMX tiles, in its packed panel, where the values are hot and the
// conversions (F16C where the CPU has it) cost a fraction of the products that read them.
void round_through_f16(float* p, int64_t n) {
  const KernelFamily& f16 = family_for(GemmType::f16);
  constexpr int64_t kChunk = 512;
  uint16_t bits[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    f16.round_row[ti(GemmType::f16)](p + i, bits, len);
    f16.widen_row[ti(GemmType::f16)](bits, p + i, len);
  }
}

// Packs rows k0..k0+kcl and columns j0..j1 of op(B) (B stored [k, n], or [n, k] if trans_b,
// elements of type bt) into consecutive panels of the same type at out; with round_f16 (bt
// f32), each panel's values rounded to f16 and kept as floats.
void pack_b_block(const KernelFamily& f, GemmType bt, const void* b, int64_t ldb, bool trans_b, int64_t k0, int64_t kcl,
                  int64_t j0, int64_t j1, void* out, bool round_f16 = false) {
  const int64_t es = static_cast<int64_t>(gemm_type_size(bt));
  const gemm_detail::PackB trans_fn = round_f16 ? f.pack_b_trans_as_f16 : f.pack_b_trans[ti(bt)];
  const gemm_detail::PackB rows_fn = round_f16 ? f.pack_b_rows_as_f16 : f.pack_b_rows[ti(bt)];
  for (int64_t col = j0; col < j1; col += kPanel, out = at(out, kcl * kPanel, es)) {
    const int64_t w = std::min<int64_t>(kPanel, j1 - col);
    const gemm_detail::PackB fn = trans_b ? trans_fn : rows_fn;
    const void* src = trans_b ? at(b, col * ldb + k0, es) : at(b, k0 * ldb + col, es);
    if (fn) {
      fn(src, ldb, w, kcl, out);
    } else {  // a family without rounding packers: pack as f32, then round the panel
      (trans_b ? f.pack_b_trans[ti(bt)] : f.pack_b_rows[ti(bt)])(src, ldb, w, kcl, out);
      round_through_f16(static_cast<float*>(out), kcl * kPanel);
    }
  }
}

// Packs panels q0..q1 of every K block of a fully packed B with n columns.
void pack_b_panels(const KernelFamily& f, GemmType bt, const void* b, int64_t ldb, bool trans_b, int64_t k, int64_t n,
                   int64_t kc, void* dst, int64_t q0, int64_t q1, bool round_f16 = false) {
  const int64_t npad = padded_n(n);
  const int64_t es = static_cast<int64_t>(gemm_type_size(bt));
  for (int64_t k0 = 0; k0 < k; k0 += kc) {
    const int64_t kcl = std::min(kc, k - k0);
    pack_b_block(f, bt, b, ldb, trans_b, k0, kcl, q0 * kPanel, std::min(n, q1 * kPanel),
                 at(dst, k0 * npad + q0 * kcl * kPanel, es), round_f16);
  }
}

// The same in the AMX pair layout (see PackedB::amx_pairs): rows k0..k0+kcl of columns
// j0..j1 of a bf16 or f16 B into consecutive pair panels of amx_kp(kcl) rows at out; an f16
// panel is its hi part's panel followed by its lo part's.
void pack_b_pairs_block(GemmType type, const void* b, int64_t ldb, bool trans_b, int64_t k0, int64_t kcl, int64_t j0,
                        int64_t j1, uint16_t* out, bool f32_as_f16 = false) {
  for (int64_t col = j0; col < j1; col += kPanel, out += amx_parts(type) * amx_kp(kcl) * kPanel) {
    const int64_t off = trans_b ? col * ldb + k0 : k0 * ldb + col, w = std::min<int64_t>(kPanel, j1 - col);
    if (f32_as_f16)
      gemm_detail::amx_pack_b_pairs_f16_from_f32(static_cast<const float*>(b) + off, ldb, trans_b, kcl, w, out);
    else
      (type == GemmType::f16 ? gemm_detail::amx_pack_b_pairs_f16 : gemm_detail::amx_pack_b_pairs_bf16)(
          static_cast<const uint16_t*>(b) + off, ldb, trans_b, kcl, w, out);
  }
}

// ... and panels q0..q1 of every K block of a B with n columns (block kb at kb * parts *
// amx_kp(kc) * padded_n(n) elements).
void pack_b_pairs_panels(GemmType type, const void* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, int64_t kc,
                         uint16_t* dst, int64_t q0, int64_t q1, bool f32_as_f16 = false) {
  const int64_t npad = padded_n(n), parts = amx_parts(type);
  for (int64_t k0 = 0, kb = 0; k0 < k; k0 += kc, ++kb) {
    const int64_t kcl = std::min(kc, k - k0);
    pack_b_pairs_block(type, b, ldb, trans_b, k0, kcl, q0 * kPanel, std::min(n, q1 * kPanel),
                       dst + parts * (kb * amx_kp(kc) * npad + q0 * amx_kp(kcl) * kPanel), f32_as_f16);
  }
}

// ---------------------------------------------------------------------------------------
// One product (one batch item, or the shared parts of all of them).

struct Problem {
  int64_t m, n, k;
  int64_t a_rs, a_cs;  // A(i, p) = a[i * a_rs + p * a_cs]
  int64_t lda;
  bool trans_a;
  bool trans_b;
  int64_t ldb;
  float alpha, beta;
  const float* bias;
  GemmEpilogue epi;
  int64_t kc, nkb;
  int64_t ldc;
  std::atomic<bool>* oom;  // set when a task could not get scratch memory
  GemmType a_type, b_type, c_type;  // the types the product sees (f16 for an a_as_f16 operand)
  int64_t a_es, b_es, c_es;  // element sizes in bytes, as stored
  bool amx;                  // on the AMX tiles (B in their pair layout; see uses_amx)
  // f32 storage rounded to f16 while packing: into the tiles' pairs on AMX (the types above
  // are then f16), otherwise in the f32 panels (the types stay f32, and the operand is
  // always packed)
  bool a_f32_as_f16 = false, b_f32_as_f16 = false;
};

// Where the kernels find B for one item.
enum class BMode : uint8_t {
  in_place,        // row-major B read where it is (p = B, row stride ldb)
  packed,          // fully packed B at p, covering columns j_base .. j_base + npad
  pack_per_block,  // B at p (stored as the product says) packed by the tile, block by block
};
struct BView {
  BMode mode;
  const void* p;
  int64_t npad = 0;
  int64_t j_base = 0;
};

// Runs the micro-kernels over rows [m0, m1) and columns [n0, n1) of one item's C. A 16-bit C
// is accumulated in f32 scratch rows (m1 - m0 <= kNarrowCRows then) and rounded into C block by
// block on the last K block.
void compute_block(const Problem& P, const KernelFamily& f, const void* a, const BView& bv, void* c, int64_t m0,
                   int64_t m1, int64_t n0, int64_t n1) {
  const int mr_max = f.mr_max;
  const int width = f.width;
  const int bt = ti(P.b_type);
  const bool narrow_c = P.c_type != GemmType::f32;
  const bool dot = uses_dot(f, P.a_type, P.b_type);
  const gemm_detail::PackA pack_a_fn = dot                ? f.pack_a_bf16_pairs
                                       : P.a_f32_as_f16 && !P.amx && f.pack_a_as_f16 ? f.pack_a_as_f16
                                                                                      : f.pack_a[ti(P.a_type)];
  const bool round_packed_a = P.a_f32_as_f16 && !P.amx && !f.pack_a_as_f16;
  // A micro-panels are packed (k-major, contiguous) when the sweep over columns is long
  // enough to repay it, or when A is transposed (then packing is a plain copy), or 16-bit (the
  // kernels read f32 A), or rounded to f16. Otherwise the kernels read row-major A in place.
  const bool pack_a = P.trans_a || P.a_type != GemmType::f32 || P.a_f32_as_f16 || n1 - n0 >= kPackAMinCols;
  float* abuf = nullptr;
  if (pack_a) {
    abuf = t_apack.get(static_cast<size_t>(mr_max * P.kc + 16));
    if (!abuf) {
      P.oom->store(true);
      return;
    }
  }
  // A B block packed here stays in this core's L2 for all the rows of the tile.
  void* bbuf = nullptr;
  if (bv.mode == BMode::pack_per_block) {
    bbuf = t_bblock.bytes(static_cast<size_t>(P.kc * padded_n(n1 - n0) * P.b_es));
    if (!bbuf) {
      P.oom->store(true);
      return;
    }
  }
  // f32 accumulator rows of a 16-bit C: element (i, j) at ct[(i - m0) * ldct + j - n0].
  float* ct = nullptr;
  const int64_t ldct = n1 - n0;
  if (narrow_c) {
    ct = t_ctile.get(static_cast<size_t>((m1 - m0) * ldct));
    if (!ct) {
      P.oom->store(true);
      return;
    }
    if (P.beta != 0.f)
      for (int64_t i = m0; i < m1; ++i) f.widen_row[ti(P.c_type)](at(c, i * P.ldc + n0, P.c_es), ct + (i - m0) * ldct, ldct);
  }
  const int ar = pack_a ? 0 : 1;
  MicroArgs ma;
  ma.ldc = narrow_c ? ldct : P.ldc;
  ma.alpha = P.alpha;
  for (int64_t kb = 0; kb < P.nkb; ++kb) {
    const int64_t k0 = kb * P.kc;
    const int64_t kcl = std::min(P.kc, P.k - k0);
    const bool last = kb == P.nkb - 1;
    ma.k = kcl;
    ma.beta = kb == 0 ? P.beta : 1.f;
    // B(k0 + p, j) for this block: bblock + panel(j) * b_panel + p * ldb + j % 32 (elements).
    const void* bblock;
    int64_t j_base;
    ma.prefetch_b = bv.mode == BMode::in_place;
    if (bv.mode == BMode::in_place) {
      bblock = at(bv.p, k0 * P.ldb, P.b_es);
      j_base = 0;
      ma.ldb = P.ldb;
      ma.b_panel = kPanel;
    } else {
      if (bv.mode == BMode::packed) {
        bblock = at(bv.p, k0 * bv.npad, P.b_es);
        j_base = bv.j_base;
      } else {
        pack_b_block(f, P.b_type, bv.p, P.ldb, P.trans_b, k0, kcl, n0, n1, bbuf, P.b_f32_as_f16);
        bblock = bbuf;
        j_base = n0;
      }
      ma.ldb = kPanel;
      ma.b_panel = kcl * kPanel;
    }
    // The tile's rows in micro-panels of nearly equal height (128 rows: 8 x 13 + 2 x 12, not
    // 9 x 14 + 2): a panel of a few rows runs its kernel at a fraction of the FMA rate (2 rows
    // of 64 columns: 8 B loads per 16 FMAs), and at batch 1 of MiniLM that tail was 4% of the
    // time for 1.6% of the rows.
    const int64_t panels = ceil_div(m1 - m0, mr_max);
    const int64_t base_rows = (m1 - m0) / panels, taller = (m1 - m0) % panels;
    int64_t i = m0;
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int64_t mr = base_rows + (panel < taller ? 1 : 0);
      const void* ai = at(a, i * P.a_rs + k0 * P.a_cs, P.a_es);
      if (pack_a) {
        pack_a_fn(ai, P.lda, P.trans_a, mr, kcl, abuf);  // pairs: ceil(kcl/2)*mr words, fits
        if (round_packed_a) round_through_f16(abuf, mr * kcl);
        ma.a = abuf;
        ma.a_rs = 1;
        ma.a_cs = mr;
      } else {
        ma.a = static_cast<const float*>(ai);
        ma.a_rs = P.a_rs;
        ma.a_cs = 1;
      }
      const bool can_wide = mr <= f.wide_max_mr;
      for (int64_t j = n0; j < n1;) {
        const bool wide = can_wide && n1 - j > width;
        const int64_t w = wide ? f.wide_width : width;
        const int64_t nr = std::min(w, n1 - j);
        const bool masked = nr < w;
        const MicroKernel kern = dot    ? (wide ? f.dot_bf16_wide[mr][masked] : f.dot_bf16[mr][masked])
                                 : wide ? f.wide[bt][ar][mr][masked]
                                        : f.kernel[bt][ar][mr][masked];
        const int64_t jl = j - j_base;
        ma.b = at(bblock, (jl / kPanel) * ma.b_panel + jl % kPanel, P.b_es);
        void* cij = at(c, i * P.ldc + j, P.c_es);
        ma.c = narrow_c ? ct + (i - m0) * ldct + (j - n0) : static_cast<float*>(cij);
        ma.nr = nr;
        ma.bias = last && P.bias ? P.bias + j : nullptr;
        kern(ma);
        if (last && narrow_c)
          for (int64_t r = 0; r < mr; ++r) f.round_row[ti(P.c_type)](ma.c + r * ldct, at(cij, r * P.ldc, P.c_es), nr);
        j += nr;
      }
      // The epilogue runs once per micro-panel over the tile's columns, while those rows are
      // still in L1/L2: per 14 x 32 micro-tile, its calls and per-row loop setup made MiniLM's
      // GELU epilogue about 20% slower.
      if (last && P.epi.fn) P.epi.fn(P.epi.ctx, at(c, i * P.ldc + n0, P.c_es), P.ldc, i, n0, mr, n1 - n0);
      i += mr;
    }
  }
}

// compute_block on the AMX tiles, for a B in the pair layout (bv.mode == packed) or packed
// into it here block by block (pack_per_block): per K block, each 32-row panel of the rows is
// packed as bf16 rows (zero-padded to a multiple of 32 k-values; an f16 A as its two parts) and
// multiplied with the tile columns' panels 32 x 32 at a time. A whole block of
// f32 C (or of the f32 scratch of a 16-bit C) is loaded into the tiles and stored from them
// directly when alpha is 1 and the K block's beta 0 or 1; a block at an edge of C, or with
// other scalars, goes through a 32 x 32 scratch block. Bias, rounding to C's type and the
// epilogue follow the last K block, as in compute_block.
void compute_block_amx(const Problem& P, const KernelFamily& f, const void* a, const BView& bv, void* c, int64_t m0,
                       int64_t m1, int64_t n0, int64_t n1) {
  const int64_t kc_pad = amx_kp(P.kc);
  const int parts = amx_parts(P.a_type);
  auto* abuf = static_cast<uint16_t*>(t_apack.bytes(static_cast<size_t>(parts * kAmxRows * kc_pad * 2)));
  float* edge = t_amx_edge.get(static_cast<size_t>(kAmxRows * kPanel));
  uint16_t* bbuf = nullptr;
  if (bv.mode == BMode::pack_per_block) {
    bbuf = static_cast<uint16_t*>(t_bblock.bytes(static_cast<size_t>(parts * kc_pad * padded_n(n1 - n0) * 2)));
    if (!bbuf) {
      P.oom->store(true);
      return;
    }
  }
  const bool narrow_c = P.c_type != GemmType::f32;
  const int64_t ldct = n1 - n0;
  float* ct = narrow_c ? t_ctile.get(static_cast<size_t>((m1 - m0) * ldct)) : nullptr;
  if (!abuf || !edge || (narrow_c && !ct)) {
    P.oom->store(true);
    return;
  }
  if (narrow_c && P.beta != 0.f)
    for (int64_t i = m0; i < m1; ++i) f.widen_row[ti(P.c_type)](at(c, i * P.ldc + n0, P.c_es), ct + (i - m0) * ldct, ldct);
  const int64_t ldd = narrow_c ? ldct : P.ldc;
  for (int64_t kb = 0; kb < P.nkb; ++kb) {
    const int64_t k0 = kb * P.kc;
    const int64_t kcl = std::min(P.kc, P.k - k0);
    const int64_t kp = amx_kp(kcl);
    const bool last = kb == P.nkb - 1;
    const float beta = kb == 0 ? P.beta : 1.f;
    const uint16_t* bblock = static_cast<const uint16_t*>(bv.p) + parts * kb * kc_pad * bv.npad;
    int64_t j_base = bv.j_base;
    if (bv.mode == BMode::pack_per_block) {
      pack_b_pairs_block(P.b_type, bv.p, P.ldb, P.trans_b, k0, kcl, n0, n1, bbuf, P.b_f32_as_f16);
      bblock = bbuf;
      j_base = n0;
    }
    for (int64_t i = m0; i < m1; i += kAmxRows) {
      const int64_t mr = std::min(kAmxRows, m1 - i);
      const int rows16 = static_cast<int>(ceil_div(mr, 16));
      if (P.a_f32_as_f16) {
        gemm_detail::amx_pack_a_f16_from_f32(static_cast<const float*>(a) + i * P.a_rs + k0 * P.a_cs, P.lda, P.trans_a, mr,
                                             kcl, kp, rows16 * 16, abuf);
      } else {
        const uint16_t* ai = static_cast<const uint16_t*>(a) + i * P.a_rs + k0 * P.a_cs;
        (parts == 1 ? gemm_detail::amx_pack_a_bf16 : gemm_detail::amx_pack_a_f16)(ai, P.lda, P.trans_a, mr, kcl, kp,
                                                                                  rows16 * 16, abuf);
      }
      for (int64_t j = n0; j < n1; j += kPanel) {
        const int64_t nr = std::min<int64_t>(kPanel, n1 - j);
        const int cols16 = static_cast<int>(ceil_div(nr, 16));
        const uint16_t* bp = bblock + (j - j_base) / kPanel * parts * kp * kPanel;
        float* cd = narrow_c ? ct + (i - m0) * ldct + (j - n0) : static_cast<float*>(c) + i * P.ldc + j;
        if (mr == rows16 * 16 && nr == cols16 * 16 && P.alpha == 1.f && (beta == 0.f || beta == 1.f)) {
          gemm_detail::amx_bf16_block(abuf, kp, bp, parts, cd, ldd, rows16, cols16, beta != 0.f);
        } else {
          gemm_detail::amx_bf16_block(abuf, kp, bp, parts, edge, kPanel, rows16, cols16, false);
          for (int64_t r = 0; r < mr; ++r)
            for (int64_t jj = 0; jj < nr; ++jj) {
              float& out = cd[r * ldd + jj];
              const float v = P.alpha * edge[r * kPanel + jj];
              out = beta == 0.f ? v : v + beta * out;
            }
        }
        if (!last) continue;
        if (P.bias)
          for (int64_t r = 0; r < mr; ++r)
            for (int64_t jj = 0; jj < nr; ++jj) cd[r * ldd + jj] += P.bias[j + jj];
        if (narrow_c)
          for (int64_t r = 0; r < mr; ++r) f.round_row[ti(P.c_type)](cd + r * ldct, at(c, (i + r) * P.ldc + j, P.c_es), nr);
      }
      if (last && P.epi.fn) P.epi.fn(P.epi.ctx, at(c, i * P.ldc + n0, P.c_es), P.ldc, i, n0, mr, n1 - n0);
    }
  }
}

// compute_block over a tile; a 16-bit C goes in row chunks so that its f32 scratch stays
// small (the tile's rows start at a multiple of mr_max, and so do the chunks).
void compute_tile(const Problem& P, const KernelFamily& f, const void* a, const BView& bv, void* c, int64_t m0,
                  int64_t m1, int64_t n0, int64_t n1) {
  auto block = P.amx ? compute_block_amx : compute_block;
  if (P.c_type == GemmType::f32) return block(P, f, a, bv, c, m0, m1, n0, n1);
  const int64_t rows = P.amx ? kAmxNarrowCRows : std::max<int64_t>(f.mr_max, kNarrowCRows / f.mr_max * f.mr_max);
  for (int64_t r = m0; r < m1; r += rows) block(P, f, a, bv, c, r, std::min(m1, r + rows), n0, n1);
}

// How the columns [n0, n1) and all rows of one item are cut into work units: tn column tiles
// (each tile's B block stays in L2) times pu row units (micro-panels of nearly equal height),
// numbered tile by tile. The threads claim units in ranges that shrink toward the end of the
// call (ThreadPool::run_guided): one claim first covers many micro-panels of a tile, and the
// last claims are single micro-panels, so no thread waits long for another at the end. With
// 8 fixed tiles per call at batch 1 of MiniLM (128 rows), the calling thread spent about 10% of
// its time in the products waiting for the last tile of the other.
struct Plan {
  int64_t pu = 1, tn = 1;  // row units per column tile, column tiles
  int64_t nu = 0;          // N in 32-column panels
  int64_t unit_rows = 0;   // rows per unit from row 0 (the last is shorter), or 0: nearly equal
  bool serial = false;     // the product is too small to share
};

Plan make_plan(int64_t m, int64_t n, int64_t k, int64_t kc, int64_t b_es, int threads, const KernelFamily& f,
               bool amx) {
  Plan pl;
  if (amx) pl.unit_rows = kAmxRows;
  pl.nu = ceil_div(n, kPanel);
  const int64_t nb_units = std::max<int64_t>(1, kL2BlockBytes / (kc * b_es * kPanel));
  pl.tn = ceil_div(pl.nu, nb_units);
  // Waking a second core costs about as much as a tiny product, and much more when that
  // core is busy with another process.
  if (threads <= 1 || static_cast<double>(m) * n * k < kSerialMaxFma) {
    pl.serial = true;
    return pl;
  }
  pl.pu = ceil_div(m, amx ? kAmxRows : f.mr_max);
  // Few rows (a product of a few tokens): more column tiles, so every thread gets some units.
  const int64_t want = kMinUnitsPerThread * threads;
  if (pl.pu * pl.tn < want) pl.tn = std::min(pl.nu, std::max(pl.tn, ceil_div(want, pl.pu)));
  return pl;
}

// The first row of row unit p (p == pu: one past the last row).
int64_t unit_row(const Plan& pl, int64_t m, int64_t p) {
  return pl.unit_rows ? std::min(m, p * pl.unit_rows) : m * p / pl.pu;
}

// Columns [*j0, *j1) of column tile tj of columns [n0, n1).
void tile_columns(const Plan& pl, int64_t n0, int64_t n1, int64_t tj, int64_t* j0, int64_t* j1) {
  *j0 = std::min(n1, n0 + pl.nu * tj / pl.tn * kPanel);
  *j1 = std::min(n1, n0 + pl.nu * (tj + 1) / pl.tn * kPanel);
}

// Runs columns [n0, n1) of one item on the calling thread alone, in L2-sized column blocks.
void run_item_serial(const Problem& P, const KernelFamily& f, const void* a, const BView& bv, void* c, int64_t n0,
                     int64_t n1) {
  const int64_t nb = std::max<int64_t>(kPanel, kL2BlockBytes / (P.kc * P.b_es) / kPanel * kPanel);
  for (int64_t j = n0; j < n1; j += nb) compute_tile(P, f, a, bv, c, 0, P.m, j, std::min(n1, j + nb));
}

// Runs columns [n0, n1) of one item over the pool with the given plan (serially when the plan
// says so): each claimed range of units runs as one tile per column tile it touches.
void run_item_parallel(const Problem& P, const KernelFamily& f, const Plan& pl, const void* a, const BView& bv,
                       void* c, int64_t n0, int64_t n1, ThreadPool& pool) {
  if (pl.serial) return run_item_serial(P, f, a, bv, c, n0, n1);
  pool.run_guided(pl.pu * pl.tn, [&](int64_t u0, int64_t u1, int) {
    while (u0 < u1) {
      const int64_t tj = u0 / pl.pu, p0 = u0 % pl.pu, p1 = std::min(pl.pu, p0 + (u1 - u0));
      const int64_t m0 = unit_row(pl, P.m, p0), m1 = unit_row(pl, P.m, p1);
      int64_t j0, j1;
      tile_columns(pl, n0, n1, tj, &j0, &j1);
      if (m0 < m1 && j0 < j1) compute_tile(P, f, a, bv, c, m0, m1, j0, j1);
      u0 += p1 - p0;
    }
  });
}

// C = beta*C + bias, then the epilogue: the product when alpha == 0 or k == 0.
// Row i of C (at c) finished from the f32 products `ab` of that row (null: none, as when
// alpha or k is 0): alpha * ab + beta * C + bias, stored in C's type, then the epilogue.
void finish_row(const GemmArgs& g, const float* ab, void* c, int64_t i) {
  for (int64_t j = 0; j < g.n; ++j) {
    float old = 0.f;
    if (g.beta != 0.f) {
      if (g.c_type == GemmType::f32) old = static_cast<float*>(c)[j];
      else if (g.c_type == GemmType::f16) old = f16_to_f32(static_cast<uint16_t*>(c)[j]);
      else old = bf16_to_f32(static_cast<uint16_t*>(c)[j]);
    }
    float v = ab ? g.alpha * ab[j] : 0.f;
    if (g.beta != 0.f) v += g.beta * old;
    if (g.bias) v += g.bias[j];
    if (g.c_type == GemmType::f32) static_cast<float*>(c)[j] = v;
    else if (g.c_type == GemmType::f16) static_cast<uint16_t*>(c)[j] = f32_to_f16(v);
    else static_cast<uint16_t*>(c)[j] = f32_to_bf16(v);
  }
  if (g.epilogue.fn) g.epilogue.fn(g.epilogue.ctx, c, g.ldc, i, 0, 1, g.n);
}

void scale_only(const GemmArgs& g, ThreadPool& pool) {
  const int64_t rows = g.batch * g.m;
  pool.parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.n)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t item = r / g.m, i = r % g.m;
      finish_row(g, nullptr, at(g.c, item * g.batch_stride_c + i * g.ldc, static_cast<int64_t>(gemm_type_size(g.c_type))), i);
    }
  });
}

// Row dots (KernelFamily::row_dots) take products with A row-major and B transposed (both
// unit stride along k) when they do at most half the blocked kernels' work: those transpose B
// into panels for every item and run whole micro-tiles (14 x 32 on AVX-512), mostly padding
// when the product has few outputs, while the row dots run 4 x 4 blocks, 16 vector products
// a step along k plus about kRowDotBlockOps to sum each block's lanes. (Measured one thread,
// 128 items, GFLOP/s: 8 x 9 outputs from rows of 676, tinyconv's conv1 weight gradient, 63 on
// the row dots against 17 blocked (OpenBLAS 85); 16 x 72 from rows of 121, conv2's, 49
// against 56 blocked: it stays blocked.) Only for batches whose
// items each have their own B: a B that could be packed once (a single product's, or one
// shared by the items: a weight) keeps the blocked kernels, so that packing it beforehand
// never changes a result's bits (CpuGemm.PackedEqualsUnpacked).
constexpr int64_t kRowDotBlockOps = 64;

// The row-dot kernel a product takes: bf16 pairs when both operands are bf16 and the CPU has
// AVX-512 BF16, else f32 (other operands converted row by row); null when it takes none.
RowDots row_dots_for(const GemmArgs& g, const KernelFamily& f) {
  if (g.trans_a || !g.trans_b || g.batch < 2 || g.batch_stride_b == 0) return nullptr;
  const bool pairs = g.a_type == GemmType::bf16 && g.b_type == GemmType::bf16 && f.row_dots[ti(GemmType::bf16)];
  const KernelFamily& blocked = pairs ? f : family();
  const RowDots dots = pairs ? f.row_dots[ti(GemmType::bf16)] : family().row_dots[ti(GemmType::f32)];
  if (!dots) return nullptr;
  const int64_t step = pairs ? 32 : 16;  // k-values a vector step takes
  const double tiles = static_cast<double>(ceil_div(g.m, blocked.mr_max) * blocked.mr_max) *
                       static_cast<double>(ceil_div(g.n, blocked.width) * blocked.width) * static_cast<double>(g.k) / step;
  const double row_dots = static_cast<double>(ceil_div(g.m, 4) * ceil_div(g.n, 4)) *
                          static_cast<double>(16 * ceil_div(g.k, step) + kRowDotBlockOps);
  return 2 * row_dots <= tiles ? dots : nullptr;
}

// `rows` rows of k elements of type t at p (row stride ld) as f32 rows: p itself when they
// are f32 and not read as f16, else converted into `out` (row stride k): widened from f16 or
// bf16, or rounded through f16 (a_as_f16, b_as_f16), so that the row dots give the bits of the
// product of the converted operands, as the blocked path's panels do.
const void* f32_rows(const void* p, GemmType t, bool as_f16, int64_t ld, int64_t rows, int64_t k, int64_t* ld_out,
                     std::vector<float>& out) {
  *ld_out = ld;
  if (t == GemmType::f32 && !as_f16) return p;
  *ld_out = k;
  out.resize(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = out.data() + r * k;
    if (t == GemmType::f32)
      std::memcpy(dst, static_cast<const float*>(p) + r * ld, static_cast<size_t>(k) * sizeof(float));
    else  // the family's vector conversions: one value at a time cost ten times the row dots
      family_for(t).widen_row[ti(t)](static_cast<const uint16_t*>(p) + r * ld, dst, k);
  }
  if (as_f16) round_through_f16(out.data(), rows * k);
  return out.data();
}

// The items spread over the threads, each computed by the row dots into a thread's f32 block
// and finished row by row.
void run_row_dots(const GemmArgs& g, RowDots dots, const KernelFamily& f, ThreadPool& pool) {
  const bool pairs = dots == f.row_dots[ti(GemmType::bf16)];
  const int64_t a_es = static_cast<int64_t>(gemm_type_size(g.a_type)), b_es = static_cast<int64_t>(gemm_type_size(g.b_type));
  const int64_t c_es = static_cast<int64_t>(gemm_type_size(g.c_type));
  pool.run(g.batch, [&](int64_t it, int) {
    thread_local std::vector<float> block, a32, b32;
    block.resize(static_cast<size_t>(g.m * g.n));
    const void* a = at(g.a, it * g.batch_stride_a, a_es);
    const void* b = at(g.b, it * g.batch_stride_b, b_es);
    int64_t lda = g.lda, ldb = g.ldb;
    if (!pairs) {
      a = f32_rows(a, g.a_type, g.a_as_f16, g.lda, g.m, g.k, &lda, a32);
      b = f32_rows(b, g.b_type, g.b_as_f16, g.ldb, g.n, g.k, &ldb, b32);
    }
    dots(a, lda, b, ldb, g.m, g.n, g.k, block.data(), g.n);
    for (int64_t i = 0; i < g.m; ++i) finish_row(g, block.data() + i * g.n, at(g.c, it * g.batch_stride_c + i * g.ldc, c_es), i);
  });
}

// How one call runs: items spread over threads or tiles of each item, and how B is read.
struct Strategy {
  bool items_parallel = false;
  Plan plan;
  BMode mode = BMode::packed;
  int64_t chunk = 0;  // columns of B per shared packing (packed mode, not pre-packed)
};

Strategy decide(const GemmArgs& g, bool pre, bool amx, int64_t kc, int threads, const KernelFamily& f) {
  Strategy st;
  // Batches of products are spread item by item when that balances the threads (or the
  // items are too small to split); otherwise the items run one after the other, each split
  // into tiles over all threads.
  const double item_fma = static_cast<double>(g.m) * g.n * g.k;
  st.items_parallel =
      g.batch > 1 && threads > 1 &&
      (item_fma < kSerialMaxFma ||
       (g.batch >= threads && (g.batch % threads == 0 || g.batch >= 4 * threads || item_fma < (1 << 24))));
  const int64_t b_es = static_cast<int64_t>(gemm_type_size(g.b_type));
  st.plan = make_plan(g.m, g.n, g.k, kc, b_es, st.items_parallel ? 1 : threads, f, amx);
  const int64_t npad = padded_n(g.n);
  st.chunk = npad;
  if (pre) return st;
  // Row-major B read by few rows of C, or small enough to stay in L2: the kernels read it
  // in place. Otherwise it is packed: block by block inside each tile when no two tiles
  // share columns (no work is repeated, and the block stays in L2), or else once for all
  // tiles (and all items, when B is broadcast) into a shared buffer.
  const int64_t rows_per_thread = st.items_parallel ? g.m : ceil_div(g.m, threads);
  if (!amx && !g.trans_b && !g.b_as_f16 && (rows_per_thread <= kDirectBMaxRows ||
                     (g.k * g.n * b_es <= kDirectBMaxBytes && rows_per_thread <= kDirectBSmallMaxRows))) {
    st.mode = BMode::in_place;
    return st;
  }
  st.chunk = std::min(npad, std::max<int64_t>(4 * kPanel, kMaxScratchFloats / g.k / kPanel * kPanel));
  const bool shared_across_items = g.batch_stride_b == 0 && g.batch > 1 && st.chunk == npad;
  if (st.items_parallel ? !shared_across_items : st.plan.pu == 1) st.mode = BMode::pack_per_block;
  return st;
}

Status oom_status(const std::atomic<bool>& oom) {
  return oom.load() ? error(ErrorCode::runtime_error, "sgemm: out of memory for packing buffers") : Status::ok();
}

Status run_gemm(const GemmArgs& g, const PackedB* pre) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return Status::ok();
  ThreadPool& pool = ThreadPool::global();
  if (g.k == 0 || g.alpha == 0.f) {
    scale_only(g, pool);
    return Status::ok();
  }
  // Row dots come before the AMX tiles: the shapes they take (few outputs of long rows, a B
  // per item) leave a 16 x 16 tile mostly empty and repack both operands for every item.
  if (RowDots dots = pre ? nullptr : row_dots_for(g, family_for(g.b_type))) {
    run_row_dots(g, dots, family_for(g.b_type), pool);
    return Status::ok();
  }
  // a_as_f16 / b_as_f16: on the AMX tiles the kernels see f16 operands (packed into pairs
  // from f32 storage); elsewhere f32 ones, rounded in their packed panels
  const GemmType a16 = g.a_as_f16 ? GemmType::f16 : g.a_type, b16 = g.b_as_f16 ? GemmType::f16 : g.b_type;
  const bool amx = pre ? pre->amx_pairs() : amx_for(a16, b16, g.m, g.k);
  const GemmType a_type = amx ? a16 : g.a_type, b_type = amx ? b16 : g.b_type;
  const KernelFamily& f = family_for(b_type);
  Problem P;
  P.m = g.m;
  P.n = g.n;
  P.k = g.k;
  P.a_rs = g.trans_a ? 1 : g.lda;
  P.a_cs = g.trans_a ? g.lda : 1;
  P.lda = g.lda;
  P.trans_a = g.trans_a;
  P.trans_b = g.trans_b;
  P.ldb = g.ldb;
  P.alpha = g.alpha;
  P.beta = g.beta;
  P.bias = g.bias;
  P.epi = g.epilogue;
  P.ldc = g.ldc;
  std::atomic<bool> oom{false};
  P.oom = &oom;
  P.kc = pre ? pre->kc() : choose_kc(g.k);
  P.nkb = ceil_div(g.k, P.kc);
  P.a_type = a_type;
  P.b_type = b_type;
  P.c_type = g.c_type;
  P.a_es = static_cast<int64_t>(gemm_type_size(g.a_type));
  P.b_es = static_cast<int64_t>(gemm_type_size(g.b_type));
  P.c_es = static_cast<int64_t>(gemm_type_size(g.c_type));
  P.amx = amx;
  P.a_f32_as_f16 = g.a_as_f16;
  P.b_f32_as_f16 = g.b_as_f16;

  const int threads = pool.size();
  const int64_t npad = padded_n(g.n);
  const Strategy st = decide(g, pre != nullptr, P.amx, P.kc, threads, f);
  const bool items_parallel = st.items_parallel;
  const Plan& plan = st.plan;
  const BMode mode = st.mode;
  // A fully packed B shared by the threads (and by the items, when it is broadcast).
  void* shared = nullptr;
  const int64_t chunk = st.chunk;  // columns packed at a time
  if (pre) {
    shared = const_cast<void*>(pre->data());
  } else if (mode == BMode::packed) {
    const int64_t k_rows = P.amx ? amx_parts(b_type) * amx_k_rows(g.k, P.kc) : g.k;
    shared = t_shared_b.bytes(static_cast<size_t>(k_rows * chunk * P.b_es));
    if (!shared) return error(ErrorCode::runtime_error, "sgemm: out of memory for packing B");
  }
  auto pack_shared = [&](const void* b, int64_t j0, int64_t j1) {
    const void* bj = at(b, g.trans_b ? j0 * g.ldb : j0, P.b_es);
    pool.parallel_for(ceil_div(j1 - j0, kPanel), pack_grain(g.k), [&](int64_t q0, int64_t q1) {
      if (P.amx) {
        pack_b_pairs_panels(b_type, bj, g.ldb, g.trans_b, g.k, j1 - j0, P.kc, static_cast<uint16_t*>(shared), q0, q1,
                            g.b_as_f16);
      } else {
        pack_b_panels(f, g.b_type, bj, g.ldb, g.trans_b, g.k, j1 - j0, P.kc, shared, q0, q1, g.b_as_f16);
      }
    });
  };

  if (items_parallel) {
    if (mode == BMode::packed && !pre) pack_shared(g.b, 0, g.n);
    pool.run(g.batch, [&](int64_t it, int) {
      const void* a = at(g.a, it * g.batch_stride_a, P.a_es);
      void* c = at(g.c, it * g.batch_stride_c, P.c_es);
      const BView bv = mode == BMode::packed ? BView{BMode::packed, shared, npad, 0}
                                             : BView{mode, at(g.b, it * g.batch_stride_b, P.b_es)};
      run_item_serial(P, f, a, bv, c, 0, g.n);
    });
    return oom_status(oom);
  }

  const void* packed_from = nullptr;  // B whose packed copy is in `shared`, if whole
  for (int64_t it = 0; it < g.batch; ++it) {
    const void* a = at(g.a, it * g.batch_stride_a, P.a_es);
    const void* b = pre ? nullptr : at(g.b, it * g.batch_stride_b, P.b_es);
    void* c = at(g.c, it * g.batch_stride_c, P.c_es);
    if (mode != BMode::packed) {
      run_item_parallel(P, f, plan, a, BView{mode, b}, c, 0, g.n, pool);
      continue;
    }
    for (int64_t j0 = 0; j0 < g.n; j0 += chunk) {
      const int64_t j1 = std::min(g.n, j0 + chunk);
      if (!pre && !(chunk == npad && packed_from == b)) {  // a broadcast B is packed once
        pack_shared(b, j0, j1);
        packed_from = chunk == npad ? b : nullptr;
      }
      const Plan pl = chunk == npad ? plan : make_plan(g.m, j1 - j0, g.k, P.kc, P.b_es, threads, f, P.amx);
      run_item_parallel(P, f, pl, a, BView{BMode::packed, shared, padded_n(j1 - j0), j0}, c, j0, j1, pool);
    }
  }
  return oom_status(oom);
}

Status bad(const char* what) { return error(ErrorCode::invalid_argument, "sgemm: ", what); }

// Largest element offset + 1 of a rows x cols matrix with row stride ld, or -1 if that
// overflows or exceeds 2^60 elements (more than any address space holds; the bound keeps
// all size arithmetic of the driver within int64).
int64_t extent(int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  auto r = checked_mul_i64(rows - 1, ld);
  if (!r || *r > INT64_MAX - cols || *r + cols > (int64_t{1} << 60)) return -1;
  return *r + cols;
}

// extent(...) of `batch` items `stride` apart, or -1 as for extent.
int64_t batched_extent(int64_t batch, int64_t stride, int64_t ext) {
  if (ext < 0) return -1;
  if (batch <= 1 || ext == 0) return ext;
  auto r = checked_mul_i64(batch - 1, stride);
  if (!r || *r > (int64_t{1} << 60) - ext) return -1;
  return *r + ext;
}

// The checks of A, C and the sizes (everything but B).
bool valid_type(GemmType t) { return t == GemmType::f32 || t == GemmType::f16 || t == GemmType::bf16; }

Status check_a_c(const GemmArgs& g) {
  if (!valid_type(g.a_type) || !valid_type(g.b_type) || !valid_type(g.c_type))
    return bad("a_type, b_type and c_type must each be f32, f16 or bf16");
  if ((g.a_as_f16 && g.a_type != GemmType::f32) || (g.b_as_f16 && g.b_type != GemmType::f32))
    return bad("an operand read as f16 (a_as_f16, b_as_f16) must be stored as f32");
  if ((g.a_as_f16 || g.b_as_f16) && g.batch > 1) return bad("operands read as f16 take batch 1");
  if (g.m < 0 || g.n < 0 || g.k < 0) return bad("m, n and k must be non-negative");
  if (g.batch < 0) return bad("batch must be non-negative");
  if (g.batch_stride_a < 0 || g.batch_stride_b < 0 || g.batch_stride_c < 0)
    return bad("batch strides must be non-negative");
  if (g.m == 0 || g.n == 0 || g.batch == 0) return Status::ok();
  if (!g.c) return bad("c is null");
  if (g.ldc < std::max<int64_t>(1, g.n)) return bad("ldc is smaller than n");
  const int64_t c_ext = extent(g.m, g.n, g.ldc);
  if (c_ext < 0) return bad("C extent overflows");
  if (g.batch > 1 && g.batch_stride_c < c_ext) return bad("batch_stride_c makes C items overlap");
  if (batched_extent(g.batch, g.batch_stride_c, c_ext) < 0) return bad("C batch extent overflows");
  if (g.k == 0 || g.alpha == 0.f) return Status::ok();
  if (!g.a) return bad("a is null");
  const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  if (g.lda < std::max<int64_t>(1, a_cols))
    return bad(g.trans_a ? "lda is smaller than m (trans_a)" : "lda is smaller than k");
  if (batched_extent(g.batch, g.batch_stride_a, extent(a_rows, a_cols, g.lda)) < 0)
    return bad("A extent overflows");
  return Status::ok();
}

Status check_b(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0 || g.k == 0 || g.alpha == 0.f) return Status::ok();
  if (!g.b) return bad("b is null");
  const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  if (g.ldb < std::max<int64_t>(1, b_cols))
    return bad(g.trans_b ? "ldb is smaller than k (trans_b)" : "ldb is smaller than n");
  if (batched_extent(g.batch, g.batch_stride_b, extent(b_rows, b_cols, g.ldb)) < 0)
    return bad("B extent overflows");
  return Status::ok();
}

}  // namespace

Status check_gemm_args(const GemmArgs& args) {
  RLX_TRY(check_a_c(args));
  return check_b(args);
}

Status sgemm(const GemmArgs& args) {
  RLX_TRY(check_gemm_args(args));
  return run_gemm(args, nullptr);
}

PackedB pack_b(const void* b, GemmType type, int64_t ldb, bool trans_b, int64_t k, int64_t n) {
  return pack_b_for(GemmType::f32, b, type, ldb, trans_b, k, n, -1);
}

PackedB pack_b_for(GemmType a_type, const void* b, GemmType type, int64_t ldb, bool trans_b, int64_t k, int64_t n,
                   int64_t rows_hint) {
  PackedB out;
  if (k < 0 || n < 0 || !valid_type(type)) return out;
  if (k > 0 && n > 0) {
    const int64_t rows = trans_b ? n : k, cols = trans_b ? k : n;
    if (!b || ldb < cols || extent(rows, cols, ldb) < 0) return out;
  }
  const int64_t kc = choose_kc(k);
  const int64_t npad = padded_n(n);
  const bool amx = amx_for(a_type, type, rows_hint, k, /*weight=*/true) && n > 0;
  // the pair layout rounds K blocks up to 32 rows, and holds two parts of an f16 B
  const int64_t k_rows = amx ? amx_parts(type) * amx_k_rows(k, kc) : k;
  auto total = checked_mul_i64(k_rows, npad);
  if (!total || *total > INT64_MAX / 8) return out;
  if (*total > 0) {
    const size_t bytes = (static_cast<size_t>(*total) * gemm_type_size(type) + 63) / 64 * 64;
    auto* p = static_cast<unsigned char*>(huge_page_alloc(bytes));  // see huge_page_memory.h
    if (!p) return out;
    out.data_.reset(p);
    out.bytes_ = bytes;
    ThreadPool::global().parallel_for(npad / kPanel, pack_grain(k), [&](int64_t q0, int64_t q1) {
      if (!amx) {
        // the panel layout is the same for every family; the portable packers serve any type
        pack_b_panels(family_for(type), type, b, ldb, trans_b, k, n, kc, p, q0, q1);
        return;
      }
      pack_b_pairs_panels(type, b, ldb, trans_b, k, n, kc, reinterpret_cast<uint16_t*>(p), q0, q1);
    });
  }
  out.type_ = type;
  out.k_ = k;
  out.n_ = n;
  out.kc_ = kc;
  out.amx_pairs_ = amx;
  out.valid_ = true;
  return out;
}

Status sgemm_packed(const GemmArgs& args, const PackedB& b) {
  if (!b.valid()) return error(ErrorCode::invalid_argument, "sgemm_packed: the packed B is not valid");
  if (b.k() != args.k || b.n() != args.n)
    return error(ErrorCode::invalid_argument, "sgemm_packed: packed B is [", b.k(), ", ", b.n(), "] but the product needs [",
                 args.k, ", ", args.n, "]");
  if (args.a_as_f16 || args.b_as_f16)
    return error(ErrorCode::invalid_argument, "sgemm_packed: operands read as f16 (a_as_f16, b_as_f16) need sgemm");
  if (b.type() != args.b_type)
    return error(ErrorCode::invalid_argument, "sgemm_packed: packed B holds ", gemm_type_name(b.type()),
                 " but b_type is ", gemm_type_name(args.b_type));
  if (b.amx_pairs() && !uses_amx(args.a_type, args.b_type))
    return error(ErrorCode::invalid_argument, "sgemm_packed: B was packed for the AMX kernels, which cannot run this "
                 "product now (a_type is ", gemm_type_name(args.a_type), ", AMX ", g_amx.load() ? "on" : "switched off",
                 ", ", gemm_isa() == GemmIsa::avx512 ? "avx512" : "another", " family selected); pack it again");
  RLX_TRY(check_a_c(args));
  return run_gemm(args, &b);
}

const char* gemm_kernel_name() { return family().name; }

std::string gemm_kernel_name(GemmType a, GemmType b, GemmType c) {
  const KernelFamily& f = family_for(b);
  std::string out = f.name;
  if (uses_amx(a, b)) out += b == GemmType::f16 ? " amx-bf16 (f16 as hi + lo bf16)" : " amx-bf16";
  else if (uses_dot(f, a, b)) out += " vdpbf16ps";
  if (a == b && b == c) {
    if (a != GemmType::f32) out += cat(" ", gemm_type_name(a));
  } else {
    out += cat(" a=", gemm_type_name(a), " b=", gemm_type_name(b), " c=", gemm_type_name(c));
  }
  if (&f != &family()) out += " (no f16c)";
  return out;
}

std::string describe_sgemm(const GemmArgs& g, bool packed_b) {
  const KernelFamily& f = family_for(g.b_type);
  std::string out = gemm_kernel_name(g.a_type, g.b_type, g.c_type);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return out + "; empty";
  if (g.k == 0 || g.alpha == 0.f) return out + "; C = beta*C + bias only";
  const int threads = ThreadPool::global().size();
  if (!packed_b && row_dots_for(g, f))
    return out + cat("; row dots (", g.m, " x ", g.n, " outputs, each a dot of two rows of ", g.k, ")",
                     g.batch > 1 ? cat("; ", g.batch, " items spread over ", threads, " threads") : std::string());
  const bool amx = amx_for(g.a_type, g.b_type, g.m, g.k, packed_b);
  const Strategy st = decide(g, packed_b, amx, choose_kc(g.k), threads, f);
  if (amx) out += "; amx-bf16 32x32 tile blocks";
  out += packed_b && amx                       ? "; B pre-packed in AMX pairs"
         : packed_b                           ? "; B pre-packed"
         : st.mode == BMode::in_place         ? "; B read in place"
         : st.mode == BMode::pack_per_block   ? "; B packed per block in each tile"
                                              : "; B packed once, shared";
  if (st.items_parallel)
    out += cat("; ", g.batch, " items spread over ", threads, " threads");
  else if (st.plan.serial)
    out += cat("; ", st.plan.tn, " column tiles on one thread (too small to share)");
  else
    out += cat("; ", st.plan.pu, "x", st.plan.tn, " units (row panels x column tiles) claimed by ", threads,
               " threads in shrinking ranges", g.batch > 1 ? cat(", items one after the other") : std::string());
  return out;
}

GemmIsa gemm_isa() { return family().isa; }

bool set_gemm_bf16_dot(bool enable) {
  const KernelFamily* avx512 = gemm_detail::avx512_family();
  if (enable && !(best_family() == avx512 && avx512->dot_bf16[1][0])) return false;
  g_bf16_dot.store(enable, std::memory_order_relaxed);
  return true;
}

bool gemm_bf16_dot() { return uses_dot(family(), GemmType::bf16, GemmType::bf16); }

bool set_gemm_amx(bool enable) {
  if (enable && !gemm_detail::amx_bf16_supported()) return false;
  g_amx.store(enable, std::memory_order_relaxed);
  return true;
}

bool gemm_amx() { return uses_amx(GemmType::bf16, GemmType::bf16); }

bool set_gemm_isa(GemmIsa isa) {
  const KernelFamily* f = nullptr;
  switch (isa) {
    case GemmIsa::avx512:
      if (best_family()->isa == GemmIsa::avx512) f = best_family();
      break;
    case GemmIsa::avx2:
      if (best_family()->isa == GemmIsa::avx512 || best_family()->isa == GemmIsa::avx2) f = gemm_detail::avx2_family();
      break;
    case GemmIsa::portable:
      f = gemm_detail::portable_family();
      break;
  }
  if (!f) return false;
  g_family.store(f, std::memory_order_relaxed);
  return true;
}

}  // namespace rlx::cpu

// cpu/kernels/gemm.h: the CPU device's native matrix multiplication: f32, and f16/bf16
// operands with f32 accumulation.
//
// A BLIS-style GEMM: B is packed into cache-blocked panels 32 columns wide (or read in place
// when that is cheaper), A is read through a register-blocked micro-kernel that broadcasts its
// elements, and C is updated in registers. The micro-kernel is chosen at run time from what
// the CPU supports (AVX-512 14x32, AVX2 6x16, portable C++), so the library needs no -march
// flag. Work is split over rlx::ThreadPool::global(); every finished block of C can be handed
// to a fused epilogue while it is still in cache.
//
// 16-bit operands (f16, bf16) go through the same driver: A micro-panels are widened to f32
// while they are packed, B stays 16-bit in memory (packed panels hold half the bytes, which is
// what matters for weights and few-row products) and the micro-kernels widen it on load
// (F16C for f16, a 16-bit shift for bf16), C is accumulated in f32 and rounded to its type
// (round to nearest even, NaN preserved) when a finished block is stored, after the bias and
// before the epilogue.
//
// Where the CPU has AVX-512 BF16, a product with A and B both bf16 goes instead to kernels
// that multiply k-values in pairs with vdpbf16ps (two bf16 products added into one f32 lane):
// A micro-panels are packed as bf16 pairs (not widened), B keeps the usual panels and the
// kernels interleave two of its rows as they load them. See set_gemm_bf16_dot.
//
// AMX: where the CPU has AMX-BF16 tiles (and Linux grants the process their state), products
// with A and B both bf16 run on tdpbf16ps in blocks of 32 x 32 instead (see set_gemm_amx and
// gemm_amx.cpp): a bf16 B packed for a bf16 A (pack_b_for) is stored in the tiles' pair
// layout, and a B that is not pre-packed is packed so by the call. Products that would fill
// less than a quarter of a tile (few rows, short k) stay on vdpbf16ps, and row dots (below)
// come before the tiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "rlx/status.h"

namespace rlx::cpu {

// Element type of a GEMM operand. Arithmetic is always f32.
enum class GemmType : uint8_t { f32, f16, bf16 };

// "f32", "f16", "bf16".
const char* gemm_type_name(GemmType t);
// Bytes per element: 4 or 2.
inline size_t gemm_type_size(GemmType t) { return t == GemmType::f32 ? 4 : 2; }

// Applied to each finished block of C while it is hot in cache, exactly once per element,
// after alpha*A*B + beta*C (+ bias) is complete for that block and stored in C's element
// type (float, or uint16_t bits for f16/bf16 C). `c` points at element
// (m0, n0) of the C matrix of the current batch item, so the block is
// c[i * ldc + j] for i < mlen, j < nlen; m0 and n0 locate it inside that item (for batch > 1,
// `c - args.c` tells the items apart). Called concurrently from several threads on disjoint
// blocks, so it must be thread-safe.
struct GemmEpilogue {
  void (*fn)(void* ctx, void* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mlen, int64_t nlen) = nullptr;
  void* ctx = nullptr;
};

// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (+ bias), all row-major, for b < batch.
// op(A) is [m, k]: A is stored [m, k] with row stride lda, or [k, m] if trans_a.
// op(B) is [k, n]: B is stored [k, n] with row stride ldb, or [n, k] if trans_b.
// C is [m, n] with row stride ldc. A batch stride of 0 broadcasts that operand to every item.
// beta == 0 means C is write-only: it is never read (it may hold NaN or garbage).
// alpha == 0 or k == 0 means A and B are not read. C must not overlap A, B or bias.
// a, b and c point at elements of a_type, b_type and c_type (float, or the uint16_t bits of
// f16/bf16); strides and leading dimensions count elements. Any mix of types is allowed.
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr; int64_t lda = 0; bool trans_a = false; int64_t batch_stride_a = 0;
  const void* b = nullptr; int64_t ldb = 0; bool trans_b = false; int64_t batch_stride_b = 0;
  void* c = nullptr; int64_t ldc = 0; int64_t batch_stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.f, beta = 0.f;
  const float* bias = nullptr;   // optional per-column f32 bias [n], added before the epilogue
  GemmEpilogue epilogue;
  GemmType a_type = GemmType::f32, b_type = GemmType::f32, c_type = GemmType::f32;
  // An f32 operand read as f16: each value rounded to f16 (to nearest even, overflow to
  // infinity) as the operand is packed, so that the product is the one of the converted
  // matrix without a separate conversion pass (an f16 cast, or autocast's f16 round trip,
  // that only feeds the product). The operand's type must be f32 and batch 1. On the AMX tiles
  // (both operands f16 or read as f16, from 32 rows) the values go into the tiles' bf16 pairs;
  // elsewhere the operand is always packed, as f32 panels rounded in place, and the f32
  // kernels run.
  bool a_as_f16 = false, b_as_f16 = false;
};

// Checks the preconditions of sgemm: non-negative sizes, batch and batch strides; leading
// dimensions at least the stored row length (and >= 1); non-null pointers wherever elements
// are read or written; a batch stride for C that keeps items from overlapping (batch > 1);
// extents that fit in int64 (at most 2^60 elements). Returns invalid_argument naming the
// first field at fault. (sgemm_packed checks the same, except for B.)
Status check_gemm_args(const GemmArgs& args);

// Runs the multiplication described by `args`, multi-threaded over rlx::ThreadPool::global()
// (the calling thread takes part). Returns check_gemm_args(args) without touching memory if
// the arguments are invalid. Steady-state calls allocate nothing: packing buffers are
// thread-local and only grow. Re-entrant: may be called from several threads at once (the
// pool runs one job at a time) and from inside pool tasks (it then runs serially).
Status sgemm(const GemmArgs& args);

// A constant right operand (typically weights) packed once into the layout the micro-kernels
// read, so inference skips packing B on every call. The panels keep B's element type (a
// 16-bit B packs into half the bytes of an f32 one). Movable, not copyable; owns its memory.
// The layout does not depend on the selected micro-kernel, so a PackedB stays valid if the
// kernel family is changed with set_gemm_isa.
class PackedB {
 public:
  PackedB() = default;
  PackedB(PackedB&& o) noexcept { *this = std::move(o); }
  PackedB& operator=(PackedB&& o) noexcept {
    data_ = std::move(o.data_);
    k_ = o.k_;
    n_ = o.n_;
    kc_ = o.kc_;
    type_ = o.type_;
    bytes_ = o.bytes_;
    valid_ = o.valid_;
    amx_pairs_ = o.amx_pairs_;
    o.k_ = o.n_ = -1;
    o.kc_ = 0;
    o.bytes_ = 0;
    o.valid_ = false;
    return *this;
  }
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;

  // False for a default-constructed PackedB or one that pack_b refused to build.
  bool valid() const { return valid_; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  // Rows of B per cache block (the K blocking the panels were packed with).
  int64_t kc() const { return kc_; }
  // Element type of the panels (B's type).
  GemmType type() const { return type_; }
  // True when the panels hold bf16 pairs for the AMX kernels (see pack_b_for) rather than
  // the layout data() describes: per K block (kc() rows; the last may be shorter), of kp
  // rows (its rows rounded up to 32, zero past them; blocks start kb * roundup(kc(), 32) * 32
  // elements per panel apart), per 32-column panel, kp / 2 rows of 32 (column, pair) slots:
  // element [p / 2][j * 2 + p % 2] of the panel is B(k0 + p, j).
  bool amx_pairs() const { return amx_pairs_; }
  // Bytes of packed data owned.
  size_t bytes() const { return bytes_; }
  // The packed panels: for each K block of kc() rows (the last may be shorter), for each
  // group of 32 columns, kc x 32 elements of type() row by row, zero-padded past n.
  const void* data() const { return data_.get(); }

 private:
  friend PackedB pack_b_for(GemmType a_type, const void* b, GemmType type, int64_t ldb, bool trans_b, int64_t k,
                            int64_t n, int64_t rows_hint);
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<unsigned char[], Free> data_;
  int64_t k_ = -1, n_ = -1, kc_ = 0;
  GemmType type_ = GemmType::f32;
  size_t bytes_ = 0;
  bool valid_ = false;
  bool amx_pairs_ = false;
};

// Packs B (stored [k, n] with row stride ldb, or [n, k] if trans_b) for sgemm_packed. Uses
// the global thread pool. Returns an invalid PackedB (valid() == false) if the arguments are
// invalid (negative sizes, ldb too small, null b with k*n > 0) or memory runs out. `b`
// holds elements of `type`; the panels keep that type.
PackedB pack_b(const void* b, GemmType type, int64_t ldb, bool trans_b, int64_t k, int64_t n);
// Like pack_b, for products whose A has type a_type and (if rows_hint >= 0) rows_hint rows: a
// bf16 B for a bf16 A, or an f16 B for an f16 A of at least 32 rows, is packed in the AMX pair
// layout while gemm_amx() is on (see PackedB::amx_pairs) when k fills at least a quarter of
// a tile's 32 k-values (k >= 8); anything else as pack_b.
PackedB pack_b_for(GemmType a_type, const void* b, GemmType type, int64_t ldb, bool trans_b, int64_t k, int64_t n,
                   int64_t rows_hint = -1);
// pack_b of an f32 B.
inline PackedB pack_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n) {
  return pack_b(b, GemmType::f32, ldb, trans_b, k, n);
}

// Like sgemm, with B taken from `b` instead of args.b / ldb / trans_b / batch_stride_b (those
// are ignored; the same B is used for every batch item; args.b_type must equal b.type()).
// Returns invalid_argument if b is not valid or its k, n or type differ from the product's,
// or if b holds AMX pairs and the product cannot run on the AMX kernels now (A is not bf16,
// or set_gemm_amx(false) was called after packing).
Status sgemm_packed(const GemmArgs& args, const PackedB& b);

// The micro-kernel family in use, e.g. "avx512 14x32", for the dispatch report.
const char* gemm_kernel_name();

// The kernels that run a product with these operand types, for the dispatch report: the
// family name, then the type when all three agree ("avx2 6x16 bf16") or each one
// ("avx2 6x16 a=f32 b=f16 c=f32"); nothing is added for all-f32. The bf16-pair kernels add
// "vdpbf16ps" after the family ("avx512 14x32 vdpbf16ps bf16"), the AMX tiles "amx-bf16"
// ("avx512 14x32 amx-bf16 bf16"). A family that cannot widen
// f16 on this CPU (AVX2 without F16C) hands f16 products to the portable kernels, and the
// name says so.
std::string gemm_kernel_name(GemmType a, GemmType b, GemmType c);

// How sgemm (or sgemm_packed, if packed_b) would run `args` here, for the dispatch report and
// tests: kernel family, how B is read, and how the work is split, e.g.
// "avx512 14x32; B pre-packed; 10x1 units (row panels x column tiles) claimed by 2 threads in
// shrinking ranges" (the kernel part as gemm_kernel_name(types) says it).
// Does not check the arguments.
std::string describe_sgemm(const GemmArgs& args, bool packed_b = false);

// Kernel families. The best one the CPU supports is selected at start-up.
enum class GemmIsa : uint8_t { portable, avx2, avx512 };

// Selects a kernel family (tests and benchmarks use it to cover every path). Returns false
// and changes nothing if this CPU cannot run it. Not thread-safe against running GEMMs.
bool set_gemm_isa(GemmIsa isa);

// The kernel family in use.
GemmIsa gemm_isa();

// Whether products with A and B both bf16 run on the AVX-512 BF16 kernels (vdpbf16ps: pairs of
// bf16 products added into f32 lanes; the instruction treats denormal inputs and results as
// zero and rounds to nearest even, so results can differ from the widening kernels by the
// f32 accumulation error and by values below 2^-126) instead of widening B to f32 as it is
// loaded. On by default, and used while the avx512 family is selected on a CPU whose cpuid
// reports avx512_bf16. set_gemm_bf16_dot(false) switches them off (tests and benchmarks
// compare both paths); set_gemm_bf16_dot(true) returns false and changes nothing if this CPU
// lacks them. Not thread-safe against running GEMMs.
bool set_gemm_bf16_dot(bool enable);

// True when the vdpbf16ps kernels are on (bf16 x bf16 products run on them unless gemm_amx()).
bool gemm_bf16_dot();

// Whether products with A and B both bf16 run on AMX-BF16 tiles (tdpbf16ps: the numerics of
// vdpbf16ps, 16 x 16 x 32 products per instruction), pack_b_for packing their B in the tiles'
// pair layout. On by default on a CPU whose cpuid reports amx-tile and amx-bf16
// and whose kernel grants the tile state. set_gemm_amx(true) returns false and changes
// nothing where that is not the case. A PackedB already packed with pairs cannot be used
// after set_gemm_amx(false). Not thread-safe against running GEMMs.
bool set_gemm_amx(bool enable);

// True when bf16 x bf16 products run on the AMX tiles now.
bool gemm_amx();

// ---------------------------------------------------------------------------------------
// Internal: the micro-kernel interface shared by gemm.cpp and the per-ISA files.
namespace gemm_detail {

// Columns per packed B panel, for every ISA.
inline constexpr int kPanel = 32;

// One micro-kernel call: C[0:mr, 0:nr] (+)= alpha * A[0:mr, 0:k] * B[0:k, 0:nr] where
//   A(i, p) = a[i * a_rs + p * a_cs]                       (f32)
//   B(p, j) = b[(j / 32) * b_panel + p * ldb + j % 32]     (elements of the kernel's B type)
// C (f32) = alpha*AB + beta*C, C not read if beta == 0 (the driver passes beta = 1 for every
// K block after the first). If bias is non-null, bias[j] is added (the driver passes it with
// the last K block). A and C are always f32 here: the driver widens a 16-bit A while packing
// it and keeps a 16-bit C in an f32 scratch block until it is finished. The bf16-pair kernels
// (KernelFamily::dot_bf16) are the exception: for them `a` holds uint32 bf16 pairs, pair q of
// row i at a[q * a_cs + i] with the low half A(i, 2q) and the high half A(i, 2q + 1) (zero
// past k), as pack_a_bf16_pairs writes them (a_rs == 1).
// prefetch_b: B is read in place (not packed); kernels may prefetch rows ahead, and a masked
// kernel must not read B past column nr (packed panels are zero-padded, in-place B is not).
struct MicroArgs {
  int64_t k;
  const float* a; int64_t a_rs, a_cs;
  const void* b; int64_t ldb, b_panel;
  bool prefetch_b;
  float* c; int64_t ldc;
  int64_t nr;
  float alpha, beta;
  const float* bias;
};
using MicroKernel = void (*)(const MicroArgs&);

inline constexpr int kMaxMr = 16;
inline constexpr int kTypes = 3;  // GemmType values, the first index of the tables below

// Packs an A micro-panel of element type T to f32: dst[p * mr + i] = A(i, p) for i < mr,
// p < kc, where A(i, p) is a[i * lda + p], or a[p * lda + i] if trans (element offsets).
using PackA = void (*)(const void* a, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst);
// Packs one 32-column panel of B, keeping its element type: for a transposed B,
// out[p * 32 + j] = b[j * ldb + p]; for a row-major B, out[p * 32 + j] = b[p * ldb + j];
// for j < w, zero for w <= j < 32, p < kc.
using PackB = void (*)(const void* b, int64_t ldb, int64_t w, int64_t kc, void* out);
// Converts n elements between f32 and a 16-bit type: round (f32 -> 16-bit, nearest even, NaN
// kept) or widen (16-bit -> f32).
using ConvertRow = void (*)(const void* src, void* dst, int64_t n);

// A kernel family. kernel[b_type][a_row][mr][masked] computes mr rows (1..mr_max) of `width`
// columns with B of that element type (null where the CPU cannot widen it: then the driver
// uses the portable family for the product); a_row selects A addressing with a_cs == 1
// (row-major A, unit stride along k) versus a_rs == 1 (packed or transposed A); masked
// kernels handle nr < width. wide[...] (may be null) computes wide_width columns for
// mr <= wide_max_mr, for skinny products; wide_width is 32 or a multiple of 32, so wide
// kernels start at a panel boundary. The other tables are indexed by element type too.
// Row dots: out[i * ldo + j] = sum over p < k of A(i, p) * B(j, p) for i < m, j < n, where
// A(i, p) = a[i * lda + p] and B(j, p) = b[j * ldb + p] are both of the table's element type
// with unit stride along k (C = A B^T), out f32. Each output is a dot of two rows, vectorized
// along k, with no packing: for products with few outputs and long rows, where the blocked
// kernels would transpose B into panels and run their tiles mostly on padding.
using RowDots = void (*)(const void* a, int64_t lda, const void* b, int64_t ldb, int64_t m, int64_t n, int64_t k,
                         float* out, int64_t ldo);

struct KernelFamily {
  const char* name;
  GemmIsa isa;
  int mr_max;
  int width;
  int wide_width;
  int wide_max_mr;
  MicroKernel kernel[kTypes][2][kMaxMr + 1][2];
  MicroKernel wide[kTypes][2][kMaxMr + 1][2];
  PackA pack_a[kTypes];
  PackB pack_b_trans[kTypes];
  PackB pack_b_rows[kTypes];
  ConvertRow round_row[kTypes];  // [f32] unused
  ConvertRow widen_row[kTypes];  // [f32] unused
  // A and B both bf16 (null unless the CPU has AVX-512 BF16): kernels that multiply k-values
  // in pairs (vdpbf16ps), for mr rows of `width` columns and, for mr <= wide_max_mr, of
  // wide_width columns; [mr][masked] as above. A comes from pack_a_bf16_pairs, B in the usual
  // layout (bf16 panels or row-major bf16 in place).
  MicroKernel dot_bf16[kMaxMr + 1][2];
  MicroKernel dot_bf16_wide[kMaxMr + 1][2];
  // Packs a bf16 A micro-panel as pairs, for dot_bf16: dst (as uint32)[q * mr + i] =
  // A(i, 2q) | A(i, 2q + 1) << 16 for q < ceil(kc / 2), the high half zero past kc.
  PackA pack_a_bf16_pairs;
  // Packers of an f32 operand read as f16 (GemmArgs::a_as_f16 / b_as_f16 off the AMX tiles):
  // as pack_a[f32] and pack_b_*[f32], each value rounded to f16 and kept as a float. Null
  // where the family has none: the driver then packs as f32 and rounds the packed panel.
  PackA pack_a_as_f16;
  PackB pack_b_trans_as_f16, pack_b_rows_as_f16;
  // Row dots with both operands of one type (null where the family has none): [f32] on FMAs,
  // [bf16] on vdpbf16ps (k-values in pairs; only with AVX-512 BF16).
  RowDots row_dots[kTypes];
};

// AMX (gemm_amx.cpp). amx_bf16_supported / amx_int8_supported: cpuid reports amx-tile and
// amx-bf16 / amx-int8 (with AVX-512) and Linux granted this process the tile state (asked
// once, on the first call).
bool amx_bf16_supported();
bool amx_int8_supported();
// Tile layouts (palette 1) of the AMX kernels. all_16x64: all 8 tiles 16 rows of 64 bytes
// (the bf16 GEMM, the int8 layer). int8_blocks32 (quantized prefill, one block of 32 k-values a
// step): tmm0-3 16 x 64 bytes (int32 C), tmm4/5 16 rows x 32 bytes (A), tmm6/7 8 rows x 64
// bytes (B: 8 quads of 16 columns).
enum class AmxTiles : uint8_t { all_16x64, int8_blocks32 };
// Loads `layout` on the calling thread unless it is the one loaded last there.
void amx_configure_tiles(AmxTiles layout = AmxTiles::all_16x64);
// Writes `rows` rows of kp bf16 each at dst: row i < mr is A(i, 0..kc) (A(i, p) = a[i * lda + p],
// or a[p * lda + i] if trans), zero from kc to kp; rows mr..rows are zero.
void amx_pack_a_bf16(const uint16_t* a, int64_t lda, bool trans, int64_t mr, int64_t kc, int64_t kp, int64_t rows,
                     uint16_t* dst);
// Packs w <= 32 columns and kc rows of B (B(p, j) = b[p * ldb + j], or b[j * ldb + p] if
// trans_b) into one panel of the AMX pair layout (see PackedB::amx_pairs): kp / 2 rows of 64
// elements, kp = kc rounded up to 32, zero where there is no element of B.
void amx_pack_b_pairs_bf16(const uint16_t* b, int64_t ldb, bool trans_b, int64_t kc, int64_t w, uint16_t* out);
// C block (16 * rows16 rows, 16 * cols16 columns, f32, row stride ldc elements) = A * B, or
// C + A * B if load_c, over kp (a multiple of 32) k-values: A is 16 * rows16 rows of kp bf16
// (from amx_pack_a_bf16), B one panel in the pair layout. rows16 and cols16 are 1 or 2. With
// parts > 1, A and B are sums of `parts` bf16 matrices (part s of A at a + s * 32 * kp, of B
// at b + s * 32 * kp), and every part of A is multiplied with every part of B. The calling
// thread's tiles are configured on its first call. Only for amx_bf16_supported().
void amx_bf16_block(const uint16_t* a, int64_t kp, const uint16_t* b, int parts, float* c, int64_t ldc, int rows16,
                    int cols16, bool load_c);
// f16 operands as the sum of two bf16 matrices: hi = each value truncated to bf16, lo = the
// rest (exact: an f16 significand has 11 bits, so hi + lo == x; infinities and NaN go whole into
// hi, with lo 0). Products of the parts are exact in f32, so the tiles sum the four products of
// a pair of f16 values as an f32 FMA chain sums their product. amx_pack_a_f16 and
// amx_pack_b_pairs_f16 write what their bf16 versions do for each part: part 0 (hi) at dst /
// out, part 1 (lo) 32 * kp elements further.
void amx_pack_a_f16(const uint16_t* a, int64_t lda, bool trans, int64_t mr, int64_t kc, int64_t kp, int64_t rows,
                    uint16_t* dst);
void amx_pack_b_pairs_f16(const uint16_t* b, int64_t ldb, bool trans_b, int64_t kc, int64_t w, uint16_t* out);
// The same from f32 values, each rounded to f16 first (vcvtps2ph, to nearest even): what the
// f16 versions write for the converted matrix.
void amx_pack_a_f16_from_f32(const float* a, int64_t lda, bool trans, int64_t mr, int64_t kc, int64_t kp, int64_t rows,
                             uint16_t* dst);
void amx_pack_b_pairs_f16_from_f32(const float* b, int64_t ldb, bool trans_b, int64_t kc, int64_t w, uint16_t* out);

// Sets every packing and conversion entry of f to the portable versions (families then
// replace the ones they vectorize).
void set_generic_packing(KernelFamily& f);

const KernelFamily* avx512_family();   // null if not compiled
const KernelFamily* avx2_family();
const KernelFamily* portable_family();

}  // namespace gemm_detail
}  // namespace rlx::cpu

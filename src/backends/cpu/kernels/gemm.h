// cpu/kernels/gemm.h: the CPU device's native f32 matrix multiplication.
//
// A BLIS-style GEMM: B is packed into cache-blocked panels 32 columns wide (or read in place
// when that is cheaper), A is read through a register-blocked micro-kernel that broadcasts its
// elements, and C is updated in registers. The micro-kernel is chosen at run time from what
// the CPU supports (AVX-512 14x32, AVX2 6x16, portable C++), so the library needs no -march
// flag. Work is split over rlx::ThreadPool::global(); every finished block of C can be handed
// to a fused epilogue while it is still in cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "rlx/status.h"

namespace rlx::cpu {

// Applied to each finished block of C while it is hot in cache, exactly once per element,
// after alpha*A*B + beta*C (+ bias) is complete for that block. `c` points at element
// (m0, n0) of the C matrix of the current batch item, so the block is
// c[i * ldc + j] for i < mlen, j < nlen; m0 and n0 locate it inside that item (for batch > 1,
// `c - args.c` tells the items apart). Called concurrently from several threads on disjoint
// blocks, so it must be thread-safe.
struct GemmEpilogue {
  void (*fn)(void* ctx, float* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mlen, int64_t nlen) = nullptr;
  void* ctx = nullptr;
};

// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (+ bias), all row-major, for b < batch.
// op(A) is [m, k]: A is stored [m, k] with row stride lda, or [k, m] if trans_a.
// op(B) is [k, n]: B is stored [k, n] with row stride ldb, or [n, k] if trans_b.
// C is [m, n] with row stride ldc. A batch stride of 0 broadcasts that operand to every item.
// beta == 0 means C is write-only: it is never read (it may hold NaN or garbage).
// alpha == 0 or k == 0 means A and B are not read. C must not overlap A, B or bias.
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr; int64_t lda = 0; bool trans_a = false; int64_t batch_stride_a = 0;
  const float* b = nullptr; int64_t ldb = 0; bool trans_b = false; int64_t batch_stride_b = 0;
  float* c = nullptr; int64_t ldc = 0; int64_t batch_stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.f, beta = 0.f;
  const float* bias = nullptr;   // optional per-column bias [n], added before the epilogue
  GemmEpilogue epilogue;
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
// read, so inference skips packing B on every call. Movable, not copyable; owns its memory.
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
    bytes_ = o.bytes_;
    valid_ = o.valid_;
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
  // Bytes of packed data owned.
  size_t bytes() const { return bytes_; }
  // The packed panels: for each K block of kc() rows (the last may be shorter), for each
  // group of 32 columns, kc x 32 floats row by row, zero-padded past n.
  const float* data() const { return data_.get(); }

 private:
  friend PackedB pack_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n);
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], Free> data_;
  int64_t k_ = -1, n_ = -1, kc_ = 0;
  size_t bytes_ = 0;
  bool valid_ = false;
};

// Packs B (stored [k, n] with row stride ldb, or [n, k] if trans_b) for sgemm_packed. Uses
// the global thread pool. Returns an invalid PackedB (valid() == false) if the arguments are
// invalid (negative sizes, ldb too small, null b with k*n > 0) or memory runs out.
PackedB pack_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n);

// Like sgemm, with B taken from `b` instead of args.b / ldb / trans_b / batch_stride_b (those
// are ignored; the same B is used for every batch item). Returns invalid_argument if b is
// not valid or its k, n differ from args.k, args.n.
Status sgemm_packed(const GemmArgs& args, const PackedB& b);

// The micro-kernel family in use, e.g. "avx512 14x32", for the dispatch report.
const char* gemm_kernel_name();

// How sgemm (or sgemm_packed, if packed_b) would run `args` here, for the dispatch report and
// tests: kernel family, how B is read, and how the work is split, e.g.
// "avx512 14x32; B packed per block in each tile; 1x2 tiles (M x N) over 2 threads".
// Does not check the arguments.
std::string describe_sgemm(const GemmArgs& args, bool packed_b = false);

// Kernel families. The best one the CPU supports is selected at start-up.
enum class GemmIsa : uint8_t { portable, avx2, avx512 };

// Selects a kernel family (tests and benchmarks use it to cover every path). Returns false
// and changes nothing if this CPU cannot run it. Not thread-safe against running GEMMs.
bool set_gemm_isa(GemmIsa isa);

// The kernel family in use.
GemmIsa gemm_isa();

// ---------------------------------------------------------------------------------------
// Internal: the micro-kernel interface shared by gemm.cpp and the per-ISA files.
namespace gemm_detail {

// Columns per packed B panel, for every ISA.
inline constexpr int kPanel = 32;

// One micro-kernel call: C[0:mr, 0:nr] (+)= alpha * A[0:mr, 0:k] * B[0:k, 0:nr] where
//   A(i, p) = a[i * a_rs + p * a_cs]
//   B(p, j) = b[(j / 32) * b_panel + p * ldb + j % 32]
// C = alpha*AB + beta*C, C not read if beta == 0 (the driver passes beta = 1 for every K
// block after the first). If bias is non-null, bias[j] is added (the driver passes it with
// the last K block).
// prefetch_b: B is read in place (not packed); kernels may prefetch rows ahead.
struct MicroArgs {
  int64_t k;
  const float* a; int64_t a_rs, a_cs;
  const float* b; int64_t ldb, b_panel;
  bool prefetch_b;
  float* c; int64_t ldc;
  int64_t nr;
  float alpha, beta;
  const float* bias;
};
using MicroKernel = void (*)(const MicroArgs&);

inline constexpr int kMaxMr = 16;

// A kernel family. kernel[a_row][mr][masked] computes mr rows (1..mr_max) of `width` columns;
// a_row selects A addressing with a_cs == 1 (row-major A, unit stride along k) versus
// a_rs == 1 (packed or transposed A); masked kernels handle nr < width. wide[...] (may be
// null) computes wide_width columns for mr <= wide_max_mr, for skinny products; wide_width is
// 32 or a multiple of 32, so wide kernels start at a panel boundary.
struct KernelFamily {
  const char* name;
  GemmIsa isa;
  int mr_max;
  int width;
  int wide_width;
  int wide_max_mr;
  MicroKernel kernel[2][kMaxMr + 1][2];
  MicroKernel wide[2][kMaxMr + 1][2];
  // Packs an A micro-panel: dst[p * mr + i] = A(i, p) for i < mr, p < kc, where A(i, p) is
  // a[i * lda + p], or a[p * lda + i] if trans.
  void (*pack_a)(const float* a, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst);
  // Packs one 32-column panel of a transposed B: out[p * 32 + j] = b[j * ldb + p] for j < w,
  // 0 for w <= j < 32, p < kc.
  void (*pack_b_trans)(const float* b, int64_t ldb, int64_t w, int64_t kc, float* out);
  // Packs one 32-column panel of a row-major B: out[p * 32 + j] = b[p * ldb + j] for j < w,
  // 0 for w <= j < 32, p < kc.
  void (*pack_b_rows)(const float* b, int64_t ldb, int64_t w, int64_t kc, float* out);
};

// Portable versions of the packing routines.
void pack_a_generic(const float* a, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst);
void pack_b_trans_generic(const float* b, int64_t ldb, int64_t w, int64_t kc, float* out);
void pack_b_rows_generic(const float* b, int64_t ldb, int64_t w, int64_t kc, float* out);

const KernelFamily* avx512_family();   // null if not compiled
const KernelFamily* avx2_family();
const KernelFamily* portable_family();

}  // namespace gemm_detail
}  // namespace rlx::cpu

// cpu/kernels/qgemm.h: the CPU device's native kernels for block-quantized weights (llama.cpp's
// GGUF formats): dequantize, and qmatmul y = x * W^T with W kept quantized.
//
// qmatmul never expands W to f32 as a whole. With few rows of x (decode, m <= 4) each weight
// block is decoded into vector registers and multiplied into up to 4 rows of x at once, several
// weight rows interleaved for independent accumulators; this streams W once and is bound by
// memory bandwidth. With many rows (prefill) panels of 64 weight rows x 1024 values are decoded
// into a per-thread f32 tile (256 KB, cache resident) and multiplied by the f32 GEMM, so each
// decoded block is reused by every row of x. For q8_0, q4_0, q4_k, q6_k and int4_g128[_asym] with m <= 4 on
// AVX2 / AVX-512 the fused path is integer, as in llama.cpp: x is quantized once per call to
// int8 blocks of 32 and each weight block is multiplied into it with 8-bit dot products
// (qgemm_q8.h; results move by the rounding of x, see qgemm_quantizes_x). For the formats with
// a prefill panel kernel (q4_0, q8_0, q4_k, q6_k) many rows take the integer path too: x quantized once, then
// panels of weight rows repacked so that one 8-bit multiply covers 8 weight rows (16 for q8_0
// and q4_0 on AVX-512 VNNI, zmm vpdpbusd), each panel multiplied into every group of 4 rows of
// x (llama.cpp's prefill is integer too). Work is split over
// output rows on rlx::ThreadPool::global(). Kernels exist for AVX-512, AVX2 (+FMA, F16C) and portable C++,
// chosen at run time, so the library needs no -march flag.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "backends/cpu/kernels/gemm.h"
#include "kernels/ggml_quants.h"
#include "rlx/status.h"

namespace rlx::cpu {

// The codec behind an ops-table quant format name ("q4_k", "f16", ...) if the CPU kernels run
// it, else nullopt. Every format of rlx::quant_format() is supported.
std::optional<quant::QType> qgemm_format(std::string_view format);

// y[i * ldy + j] = sum_p x[i * ldx + p] * W(j, p) for i < m, j < n, where row j of W is the
// row_bytes(type, k) bytes at w + j * ldw. k must be a positive multiple of the block size.
struct QGemmArgs {
  quant::QType type = quant::QType::q8_0;
  int64_t m = 0, n = 0, k = 0;
  const float* x = nullptr; int64_t ldx = 0;
  const uint8_t* w = nullptr; int64_t ldw = 0;
  float* y = nullptr; int64_t ldy = 0;
};

// Checks the arguments (invalid_argument naming the field) and runs, multi-threaded.
// Steady-state calls allocate nothing (tiles are thread-local and only grow).
Status qgemm(const QGemmArgs& args);

// y[r * cols + c] = W(r, c) for r < rows: decodes `rows` rows of `cols` values (row stride
// row_bytes(type, cols)), multi-threaded.
Status dequantize_rows(quant::QType type, const uint8_t* w, int64_t rows, int64_t cols, float* y);

// Rows of x one fused decode-and-multiply kernel call takes.
inline constexpr int64_t kQGemmFusedMaxRows = 4;
// Rows of x up to which qgemm uses the fused path when the format has no integer panels (f16,
// bf16, f32 and the formats other than q4_0, q8_0, q4_k and q6_k): groups of
// kQGemmFusedMaxRows rows over spans of weight rows small enough to stay in L2 between the
// groups, so the weights come from memory once. Above it, weight panels are decoded to f32
// tiles for the GEMM. (f16 decode steps of 8 to 32 rows of a hidden-512 model ran 1.1-1.6x
// faster this way than through the tiles, on two Zen 4 cores.)
inline constexpr int64_t kQGemmFusedDecodeRows = 32;

// Which path qgemm takes for m rows of x with weights of type t, for reports: "fused decode",
// "integer panels" (or "integer panels on amx-int8 tiles") or "f32 tiles + gemm".
const char* qgemm_path_name(quant::QType t, int64_t m);

// Whether qgemm, with the kernels in use, quantizes m rows of x to int8 blocks of 32 (Q8_0:
// d = amax / 127, q = round(x / d)) and multiplies them by weights of type t with integer dot
// products, as llama.cpp does. Results then differ from the f32 product by at most
// sum_p |W(j, p)| * d(block of p) / 2 (plus f32 rounding).
bool qgemm_quantizes_x(quant::QType t, int64_t m);

// The int8 linear layer (op int8_matmul): y[i * ldy + j] = float(sum_p qx[i][p] * w[j * ldw + p])
// * sx[i] * w_scale[j] + bias[j], where x's rows are quantized to int8 with
// sx = x_scale (per tensor) or, when x_scale is 0, sx[i] = max(max_p |x[i][p]| / 127, 1e-30)
// (per token), and qx = clamp(round_half_even(x / sx), -127, 127). The products are summed
// exactly in int32 (vpdpbusd with AVX-512 VNNI, vpmaddubsw + vpmaddwd with AVX2), so the
// result is the reference decomposition's up to the final f32 multiplications. Any k >= 1.
//
// With w packed by pack_i8 (weights fixed at compile time, a CPU with AVX-512 VNNI) the
// products run on a register-blocked panel kernel: 12 rows of x by 32 output channels per
// tile, 4 k-values per vpdpbusd on zmm registers (64 multiply-adds per instruction, 4x the f32
// FMA's), each 4 bytes of x broadcast against 32 channels' packed quads. On a CPU with AMX-INT8
// the packed products run on the tiles instead (see set_i8gemm_amx), with the same sums.
// Without a packed w the kernel takes dot products of rows (one weight row per 32 k-values at
// a time).
class PackedI8;
// x's rows quantized as i8gemm quantizes them (quants in the kernel family's layout, and the
// row scales), kept by the caller between calls. One quantization of an activation then
// serves several int8_matmuls (a layer's query, key and value projections read the same x),
// or is made by the int8_matmul whose output the activation is, block by block of rows as
// soon as they are final (after its bias and epilogue, while they are in cache), instead of
// by the next one, which would read them back from memory (I8GemmArgs::x_quants, y_quants).
class I8Quants {
 public:
  int64_t rows() const { return m_; }
  int64_t k() const { return k_; }
  float x_scale() const { return x_scale_; }

 private:
  friend Status i8gemm(const struct I8GemmArgs&);
  // room for m rows of k (row stride ldq), or false when memory runs out
  bool reserve(int64_t m, int64_t k, int64_t ldq, float x_scale, int offset);
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> data_;  // quants, then m float scales, 64-byte aligned
  size_t cap_ = 0;
  int64_t m_ = 0, k_ = 0, ldq_ = 0;
  float x_scale_ = 0.f;
  int offset_ = 0;  // what the family adds to each quant (128: u8 for vpdpbusd)
};

struct I8GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const float* x = nullptr; int64_t ldx = 0;
  const int8_t* w = nullptr; int64_t ldw = 0;                   // unused when packed is set
  const PackedI8* packed = nullptr;                             // w packed by pack_i8, or null
  const float* w_scale = nullptr; bool w_scale_per_row = true;  // [n], or one value
  const float* bias = nullptr;                                  // [n] or null
  float x_scale = 0.f;                                          // > 0: per tensor; 0: per token
  float* y = nullptr; int64_t ldy = 0;
  GemmEpilogue epilogue;  // runs on each finished block of y (f32, after the bias)
  // x's quants: with x_quants_ready, read from *x_quants, which must hold this x's m rows of k
  // quantized with this x_scale (invalid_argument otherwise; quantized again when the kernel
  // family changed since), instead of quantizing x; otherwise, when x_quants is set, x is
  // quantized into it (for later calls) rather than into scratch memory.
  I8Quants* x_quants = nullptr;
  bool x_quants_ready = false;
  // y's quants for a later call whose x is y (ldy must be n): each block of rows, once final,
  // quantized with y_x_scale (0: per row) into *y_quants.
  I8Quants* y_quants = nullptr;
  float y_x_scale = 0.f;
};
// Checks the arguments (invalid_argument naming the field) and runs, multi-threaded over n
// (and over rows of x on the panel kernel). k is at most kI8GemmMaxK: the int32 sums of
// (q + 128) * w stay exact below it.
Status i8gemm(const I8GemmArgs& args);
inline constexpr int64_t kI8GemmMaxK = 65536;

// int8 weights [n, k] (row j: output channel j) packed once for the panel kernel: panels of
// 32 channels (the last zero-padded), each holding quads() = ceil(k / 64) * 16 quads of 32 x 4
// bytes (the 4 consecutive k-values of channel c at quad * 128 + 4 * c, zero past k: the AMX
// tiles take 16 quads at a time), 64-byte aligned; and
// each channel's sum of weights, through which the + 128 offset of x's quants is taken out.
class PackedI8 {
 public:
  bool valid() const { return data_ != nullptr; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t quads() const { return (k_ + 63) / 64 * 16; }
  int64_t panels() const { return (n_ + 31) / 32; }
  const int8_t* panel(int64_t p) const { return data_.get() + p * quads() * 128; }
  const int32_t* sums() const { return sums_.data(); }
  size_t bytes() const { return static_cast<size_t>(panels() * quads() * 128) + sums_.size() * 4; }

 private:
  friend PackedI8 pack_i8(const int8_t* w, int64_t ldw, int64_t n, int64_t k);
  struct Free {
    void operator()(int8_t* p) const { std::free(p); }
  };
  std::unique_ptr<int8_t[], Free> data_;
  std::vector<int32_t> sums_;
  int64_t n_ = 0, k_ = 0;
};
// Packs w (row stride ldw) for the kernel family in use. Returns an invalid PackedI8 where the
// family has no panel kernel (no AVX-512 VNNI), on bad arguments (sizes < 1, k over
// kI8GemmMaxK, ldw < k, null w) or when memory runs out; i8gemm then reads w itself.
PackedI8 pack_i8(const int8_t* w, int64_t ldw, int64_t n, int64_t k);

// Whether the integer products run on AMX-INT8 tiles where the CPU has them: i8gemm's packed
// weights (tdpbusd, 16 x 16 x 64 products per instruction; the same exact int32 sums as
// vpdpbusd, so the same results) and the q8_0 / q4_0 prefill panels (tdpbssd / tdpbsud per
// block of 32; the same exact block sums, scaled as the zmm kernel does). On by default on a
// CPU whose cpuid reports amx-tile and amx-int8 and whose kernel grants the tile state, while
// the avx512 family is selected. set_qgemm_amx(true) returns false and changes nothing where
// that is not the case. Not thread-safe against running products.
bool set_qgemm_amx(bool enable);
bool qgemm_amx();

// The kernel family in use ("avx512", "avx2", "portable"); set_qgemm_isa selects one (tests),
// returning false if the CPU cannot run it.
const char* qgemm_kernel_name();
bool set_qgemm_isa(GemmIsa isa);

// ---------------------------------------------------------------------------------------
// Internal: one kernel family (qgemm_<isa>.cpp).
namespace qgemm_detail {

// One fused call: mr (1..4) rows of x against weight rows [j0, j1), each nb blocks long.
// xs holds, for each row of x, the sums of its 32-value chunks (k / 32 of them, then 16 zeros;
// row stride ldxs), which formats with per-block mins use; it is null for the others.
struct RowsArgs {
  const uint8_t* w; int64_t ldw; int64_t nb;
  const float* x; int64_t ldx;
  const float* xs; int64_t ldxs;
  float* y; int64_t ldy;
};
using RowsFn = void (*)(const RowsArgs& a, int64_t j0, int64_t j1);
// The integer path: mr rows of x quantized to int8 blocks of 32: quants qx (row stride ldq
// bytes), per block scale dx and cx (row stride ldd floats): for q4_0 8 * dx * (sum of the
// block's quants), for q4_k dx * (sum of the block's quants).
struct Q8Args {
  const uint8_t* w; int64_t ldw; int64_t nb;
  const int8_t* qx; int64_t ldq;
  const float* dx; const float* cx; int64_t ldd;
  float* y; int64_t ldy;
};
using Q8RowsFn = void (*)(const Q8Args& a, int64_t j0, int64_t j1);
// All m rows of quantized x (a.qx, a.dx, a.cx, with a.nb blocks) against weight rows [j0, j1)
// of a.w into a.y (row stride a.ldy, column j at a.y + j), for many rows of x.
using Q8PanelFn = void (*)(const Q8Args& a, int64_t m, int64_t j0, int64_t j1);
// Rows [i0, i1) of x to the integer path's int8 blocks (quantize_x in qgemm.cpp says what).
using Q8QuantFn = void (*)(const float* x, int64_t ldx, int64_t nb, int64_t i0, int64_t i1, int8_t* qx, int64_t ldq,
                           float* dx, float* cx, int64_t ldd, bool plain_sums);
// The int8 linear layer's kernel: rows of x already quantized (qx, row stride ldq; stored as
// u8 q + 128 when the family's i8_offset_x is set, else as int8 q) with per-row scales sx,
// against weight rows [j0, j1) of w (int8, row stride ldw), all m rows of x.
struct I8Args {
  int64_t m, k;
  const uint8_t* qx; int64_t ldq; const float* sx;
  const int8_t* w; int64_t ldw;
  const float* ws; int64_t ws_stride;  // w_scale[j * ws_stride]
  const float* bias;
  float* y; int64_t ldy;
};
using I8RowsFn = void (*)(const I8Args& a, int64_t j0, int64_t j1);
// The panel kernel: rows [i0, i1) of x (as I8Args) against panel p of packed weights (with
// `cols` <= 32 valid channels) into y, scaled and biased as i8rows does.
struct I8PanelArgs {
  const uint8_t* qx; int64_t ldq; const float* sx;
  const int8_t* panel; int64_t quads; const int32_t* sums;  // this panel's (sums of its channels)
  const float* ws; int64_t ws_stride;                        // from channel j0 of this panel on
  const float* bias;                                         // from channel j0, or null
  float* y; int64_t ldy;                                     // at column j0
  int64_t cols;
};
using I8PanelFn = void (*)(const I8PanelArgs& a, int64_t i0, int64_t i1);
// The panel kernel on AMX-INT8 tiles (qgemm_amx.cpp); x's quants must be readable (any bytes)
// up to a multiple of 16 rows from the first row of the product, and i0 a multiple of 16.
void i8_panel_amx(const I8PanelArgs& a, int64_t i0, int64_t i1);
// One row of k values of x to the layer's quants (see I8GemmArgs); returns its scale.
using I8QuantFn = float (*)(const float* x, int64_t k, float x_scale, uint8_t* q);
// Whether the kernels of format t read RowsArgs::xs.
bool needs_xsums(quant::QType t);
// decode: nb blocks of one row into y.
using DecodeFn = void (*)(const uint8_t* w, int64_t nb, float* y);

struct QKernelFamily {
  const char* name;
  GemmIsa isa;
  RowsFn rows[quant::kNumQTypes][kQGemmFusedMaxRows];
  Q8RowsFn q8rows[quant::kNumQTypes][kQGemmFusedMaxRows];  // null where the format has none
  Q8PanelFn q8panel[quant::kNumQTypes];  // many rows of x (prefill); null: the f32 tile + GEMM path
  Q8PanelFn q8panel_amx[quant::kNumQTypes];  // the same on AMX-INT8 tiles where the CPU has them; null: none
  Q8QuantFn q8quant = nullptr;         // null: the portable loop
  DecodeFn decode[quant::kNumQTypes];
  I8RowsFn i8rows = nullptr;  // the int8 linear layer
  I8PanelFn i8panel = nullptr;  // its panel kernel on pack_i8's layout; null: none
  I8QuantFn i8quant = nullptr;
  bool i8_offset_x = false;   // its x quants are stored as u8 (q + 128)
};

const QKernelFamily* qgemm_avx512_family();  // null if not compiled
const QKernelFamily* qgemm_avx2_family();
const QKernelFamily* qgemm_portable_family();

}  // namespace qgemm_detail
}  // namespace rlx::cpu

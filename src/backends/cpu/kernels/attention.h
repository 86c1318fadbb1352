// cpu/kernels/attention.h: fused scaled dot-product attention with an f32 result on the CPU,
// for f32 operands, or bf16 ones summed in f32 (attention's out_type), optionally with q and k
// quantized to int8 for the scores (attention's int8_scores).
//
// For each (batch, query head, block of query rows) one pool task computes the block's
// scores against every key, applies scale, mask and causality, takes a numerically stable
// softmax, and multiplies by V into the output. With AVX-512 and at least 8 rows per task
// (encoders, prefill, grouped decode with 8 query heads per key head) a direct kernel does
// this in groups of 8 rows with K transposed and V copied contiguous per task, and the
// softmax's 1/sum applied to the output rows; a decode task (one query position, up to 8 rows)
// with AVX2 reads each key and value row once, in place, for all its rows; otherwise the GEMM
// kernel computes the two products of the whole block. Only a tile of scores per thread exists
// at a time: the [B, H, Sq, Sk] score tensor is never materialized.
#pragma once

#include <cstdint>

#include "rlx/dtype.h"
#include "rlx/status.h"

namespace rlx::cpu {

struct AttentionArgs {
  const float* q = nullptr;  // [B, Hq, Sq, D]
  const float* k = nullptr;  // [B, Hkv, Sk, D]
  const float* v = nullptr;  // [B, Hkv, Sk, Dv]
  float* out = nullptr;      // [B, Hq, Sq, Dv]
  // bf16 operands: q, k and v are read through these instead (same shapes and strides; the
  // float pointers above are unused). The scores, the softmax and the value product are
  // computed in f32, as if the operands were widened first, except that the value product
  // takes the unnormalized probabilities exp(s - max) rounded to bf16 (as FlashAttention and
  // PyTorch's CPU flash attention do), each output row then divided by the f32 sum of the
  // unrounded ones. With AVX-512 BF16 the direct kernel multiplies q and k pairwise, and the
  // probabilities and V in pairs of keys, with vdpbf16ps (which treats bf16 denormals as zero,
  // as the bf16 GEMM does); other paths widen each task's q, k and v to f32 and round the
  // probabilities in f32 storage. Not with paged keys.
  const uint16_t* q_bf16 = nullptr;
  const uint16_t* k_bf16 = nullptr;
  const uint16_t* v_bf16 = nullptr;
  DType operand_type = DType::f32;  // f32 or bf16
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0, head_dim_v = 0;
  // Element strides of (batch, head, position) for each operand; the last dim is always
  // contiguous. All zero (the default) means contiguous [B, H, S, D]; the bshd layout is
  // {S*H*D, D, H*D}. Rows of one head must not overlap (position stride >= D).
  int64_t q_strides[3] = {0, 0, 0}, k_strides[3] = {0, 0, 0}, v_strides[3] = {0, 0, 0}, out_strides[3] = {0, 0, 0};
  // Optional mask broadcastable to [B, Hq, Sq, Sk]: bool (true attends) or f32 (added to the
  // scores); strides in elements per dim of that 4-D view, 0 where the mask broadcasts.
  const void* mask = nullptr;
  DType mask_dtype = DType::boolean;
  int64_t mask_strides[4] = {0, 0, 0, 0};
  bool causal = false;  // key j is visible to query i when j <= i + (Sk - Sq)
  float scale = 1.f;
  // > 0: the scaled scores become softcap * tanh(score / softcap) before the mask (Gemma 2).
  float softcap = 0.f;
  // f32 operands only: each row of q and of k is quantized to int8 before the score product
  // (attention's int8_scores: scale max(max|row| / 127, 1e-30), quants clamp(round_half_even(
  // row / scale), -127, 127)), and the scores are the quants' dot products times both scales
  // and `scale`. With AVX-512 VNNI the direct kernel sums the quants exactly in int32 with
  // vpdpbusd (q's as u8 q + 128, the offset taken out through each key's sum of quants); other
  // paths multiply each task's dequantized q and k rows in f32. Not with paged keys.
  bool int8_scores = false;
  // Paged keys and values (paged_attention): k and v point at pools of key/value slots
  // [Hkv, pool_blocks * block_size, D], k_strides/v_strides {0, head stride, D}, and sequence
  // b's key j is at slot block_table[b * table_cols + j / block_size] * block_size +
  // j % block_size (seq_k = table_cols * block_size). A block id outside [0, pool_blocks) is an
  // error. A task reads the keys its rows see in place when their blocks are consecutive in
  // the pool, else copies them into a contiguous buffer first.
  const int64_t* block_table = nullptr;
  int64_t block_size = 0, table_cols = 0, pool_blocks = 0;
  // false forces the GEMM path where a direct kernel would run (benchmarks compare them).
  bool direct_kernel = true;
};

// Runs attention over rlx::ThreadPool::global() (f32 result; operands as operand_type says). With one query position and grouped heads
// (decode with GQA), the query heads that share a key/value head run as the rows of one
// product, so K and V are read once per group. A query row that sees no key gives NaN
// (as softmax over an empty set does in the reference). Allocates only grow-only
// thread-local scratch.
Status attention_f32(const AttentionArgs& args);

// Whether bf16 operands of these sizes take the direct kernel's vdpbf16ps score product (this
// CPU has AVX-512 BF16, even head dimensions up to 64, blocks of 8 and more query rows), rather
// than being widened to f32 task by task. For descriptions; the kernel decides per task.
bool attention_bf16_direct(const AttentionArgs& args);

// Whether int8 scores (AttentionArgs::int8_scores) of these sizes take the direct kernel's
// vpdpbusd product (this CPU has AVX-512 VNNI and the qgemm kernel family in use is "avx512",
// head dimensions are multiples of 4 up to 64, blocks of 8 and more query rows), rather than
// the dequantized rows' f32 product. For descriptions; the kernel decides per task.
bool attention_int8_direct(const AttentionArgs& args);

}  // namespace rlx::cpu

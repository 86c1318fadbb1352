// Megatron-style tensor parallelism for the model builders (docs/distributed.md).
//
// A model's rank-local graph is built from rank-local weights: the first matrix of each pair
// (attention q/k/v, MLP up/gate) is split by output features (rows of a Hugging Face [out, in]
// weight), so each rank owns whole heads and a block of the MLP; the second (attention output,
// MLP down) is split by input features (columns), so each rank's product is a partial sum and
// one all_reduce after it restores the full activation. Token embeddings are split by
// vocabulary: a rank looks up the ids it owns, zeros for the others, and an all_reduce sums the
// rows; an output head split the same way gives per-rank logits that an all_gather joins.
// Everything else (norms, biases of split-by-input matrices, position embeddings) is
// replicated. The collectives are graph ops, so the dispatch report shows them like any other.
#pragma once

#include <cstdint>
#include <string>

#include "rlx/op_builder.h"
#include "rlx/tensor.h"

namespace rlx::models {

// This process's place in a tensor-parallel group (size 1: no parallelism).
struct TensorParallel {
  int rank = 0;
  int size = 1;
  bool active() const { return size > 1; }
  // Rank's block [begin, begin + count) of n items split evenly; `what` names them in the error
  // when n is not a multiple of size.
  Status check_divides(int64_t n, const std::string& what) const;
  int64_t block(int64_t n) const { return n / size; }
  int64_t begin(int64_t n) const { return block(n) * rank; }
  // Vocabulary shards: ceil(n / size) rows each (the last padded with zero rows).
  int64_t vocab_rows(int64_t vocab) const { return (vocab + size - 1) / size; }
  int64_t vocab_begin(int64_t vocab) const { return vocab_rows(vocab) * rank; }
};

// Rows [begin, begin + count) of a 2-D tensor of any byte-sized dtype; rows past the end are
// zero (a padded vocabulary shard). Shares no memory with `t`.
Expected<Tensor> slice_rows(const Tensor& t, int64_t begin, int64_t count, const std::string& name);
// Bytes [begin, begin + count) of every row of a 2-D tensor (element columns for byte-sized
// dtypes; block-aligned byte ranges for quantized rows).
Expected<Tensor> slice_row_bytes(const Tensor& t, int64_t byte_begin, int64_t byte_count, const std::string& name);
// Columns [begin, begin + count) of a 2-D tensor of a byte-sized dtype.
Expected<Tensor> slice_cols(const Tensor& t, int64_t begin, int64_t count, const std::string& name);

// The sum over the group of every rank's x (identity when the group is one rank).
ValueId tp_all_reduce(OpBuilder& o, const TensorParallel& tp, ValueId x);

// A vocabulary-parallel lookup of ids [batch, seq]: `table` holds rows [begin, begin + rows) of the embedding;
// ids outside them contribute zeros, and the all_reduce sums every rank's rows.
ValueId vocab_parallel_embedding(OpBuilder& o, const TensorParallel& tp, ValueId table, ValueId ids, int64_t begin,
                                 int64_t rows);

// Joins per-rank logits [..., rows] along the last axis and drops the padding past `vocab`.
ValueId gather_vocab_logits(OpBuilder& o, const TensorParallel& tp, ValueId logits, int64_t vocab);

}  // namespace rlx::models

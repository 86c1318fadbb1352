#include "models/tensor_parallel.h"

#include <cstring>

namespace rlx::models {

Status TensorParallel::check_divides(int64_t n, const std::string& what) const {
  if (size < 1 || rank < 0 || rank >= size)
    return error(ErrorCode::invalid_argument, "tensor parallelism: rank ", rank, " of ", size, " is not a rank");
  if (n % size != 0)
    return error(ErrorCode::invalid_argument, "tensor parallelism over ", size, " ranks needs ", what, " (", n,
                 ") to be a multiple of ", size);
  return Status::ok();
}

namespace {

Status check_2d(const Tensor& t, const std::string& name) {
  if (t.rank() != 2) return error(ErrorCode::shape_error, "tensor parallelism: '", name, "' is ", t.type().to_string(), ", expected a matrix");
  if (dtype_bits(t.dtype()) < 8)
    return error(ErrorCode::unsupported, "tensor parallelism: '", name, "' has packed 4-bit elements");
  return Status::ok();
}

}  // namespace

Expected<Tensor> slice_rows(const Tensor& t, int64_t begin, int64_t count, const std::string& name) {
  RLX_TRY(check_2d(t, name));
  if (begin < 0 || count < 0 || begin > t.sizes()[0])
    return error(ErrorCode::out_of_range, "tensor parallelism: rows [", begin, ", ", begin + count, ") of '", name,
                 "' ", t.type().to_string());
  Tensor out = Tensor::zeros(t.dtype(), {count, t.sizes()[1]});
  const size_t row = dtype_bytes(t.dtype(), static_cast<size_t>(t.sizes()[1]));
  const int64_t have = std::min<int64_t>(count, t.sizes()[0] - begin);
  if (have > 0) std::memcpy(out.bytes(), t.bytes() + static_cast<size_t>(begin) * row, static_cast<size_t>(have) * row);
  return out;
}

Expected<Tensor> slice_row_bytes(const Tensor& t, int64_t byte_begin, int64_t byte_count, const std::string& name) {
  RLX_TRY(check_2d(t, name));
  const int64_t esize = static_cast<int64_t>(dtype_bytes(t.dtype(), 1));
  const int64_t row = t.sizes()[1] * esize;
  if (byte_begin < 0 || byte_count <= 0 || byte_begin + byte_count > row || byte_begin % esize || byte_count % esize)
    return error(ErrorCode::out_of_range, "tensor parallelism: bytes [", byte_begin, ", ", byte_begin + byte_count,
                 ") of each row of '", name, "' ", t.type().to_string());
  const int64_t rows = t.sizes()[0];
  Tensor out = Tensor::zeros(t.dtype(), {rows, byte_count / esize});
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.bytes() + r * byte_count, t.bytes() + r * row + byte_begin, static_cast<size_t>(byte_count));
  return out;
}

Expected<Tensor> slice_cols(const Tensor& t, int64_t begin, int64_t count, const std::string& name) {
  RLX_TRY(check_2d(t, name));
  const int64_t esize = static_cast<int64_t>(dtype_bytes(t.dtype(), 1));
  return slice_row_bytes(t, begin * esize, count * esize, name);
}

ValueId tp_all_reduce(OpBuilder& o, const TensorParallel& tp, ValueId x) {
  if (!tp.active()) return x;
  return o.op(Op::AllReduce, {x}, Attrs{{"reduce", std::string("sum")}});
}

ValueId vocab_parallel_embedding(OpBuilder& o, const TensorParallel& tp, ValueId table, ValueId ids, int64_t begin,
                                 int64_t rows) {
  if (!tp.active()) return o.embedding(table, ids);
  // ids this rank owns become local rows; the others read row 0 and are multiplied by 0
  ValueId local = o.sub(ids, o.scalar(static_cast<double>(begin), DType::i64));
  ValueId mine = o.op(Op::And, {o.binary(Op::GreaterEqual, local, o.scalar(0, DType::i64)),
                                o.binary(Op::Less, local, o.scalar(static_cast<double>(rows), DType::i64))});
  ValueId row = o.where(mine, local, o.scalar(0, DType::i64));
  ValueId keep = o.reshape(o.cast(mine, DType::f32), {0, 0, 1});
  return tp_all_reduce(o, tp, o.mul(o.embedding(table, row), keep));
}

ValueId gather_vocab_logits(OpBuilder& o, const TensorParallel& tp, ValueId logits, int64_t vocab) {
  if (!tp.active()) return logits;
  ValueId all = o.op(Op::AllGather, {logits}, Attrs{{"axis", int64_t{-1}}, {"ranks", int64_t{tp.size}}});
  if (tp.vocab_rows(vocab) * tp.size == vocab) return all;
  return o.slice(all, {0}, {vocab}, {-1});
}

}  // namespace rlx::models

// Type rules of the collectives (all_reduce, all_gather, reduce_scatter, broadcast). Their
// output shapes depend on the group size, so all_gather and reduce_scatter carry it as the
// `ranks` attribute: a graph says what it expects, and running it on a communicator of another
// size is an error at run time rather than a silently different shape. Complex and packed
// 4-bit tensors are refused: the communicators reduce real elements of whole bytes.
#include "infer_util.h"

namespace rlx::infer {
namespace {

Status check_reduce(Op op, const NodeSig& sig) {
  const std::string r = sig.attrs.s("reduce", "sum");
  if (r != "sum" && r != "max" && r != "min" && r != "prod")
    return fail(ErrorCode::invalid_argument, op, sig, "reduce must be sum, max, min or prod, got '", r, "'");
  return expect_numeric(op, sig, 0);
}

}  // namespace

Expected<Types> infer_collective(Op op, const NodeSig& sig) {
  const TensorType& x = sig.inputs[0];
  // the communicators move and reduce whole real elements (rlx/comm.h)
  if (is_complex(x.dtype) || dtype_bits(x.dtype) < 8)
    return fail(ErrorCode::dtype_error, op, sig, "collectives take real dtypes of whole bytes, got ",
                dtype_name(x.dtype));
  if (op == Op::AllReduce) {
    RLX_TRY(check_reduce(op, sig));
    return Types{x};
  }
  if (op == Op::Broadcast) {
    if (sig.attrs.i("root", 0) < 0)
      return fail(ErrorCode::invalid_argument, op, sig, "root must be a rank (>= 0), got ", sig.attrs.i("root", 0));
    return Types{x};
  }
  const int64_t ranks = sig.attrs.i("ranks", 0);
  if (ranks < 1) return fail(ErrorCode::invalid_argument, op, sig, "ranks must be >= 1, got ", ranks);
  if (x.rank() == 0) return fail(ErrorCode::shape_error, op, sig, "needs a tensor of rank >= 1, got a scalar");
  auto axis = normalize_axis(sig.attrs.i("axis", 0), x.rank());
  if (!axis) return fail(ErrorCode::invalid_argument, op, sig, axis.status().message());
  TensorType out = x;
  Dim& d = out.shape[*axis];
  if (op == Op::AllGather) {
    if (d.is_static()) d = Dim(d.size() * ranks);
    else d = Dim::unknown();
    return Types{out};
  }
  RLX_TRY(check_reduce(op, sig));
  if (d.is_static()) {
    if (d.size() % ranks != 0)
      return fail(ErrorCode::shape_error, op, sig, "axis ", *axis, " has ", d.size(),
                  " elements, not a multiple of ranks=", ranks, ": ", x.to_string());
    d = Dim(d.size() / ranks);
  } else {
    d = Dim::unknown();
  }
  return Types{out};
}

}  // namespace rlx::infer

// ONNX reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}, ArgMax/ArgMin.
#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

enum class Pre { none, abs, square };
enum class Post { none, sqrt, log };

MapFn reduce(Op op, Pre pre, Post post, bool logsumexp = false) {
  return [=](Importer& m) -> Status {
    RLX_TRY(m.only_attrs({"axes", "keepdims", "noop_with_empty_axes"}));
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    OpBuilder& o = m.o();
    std::vector<int64_t> axes = m.aints("axes");
    if (m.has(1)) {
      RLX_ASSIGN_OR_RETURN(axes, m.ints(1));
    }
    bool keep = m.ai("keepdims", 1) != 0;
    ValueId v = x;
    if (pre == Pre::abs) v = o.abs(v);
    if (pre == Pre::square) v = o.mul(v, v);
    if (axes.empty() && m.ai("noop_with_empty_axes", 0) != 0) {
      // a reduction over no axes: each element is its own group, so the element-wise parts
      // remain (ReduceL1 gives |x|, ReduceSumSquare x^2, ReduceLogSum log x), as ONNX
      // Runtime computes it
      if (post == Post::sqrt) v = o.sqrt(v);
      if (post == Post::log) v = o.log(v);
      if (v == x) v = o.reshape(x, std::vector<int64_t>(o.rank(x), 0));
      return m.out(0, v);
    }
    if (axes.empty())
      for (int i = 0; i < o.rank(x); ++i) axes.push_back(i);
    if (logsumexp) {
      // log(sum(exp(x - max))) + max, stable
      ValueId mx = o.reduce(Op::ReduceMax, v, axes, true);
      ValueId s = o.reduce_sum(o.exp(o.sub(v, mx)), axes, keep);
      ValueId mk = keep ? mx : o.reduce(Op::ReduceMax, v, axes, false);
      return m.out(0, o.add(o.log(s), mk));
    }
    ValueId r = o.reduce(op, v, axes, keep);
    if (post == Post::sqrt) r = o.sqrt(r);
    if (post == Post::log) r = o.log(r);
    return m.out(0, r);
  };
}

MapFn arg(Op op) {
  return [op](Importer& m) -> Status {
    RLX_TRY(m.only_attrs({"axis", "keepdims", "select_last_index"}));
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    return m.out(0, m.o().op(op, {x},
                             Attrs{{"axis", m.ai("axis", 0)}, {"keepdims", m.ai("keepdims", 1)},
                                   {"select_last_index", m.ai("select_last_index", 0)}}));
  };
}

}  // namespace

void register_reduce_ops(OpTable& t) {
  t["ReduceSum"] = {reduce(Op::ReduceSum, Pre::none, Post::none)};
  t["ReduceMean"] = {reduce(Op::ReduceMean, Pre::none, Post::none)};
  t["ReduceMax"] = {reduce(Op::ReduceMax, Pre::none, Post::none)};
  t["ReduceMin"] = {reduce(Op::ReduceMin, Pre::none, Post::none)};
  t["ReduceProd"] = {reduce(Op::ReduceProd, Pre::none, Post::none)};
  t["ReduceL1"] = {reduce(Op::ReduceSum, Pre::abs, Post::none)};
  t["ReduceL2"] = {reduce(Op::ReduceSum, Pre::square, Post::sqrt)};
  t["ReduceSumSquare"] = {reduce(Op::ReduceSum, Pre::square, Post::none)};
  t["ReduceLogSum"] = {reduce(Op::ReduceSum, Pre::none, Post::log)};
  t["ReduceLogSumExp"] = {reduce(Op::ReduceSum, Pre::none, Post::none, true)};
  t["ArgMax"] = {arg(Op::ArgMax)};
  t["ArgMin"] = {arg(Op::ArgMin)};
}

}  // namespace rlx::onnx_import

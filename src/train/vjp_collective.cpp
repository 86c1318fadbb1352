// Vector-Jacobian rules of the collectives, for the function the whole job computes: rank r's
// output of all_reduce(sum) is the sum of every rank's input, so the gradient of rank s's
// input is the sum over ranks of their output gradients, all_reduce(sum) again. Likewise
// all_gather and reduce_scatter(sum) are each other's adjoints. A loss replicated on every
// rank therefore counts once per rank (scale it by 1/ranks for Megatron's convention).
// max, min and prod reductions have no rule: their gradient needs the arg-extreme rank.
// An all_reduce with grad=identity is Megatron's "g" (the sum after a row-split product, whose
// result every rank then uses identically up to the loss): its gradient is the output gradient
// as it is, i.e. the adjoint for a loss counted once for the group rather than once per rank;
// the replicated parameters after it get equal gradients on every rank without communication.
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

Status need_sum(Ctx& c) {
  const std::string r = c.attrs().s("reduce", "sum");
  if (r != "sum")
    return error(ErrorCode::unsupported, "no gradient for ", op_name(c.node.op), " with reduce=", r,
                 " (only sum is differentiable)");
  return Status::ok();
}

// The node's communicator group, carried over to its adjoint (the same ranks).
Attrs with_group(Ctx& c, Attrs a) {
  if (c.attrs().has("group")) a.set("group", c.attrs().i("group", 0));
  return a;
}

Status all_reduce(Ctx& c, std::vector<ValueId>& out) {
  RLX_TRY(need_sum(c));
  const std::string grad = c.attrs().s("grad", "sum");
  if (grad == "identity") {  // Megatron's row-parallel all-reduce (see the top of this file)
    out[0] = c.g();
    return Status::ok();
  }
  if (grad != "sum")
    return error(ErrorCode::invalid_argument, "all_reduce grad must be sum or identity, got '", grad, "'");
  out[0] = c.o.op(Op::AllReduce, {c.g()}, with_group(c, Attrs{{"reduce", std::string("sum")}}));
  return c.o.status();
}

Status all_gather(Ctx& c, std::vector<ValueId>& out) {
  out[0] = c.o.op(Op::ReduceScatter, {c.g()},
                  with_group(c, Attrs{{"axis", c.attrs().i("axis", 0)}, {"ranks", c.attrs().i("ranks", 0)},
                                      {"reduce", std::string("sum")}}));
  return c.o.status();
}

Status reduce_scatter(Ctx& c, std::vector<ValueId>& out) {
  RLX_TRY(need_sum(c));
  out[0] = c.o.op(Op::AllGather, {c.g()},
                  with_group(c, Attrs{{"axis", c.attrs().i("axis", 0)}, {"ranks", c.attrs().i("ranks", 0)}}));
  return c.o.status();
}

}  // namespace

void register_collective_vjps(std::vector<Rule>& t) {
  t[static_cast<size_t>(Op::AllReduce)] = all_reduce;
  t[static_cast<size_t>(Op::AllGather)] = all_gather;
  t[static_cast<size_t>(Op::ReduceScatter)] = reduce_scatter;
}

}  // namespace rlx::train::vjp

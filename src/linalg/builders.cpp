// The rlx/linalg.h builder functions: one node each.
#include "rlx/linalg.h"

namespace rlx::linalg {
namespace {

std::vector<ValueId> outs(OpBuilder& o, Op op, std::vector<ValueId> in, size_t n, Attrs a = {}) {
  std::vector<ValueId> r = o.op_multi(op, std::move(in), std::move(a));
  r.resize(n, kNoValue);  // a failed builder returns fewer; o.status() holds the error
  return r;
}

}  // namespace

LuResult lu(OpBuilder& o, ValueId a) {
  auto r = outs(o, Op::Lu, {a}, 2);
  return {r[0], r[1]};
}
ValueId cholesky(OpBuilder& o, ValueId a) { return o.op(Op::Cholesky, {a}); }
QrResult qr(OpBuilder& o, ValueId a) {
  auto r = outs(o, Op::Qr, {a}, 2);
  return {r[0], r[1]};
}
SvdResult svd(OpBuilder& o, ValueId a) {
  auto r = outs(o, Op::Svd, {a}, 3);
  return {r[0], r[1], r[2]};
}
EighResult eigh(OpBuilder& o, ValueId a) {
  auto r = outs(o, Op::Eigh, {a}, 2);
  return {r[0], r[1]};
}
ValueId triangular_solve(OpBuilder& o, ValueId a, ValueId b, bool lower, bool transpose, bool unit_diagonal) {
  return o.op(Op::TriangularSolve, {a, b},
              Attrs{{"lower", int64_t{lower}}, {"transpose", int64_t{transpose}}, {"unit_diagonal", int64_t{unit_diagonal}}});
}
ValueId solve(OpBuilder& o, ValueId a, ValueId b) { return o.op(Op::Solve, {a, b}); }
ValueId det(OpBuilder& o, ValueId a) { return o.op(Op::Det, {a}); }
SlogdetResult slogdet(OpBuilder& o, ValueId a) {
  auto r = outs(o, Op::Slogdet, {a}, 2);
  return {r[0], r[1]};
}
ValueId lstsq(OpBuilder& o, ValueId a, ValueId b) { return o.op(Op::Lstsq, {a, b}); }

}  // namespace rlx::linalg

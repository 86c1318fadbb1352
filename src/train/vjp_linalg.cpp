// Vector-Jacobian rules of the dense linear-algebra ops. Each is the standard formula,
// written with graph-level ops (matmul, transposes, triangular masks from iota, and the
// linalg ops themselves), so that the backward of a factorization runs where its forward does.
// Notation: X^T transposes the last two axes; tril/triu keep the lower/upper triangle
// (tril_s/triu_s the strict one); I is the identity.
//
//   cholesky (of (A + A^T)/2):  S = tril(L^T gL), Phi = (S + tril_s(S)^T) / 2,
//                               gA = L^-T Phi L^-1   (symmetric; Murray 2016 / PyTorch)
//   eigh (of (A + A^T)/2):      F_ij = 1 / (w_j - w_i) (0 on the diagonal),
//                               G = V (diag(gw) + F o (V^T gV)) V^T, gA = (G + G^T) / 2
//   svd (reduced, k = min(m,n)): E_jk = s_k^2 - s_j^2, J = (U^T gU - gU^T U) / E,
//                               K = (V^T gV - gV^T V) / E,
//                               gA = U (J diag(s) + diag(s) K + diag(gs)) V^T
//                                    + (I - U U^T) gU diag(1/s) V^T + U diag(1/s) gV^T (I - V V^T)
//                               (Townsend 2016; needs distinct, nonzero singular values)
//   qr (m >= n):                M = gR R^T - Q^T gQ, N = triu(M) + tril_s(M^T),
//                               gA = (gQ + Q N) R^-T
//   lu (P A = L U):             gA = P^T L^-T (tril_s(L^T gL) + triu(gU U^T)) U^-T
//   triangular_solve:           gB = op(A)^-T gX; gA = -gB X^T (transpose=0) or -X gB^T
//                               (transpose=1), kept on the triangle the op reads
//   solve:                      gB = A^-T gX, gA = -gB X^T
//   det / slogdet:              gA = g det A^-T / g_logabsdet A^-T (sign has no gradient)
//   lstsq (full column rank):   Y = (A^T A)^-1 gX, r = B - A X, gA = r Y^T - A Y X^T, gB = A Y
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

using I = std::vector<int64_t>;

struct Lin {
  OpBuilder& o;
  DType dt;

  ValueId mT(ValueId x) {
    const int r = o.rank(x);
    I perm;
    for (int i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[r - 1], perm[r - 2]);
    return o.transpose(x, perm);
  }
  ValueId mm(ValueId a, ValueId b) { return o.matmul(a, b); }
  // [n, m] mask: which (i, j) to keep
  ValueId mask(int64_t n, int64_t m, Op cmp) {
    return o.op(cmp, {o.iota(DType::i64, {n, m}, 1), o.iota(DType::i64, {n, m}, 0)});
  }
  ValueId keep(ValueId x, Op cmp) {
    const Sizes s = sizes_of(o, x);
    return o.where(mask(s[s.size() - 2], s.back(), cmp), x, o.scalar(0.0, dt));
  }
  ValueId tril(ValueId x) { return keep(x, Op::LessEqual); }   // j <= i
  ValueId tril_s(ValueId x) { return keep(x, Op::Less); }     // j < i
  ValueId triu(ValueId x) { return keep(x, Op::GreaterEqual); }
  ValueId eye(int64_t n) { return o.cast(mask(n, n, Op::Equal), dt); }
  ValueId unsq(ValueId x, int64_t axis) { return o.op(Op::Unsqueeze, {x}, Attrs{{"axes", I{axis}}}); }
  // diag(v) for v [..., n]
  ValueId diag(ValueId v) {
    const Sizes s = sizes_of(o, v);
    return o.mul(unsq(v, -1), eye(s.back()));
  }
  ValueId tsolve(ValueId a, ValueId b, bool lower, bool trans, bool unit = false) {
    return o.op(Op::TriangularSolve, {a, b},
                Attrs{{"lower", int64_t{lower}}, {"transpose", int64_t{trans}}, {"unit_diagonal", int64_t{unit}}});
  }
  // Y op(A)^-1 for triangular A: X op(A) = Y  <=>  op(A)^T X^T = Y^T
  ValueId tsolve_right(ValueId a, ValueId y, bool lower, bool trans, bool unit = false) {
    return mT(tsolve(a, mT(y), lower, !trans, unit));
  }
  ValueId sym(ValueId g) { return o.mul(o.add(g, mT(g)), o.scalar(0.5, dt)); }
  // A^-T for square A [..., n, n]
  ValueId inv_t(ValueId a) {
    const Sizes s = sizes_of(o, a);
    return o.op(Op::Solve, {mT(a), o.broadcast_to(eye(s.back()), s)});
  }
};

// The gradient of output i, or zeros of its type when it has none.
ValueId grad_or_zero(Ctx& c, int i) {
  if (c.out_grads[i] != kNoValue) return c.out_grads[i];
  return zeros(c.o, c.out_types[i].dtype, sizes_of(c.out_types[i]));
}

Lin lin(Ctx& c) { return Lin{c.o, c.dtype(0)}; }

Status cholesky(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  const ValueId l = c.out();
  ValueId s = m.tril(m.mm(m.mT(l), c.g()));
  ValueId phi = m.o.mul(m.o.add(s, m.mT(m.tril_s(s))), m.o.scalar(0.5, m.dt));
  // L^-T Phi L^-1
  out[0] = m.tsolve_right(l, m.tsolve(l, phi, true, true), true, false);
  return c.o.status();
}

Status eigh(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  const ValueId w = c.out(0), v = c.out(1);
  const int64_t n = sizes_of(c.out_types[0]).back();
  ValueId inner = zeros(o, m.dt, sizes_of(c.in_types[0]));
  if (c.out_grads[0] != kNoValue) inner = o.add(inner, m.diag(c.out_grads[0]));
  if (c.out_grads[1] != kNoValue) {
    ValueId e = o.sub(m.unsq(w, -2), m.unsq(w, -1));  // e_ij = w_j - w_i
    ValueId is_diag = m.mask(n, n, Op::Equal);
    ValueId f = o.where(is_diag, o.scalar(0.0, m.dt), o.reciprocal(o.where(is_diag, o.scalar(1.0, m.dt), e)));
    inner = o.add(inner, o.mul(f, m.mm(m.mT(v), c.out_grads[1])));
  }
  out[0] = m.sym(m.mm(m.mm(v, inner), m.mT(v)));
  return o.status();
}

Status svd(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  const ValueId u = c.out(0), s = c.out(1), vh = c.out(2);
  const Sizes as = sizes_of(c.in_types[0]);
  const int64_t rows = as[as.size() - 2], cols = as.back(), k = std::min(rows, cols);
  const ValueId v = m.mT(vh);
  Sizes kk_shape = sizes_of(c.out_types[1]);  // batch + [k, k]
  kk_shape.push_back(k);
  ValueId inner = zeros(o, m.dt, kk_shape);
  if (c.out_grads[1] != kNoValue) inner = o.add(inner, m.diag(c.out_grads[1]));
  ValueId is_diag = m.mask(k, k, Op::Equal);
  ValueId s2 = o.mul(s, s);
  ValueId e = o.sub(m.unsq(s2, -2), m.unsq(s2, -1));  // e_jk = s_k^2 - s_j^2
  ValueId e_safe = o.where(is_diag, o.scalar(1.0, m.dt), e);
  ValueId s_row = m.unsq(s, -2), s_col = m.unsq(s, -1);  // [..., 1, k] and [..., k, 1]
  ValueId inv_s_row = o.reciprocal(s_row);
  ValueId result = kNoValue;
  if (c.out_grads[0] != kNoValue) {
    const ValueId gu = c.out_grads[0];
    ValueId utgu = m.mm(m.mT(u), gu);
    ValueId j = o.div(o.sub(utgu, m.mT(utgu)), e_safe);
    inner = o.add(inner, o.mul(j, s_row));  // J diag(s)
    if (rows > k) {
      ValueId gus = o.mul(gu, inv_s_row);  // gU diag(1/s)
      ValueId proj = o.sub(gus, m.mm(u, m.mm(m.mT(u), gus)));
      result = m.mm(proj, vh);
    }
  }
  if (c.out_grads[2] != kNoValue) {
    const ValueId gv = m.mT(c.out_grads[2]);
    ValueId vtgv = m.mm(m.mT(v), gv);
    ValueId kk = o.div(o.sub(vtgv, m.mT(vtgv)), e_safe);
    inner = o.add(inner, o.mul(s_col, kk));  // diag(s) K
    if (cols > k) {
      ValueId gvs = o.mul(gv, inv_s_row);  // gV diag(1/s)
      ValueId proj = o.sub(gvs, m.mm(v, m.mm(m.mT(v), gvs)));  // (I - V V^T) gV diag(1/s)
      ValueId t = m.mm(u, m.mT(proj));
      result = result == kNoValue ? t : o.add(result, t);
    }
  }
  ValueId main = m.mm(m.mm(u, inner), vh);
  out[0] = result == kNoValue ? main : o.add(main, result);
  return o.status();
}

Status qr(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  const Sizes as = sizes_of(c.in_types[0]);
  if (as[as.size() - 2] < as.back())
    return error(ErrorCode::unsupported, "the gradient of qr needs m >= n (a tall or square A), got ",
                 sizes_to_string(as));
  const ValueId q = c.out(0), r = c.out(1);
  const ValueId gq = grad_or_zero(c, 0), gr = grad_or_zero(c, 1);
  ValueId mmat = o.sub(m.mm(gr, m.mT(r)), m.mm(m.mT(q), gq));
  ValueId nmat = o.add(m.triu(mmat), m.tril_s(m.mT(mmat)));
  out[0] = m.tsolve_right(r, o.add(gq, m.mm(q, nmat)), false, true);  // (...) R^-T
  return o.status();
}

Status lu(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  const ValueId packed = c.out(0), perm = c.out(1);
  const int64_t n = sizes_of(c.in_types[0]).back();
  const ValueId g = c.g();
  ValueId l = o.add(m.tril_s(packed), m.eye(n));
  ValueId u = m.triu(packed);
  ValueId inner = o.add(m.tril_s(m.mm(m.mT(l), m.tril_s(g))), m.triu(m.mm(m.triu(g), m.mT(u))));
  // L^-T inner U^-T, with the triangles read straight from the packed factor
  ValueId gap = m.tsolve_right(packed, m.tsolve(packed, inner, true, true, true), false, true);
  // P_ij = [perm_i == j]; A = P^T (L U), so gA = P^T gAp
  ValueId p = o.cast(o.op(Op::Equal, {m.unsq(perm, -1), o.iota(DType::i64, {n}, 0)}), m.dt);
  out[0] = m.mm(m.mT(p), gap);
  return o.status();
}

Status triangular_solve(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  const bool lower = c.attrs().i("lower", 1) != 0, trans = c.attrs().i("transpose", 0) != 0,
             unit = c.attrs().i("unit_diagonal", 0) != 0;
  const ValueId a = c.in(0), x = c.out();
  ValueId gb = m.tsolve(a, c.g(), lower, !trans, unit);
  if (c.need(1)) out[1] = gb;
  if (c.need(0)) {
    ValueId ga = o.neg(trans ? m.mm(x, m.mT(gb)) : m.mm(gb, m.mT(x)));
    out[0] = m.keep(ga, lower ? (unit ? Op::Less : Op::LessEqual) : (unit ? Op::Greater : Op::GreaterEqual));
  }
  return o.status();
}

Status solve(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  ValueId gb = o.op(Op::Solve, {m.mT(c.in(0)), c.g()});
  if (c.need(1)) out[1] = gb;
  if (c.need(0)) out[0] = o.neg(m.mm(gb, m.mT(c.out())));
  return o.status();
}

Status det(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  ValueId scale = c.node.op == Op::Det ? o.mul(c.g(), c.out(0)) : c.out_grads[1];
  if (scale == kNoValue) {
    out[0] = zeros(o, m.dt, sizes_of(c.in_types[0]));
    return o.status();
  }
  out[0] = o.mul(m.unsq(m.unsq(scale, -1), -1), m.inv_t(c.in(0)));
  return o.status();
}

Status lstsq(Ctx& c, std::vector<ValueId>& out) {
  Lin m = lin(c);
  OpBuilder& o = c.o;
  const ValueId a = c.in(0), b = c.in(1), x = c.out();
  ValueId y = o.op(Op::Solve, {m.mm(m.mT(a), a), c.g()});
  ValueId ay = m.mm(a, y);
  if (c.need(1)) out[1] = ay;
  if (c.need(0)) {
    ValueId r = o.sub(b, m.mm(a, x));
    out[0] = o.sub(m.mm(r, m.mT(y)), m.mm(ay, m.mT(x)));
  }
  return o.status();
}

}  // namespace

void register_linalg_vjps(std::vector<Rule>& t) {
  t[static_cast<size_t>(Op::Cholesky)] = cholesky;
  t[static_cast<size_t>(Op::Eigh)] = eigh;
  t[static_cast<size_t>(Op::Svd)] = svd;
  t[static_cast<size_t>(Op::Qr)] = qr;
  t[static_cast<size_t>(Op::Lu)] = lu;
  t[static_cast<size_t>(Op::TriangularSolve)] = triangular_solve;
  t[static_cast<size_t>(Op::Solve)] = solve;
  t[static_cast<size_t>(Op::Det)] = det;
  t[static_cast<size_t>(Op::Slogdet)] = det;
  t[static_cast<size_t>(Op::Lstsq)] = lstsq;
}

}  // namespace rlx::train::vjp

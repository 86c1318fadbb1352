// Building generated kernels: hash-consed scalar expressions, and affine index math with
// range-based simplification, so that views (reshape, transpose, broadcast, slices) compose
// into plain strided indices instead of divisions and remainders.
#pragma once

#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "rlx/kernel_ir.h"

namespace rlx::sched {

// An index in affine form: sum of coeff * atom, plus a constant. Atoms are loop variables
// or opaque sub-expressions (floor-divisions, remainders, clamps, data-dependent indices).
struct Ix {
  std::vector<std::pair<int, int64_t>> terms;  // (atom id, coefficient), sorted by atom id
  int64_t constant = 0;
};

class KernelBuilder {
 public:
  explicit KernelBuilder(kir::GeneratedKernel& k) : k_(k) {}

  kir::GeneratedKernel& kernel() { return k_; }
  int add_loop(int64_t extent);

  // Expressions (hash-consed: equal expressions share one id).
  int add(kir::Expr e);
  int iconst(int64_t v, DType dt = DType::i64);
  int fconst(double v, DType dt, double im = 0.0);  // c64: v + i im (im in fval2)
  int var(int loop);
  // buffer `arg` at `index`; with guard >= 0 (a boolean expression) read only where it holds
  // (kir::ExprKind::load)
  int load(int arg, DType dt, int index, int guard = -1);
  int unary(Op op, int a, DType out, int64_t ival = 0, int64_t ival2 = 0);
  int binary(Op op, int a, int b, DType out);
  // y when expression e is the f32 value y rounded to f16 and widened back, else -1.
  int f16_round_trip_source(int e) const;
  int select(int c, int a, int b);
  int cast(int a, DType to);
  int reduce(Op op, int body, std::vector<int> loops, DType out, int64_t ival = 0);
  const kir::Expr& expr(int id) const { return k_.exprs[id]; }

  // Index math.
  Ix ix_const(int64_t c) const { return Ix{{}, c}; }
  Ix ix_loop(int loop);
  Ix ix_opaque(int expr, int64_t lo, int64_t hi);  // a data-dependent index known to lie in [lo, hi]
  Ix ix_add(const Ix& a, const Ix& b);
  Ix ix_scale(const Ix& a, int64_t c);
  Ix ix_div(const Ix& a, int64_t d);   // floor division by d > 0 (operand non-negative)
  Ix ix_mod(const Ix& a, int64_t d);   // remainder by d > 0 (operand non-negative)
  Ix ix_clamp(const Ix& a, int64_t lo, int64_t hi);
  // a, which every load that reads at it tests to lie in [lo, hi] (guarded loads: a pad's
  // bounds test): simplified as a value in [lo, hi] and computed as it is, without the clamp
  // (so that a shifted row stays contiguous, a masked load once vectorized)
  Ix ix_assume(const Ix& a, int64_t lo, int64_t hi);
  std::pair<int64_t, int64_t> ix_range(const Ix& a) const;
  // The i64 expression computing the index.
  int ix_expr(const Ix& a);
  // sum idx[i] * strides[i]
  Ix linearize(const std::vector<Ix>& idx, const Sizes& strides);
  // Row-major multi-index of `flat` in `sizes`.
  std::vector<Ix> unravel(const Ix& flat, const Sizes& sizes);
  // Loops a (index or value) expression depends on.
  const std::vector<int>& loops_of(int expr);

 private:
  enum class AtomKind : uint8_t { loop, div, mod, clamp, opaque, assumed };
  struct Atom {
    AtomKind kind;
    int loop = -1;
    Ix inner;
    int64_t d = 0, lo = 0, hi = 0;
    int expr = -1;
  };
  // a = g * multiple + below with 0 <= below < g, for a factor g of d (1 < g < d); then
  // floor(a / d) = floor(multiple / (d / g)) and a mod d = g * (multiple mod (d / g)) + below.
  // im2col's (121 * row + col) / 1089 with col < 121 becomes row / 9, hoisted out of the loop
  // over col instead of an i64 division per element (which keeps the loop scalar).
  struct CommonFactor {
    int64_t g;
    Ix multiple, below;
  };
  std::optional<CommonFactor> common_factor(const Ix& a, int64_t d) const;
  int atom(Atom a);
  Ix normalize(Ix a);
  bool merge_div_mod(Ix& a);
  std::pair<int64_t, int64_t> atom_range(int id) const;
  std::string atom_key(const Atom& a) const;
  int atom_expr(int id);

  kir::GeneratedKernel& k_;
  std::unordered_map<std::string, int> expr_index_;
  std::vector<Atom> atoms_;
  std::map<std::string, int> atom_index_;
  std::vector<std::vector<int>> expr_loops_;
};

}  // namespace rlx::sched

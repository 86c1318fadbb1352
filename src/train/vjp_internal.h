// The vector-Jacobian rules behind autodiff.h, one file per op family (vjp_*.cpp), and the
// helpers they share. A rule sees one forward node and the gradients of its outputs, and
// emits graph-level ops that compute the gradients of the inputs it is asked for.
#pragma once

#include <vector>

#include "rlx/op_builder.h"

namespace rlx::train::vjp {

struct Ctx {
  OpBuilder& o;
  Node node;                            // a copy: emitting nodes may reallocate the graph
  std::vector<TensorType> in_types, out_types;
  std::vector<ValueId> out_grads;       // per output; kNoValue where the output has none
  std::vector<char> needs;              // per input: its gradient is wanted
  std::vector<ValueId>* reuse = nullptr;  // materialization hints (Gradients::reuse)

  ValueId in(int i) const { return node.inputs[i]; }
  ValueId out(int i = 0) const { return node.outputs[i]; }
  // Gradient of output 0 (single-output rules are only called when it exists).
  ValueId g() const { return out_grads[0]; }
  const Attrs& attrs() const { return node.attrs; }
  DType dtype(int i = 0) const { return in_types[i].dtype; }
  bool need(int i) const { return i < static_cast<int>(needs.size()) && needs[i]; }
  int rank(int i = 0) const { return in_types[i].rank(); }
  // A rank-0 constant of input i's dtype.
  ValueId c(double v, int i = 0) { return o.scalar(v, in_types[i].dtype); }
  // Records that v is read many times per element by what consumes it.
  void hint_reuse(ValueId v) {
    if (reuse && v != kNoValue) reuse->push_back(v);
  }
};

// Fills in_grads[i] (sized to the node's inputs, kNoValue-initialized) for inputs with need(i).
using Rule = Status (*)(Ctx& c, std::vector<ValueId>& in_grads);

void register_elementwise_vjps(std::vector<Rule>& t);
void register_reduce_vjps(std::vector<Rule>& t);
void register_movement_vjps(std::vector<Rule>& t);
void register_contraction_vjps(std::vector<Rule>& t);
void register_conv_vjps(std::vector<Rule>& t);
void register_attention_vjps(std::vector<Rule>& t);
void register_linalg_vjps(std::vector<Rule>& t);
void register_sparse_vjps(std::vector<Rule>& t);  // spmv_csr, sddmm_csr, sparse_solve
void register_splat_vjps(std::vector<Rule>& t);   // splat_project, splat_rasterize
void register_collective_vjps(std::vector<Rule>& t);
void register_quant_vjps(std::vector<Rule>& t);  // fake_quantize (straight-through)
const std::vector<Rule>& rule_table();

// ---- helpers (vjp_util.cpp) ----

Sizes sizes_of(const TensorType& t);
Sizes sizes_of(OpBuilder& o, ValueId v);
// Sum of g (whose shape broadcasts from `target`) back to `target`: reduce the leading extra
// axes and the axes where target has 1.
ValueId sum_to(OpBuilder& o, ValueId g, const Sizes& target);
// A zero tensor. Built as 0 * iota so that constant folding (which folds an expand of a scalar
// into a materialized constant of the full size) leaves it to the scheduler to inline.
ValueId zeros(OpBuilder& o, DType dt, const Sizes& s);
// The adjoint of strided_slice(x, starts, steps, sizes) with x of shape `in`: g placed at the
// positions the slice read, zeros elsewhere. Uses only reshape, pad and strided_slice
// (interior zeros for steps > 1 come from padding an inserted unit axis), so the scheduler
// fuses it into index arithmetic.
ValueId unslice(OpBuilder& o, ValueId g, const Sizes& in, std::vector<int64_t> starts, std::vector<int64_t> steps,
                const Sizes& sizes);
// Axes normalized against rank, sorted; empty = all.
std::vector<int64_t> norm_axes(std::vector<int64_t> axes, int rank);
// The shape of a reduction's result with keepdims = 1.
Sizes keepdims_shape(const Sizes& in, const std::vector<int64_t>& axes);
// Element count over `axes` of `in`.
double count_over(const Sizes& in, const std::vector<int64_t>& axes);
// Inverse permutation.
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm);
// transpose unless perm is the identity.
ValueId transpose_if(OpBuilder& o, ValueId v, const std::vector<int64_t>& perm);
// reshape unless the shape already is `s` (a no-op reshape would be a node of its own).
ValueId reshape_if(OpBuilder& o, ValueId v, const Sizes& s);

}  // namespace rlx::train::vjp

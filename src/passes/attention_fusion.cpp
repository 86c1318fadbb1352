// Attention fusion: the scaled dot-product attention that exporters write out op by op
// (PyTorch's BERT export: Q, K and V reshaped to [B, S, H, D] and transposed to heads first,
// MatMul(Q, K^T), Div by sqrt(D), Add of an additive mask, Softmax over the keys, MatMul by V)
// becomes one `attention` node reading Q, K and V in the bshd layout as they were before the
// transposes. A device that runs attention natively then never materializes the [B, H, S, S]
// scores; one that does not decomposes the node into the same products and softmax.
//
// The match is exact or nothing: every intermediate has this chain as its only reader, the
// transposes have exactly these permutations, the scale is a scalar constant applied to the
// raw scores (before the mask), the softmax is over the last axis, all operands are f32 with
// static shapes, Q/K/V agree on batch and heads, and the mask broadcasts to [B, H, Sq, Sk].
#include <cmath>
#include <optional>

#include "graph_passes.h"
#include "rewrite_util.h"

namespace rlx::passes {
namespace {

struct Match {
  size_t qk = 0, scale_node = 0, add = 0, softmax = 0, pv = 0, out_transpose = 0;
  bool has_scale = false, has_add = false, has_out_transpose = false;
  ValueId q = kNoValue, k = kNoValue, v = kNoValue, mask = kNoValue;
  double scale = 1.0;
};

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), uses_(g.use_counts()) {}

  std::optional<Match> at(size_t pv_index) const {
    const Node& pv = g_.nodes[pv_index];
    if (pv.op != Op::MatMul || pv.inputs.size() != 2) return std::nullopt;
    Match m;
    m.pv = pv_index;
    auto sm = only_reader_producer(pv.inputs[0], Op::Softmax);
    if (!sm) return std::nullopt;
    const Node& softmax = g_.nodes[*sm];
    const int64_t axis = softmax.attrs.i("axis", -1);
    if (axis != -1 && axis != 3) return std::nullopt;
    m.softmax = *sm;
    ValueId scores = softmax.inputs[0];
    if (auto add = only_reader_producer(scores, Op::Add)) {
      const Node& a = g_.nodes[*add];
      for (int side = 0; side < 2 && !m.has_add; ++side) {
        Match trial = m;
        if (scaled_scores(a.inputs[side], trial)) {
          m = trial;
          m.has_add = true;
          m.add = *add;
          m.mask = a.inputs[1 - side];
        }
      }
      if (!m.has_add) return std::nullopt;
    } else if (!scaled_scores(scores, m)) {
      return std::nullopt;
    }
    auto v = transposed_from(pv.inputs[1], {0, 2, 1, 3});
    if (!v) return std::nullopt;
    m.v = *v;
    if (!shapes_agree(m)) return std::nullopt;
    // the output goes back to [B, S, H, Dv] right away in exported graphs: that transpose
    // becomes the attention's own bshd output
    const ValueId out = pv.outputs[0];
    if (uses_[out] == 1)
      for (size_t i = pv_index + 1; i < g_.nodes.size(); ++i) {
        const Node& n = g_.nodes[i];
        if (n.inputs.size() == 1 && n.inputs[0] == out) {
          if (n.op == Op::Transpose && n.attrs.ints("perm") == std::vector<int64_t>{0, 2, 1, 3}) {
            m.has_out_transpose = true;
            m.out_transpose = i;
          }
          break;
        }
      }
    return m;
  }

 private:
  // The producer of v if it is an `op` node and v has no other reader.
  std::optional<size_t> only_reader_producer(ValueId v, Op op) const {
    const int32_t p = g_.values[v].producer;
    if (p < 0 || uses_[v] != 1 || g_.nodes[p].op != op) return std::nullopt;
    return static_cast<size_t>(p);
  }

  // x if v = transpose(x, perm) with x a static f32 rank-4 tensor.
  std::optional<ValueId> transposed_from(ValueId v, const std::vector<int64_t>& perm) const {
    const int32_t p = g_.values[v].producer;
    if (p < 0 || g_.nodes[p].op != Op::Transpose || g_.nodes[p].attrs.ints("perm") != perm) return std::nullopt;
    const ValueId x = g_.nodes[p].inputs[0];
    const TensorType& t = g_.type(x);
    if (t.dtype != DType::f32 || t.shape.size() != 4 || !is_static(t.shape)) return std::nullopt;
    return x;
  }

  // The value of a scalar constant (a constant node or a weight of one element).
  std::optional<double> scalar_constant(ValueId v) const {
    const int32_t p = g_.values[v].producer;
    if (p < 0) return std::nullopt;
    const Node& n = g_.nodes[p];
    const Tensor* t = nullptr;
    if (n.op == Op::Constant) {
      t = n.attrs.tensor("value");
    } else if (n.op == Op::Param) {
      auto it = g_.weights.find(n.attrs.s("name"));
      if (it != g_.weights.end()) t = &it->second;
    }
    if (!t || !t->defined() || t->numel() != 1 || !is_float(t->dtype())) return std::nullopt;
    return t->get_f64(0);
  }

  // v = matmul(transpose(q), transpose(k)) [* c | / c]: fills q, k, the scale and the nodes.
  bool scaled_scores(ValueId v, Match& m) const {
    ValueId raw = v;
    const int32_t p = g_.values[v].producer;
    if (p >= 0 && uses_[v] == 1 && (g_.nodes[p].op == Op::Div || g_.nodes[p].op == Op::Mul)) {
      const Node& n = g_.nodes[p];
      std::optional<double> c;
      int raw_side = 0;
      if ((c = scalar_constant(n.inputs[1]))) {
        raw_side = 0;
      } else if (n.op == Op::Mul && (c = scalar_constant(n.inputs[0]))) {
        raw_side = 1;
      } else {
        return false;
      }
      if (*c == 0.0 || !std::isfinite(*c)) return false;
      m.scale = n.op == Op::Div ? 1.0 / *c : *c;
      m.has_scale = true;
      m.scale_node = static_cast<size_t>(p);
      raw = n.inputs[raw_side];
    }
    auto qk = only_reader_producer(raw, Op::MatMul);
    if (!qk) return false;
    auto q = transposed_from(g_.nodes[*qk].inputs[0], {0, 2, 1, 3});
    auto k = transposed_from(g_.nodes[*qk].inputs[1], {0, 2, 3, 1});
    if (!q || !k) return false;
    m.qk = *qk;
    m.q = *q;
    m.k = *k;
    return true;
  }

  // q [B, Sq, H, D], k [B, Sk, H, D], v [B, Sk, H, Dv]; the mask f32 broadcasting to
  // [B, H, Sq, Sk].
  bool shapes_agree(const Match& m) const {
    const Sizes q = *static_sizes(g_.type(m.q).shape), k = *static_sizes(g_.type(m.k).shape),
                v = *static_sizes(g_.type(m.v).shape);
    if (k[0] != q[0] || k[2] != q[2] || k[3] != q[3] || v[0] != q[0] || v[1] != k[1] || v[2] != q[2]) return false;
    if (m.mask == kNoValue) return true;
    const TensorType& mt = g_.type(m.mask);
    if (mt.dtype != DType::f32 || mt.shape.size() > 4 || !is_static(mt.shape)) return false;
    const Sizes ms = *static_sizes(mt.shape);
    const Sizes target{q[0], q[2], q[1], k[1]};
    for (size_t i = 0; i < ms.size(); ++i) {
      const int64_t want = target[4 - ms.size() + i];
      if (ms[i] != want && ms[i] != 1) return false;
    }
    return true;
  }

  const Graph& g_;
  std::vector<int32_t> uses_;
};

}  // namespace

int fuse_attention(Graph& g) {
  if (g.level != IrLevel::graph) return 0;
  Matcher matcher(g);
  std::vector<std::optional<Match>> at(g.nodes.size());
  std::vector<char> drop(g.nodes.size(), 0);
  int found = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto m = matcher.at(i);
    if (!m) continue;
    std::vector<size_t> chain{m->qk, m->softmax, m->pv};
    if (m->has_scale) chain.push_back(m->scale_node);
    if (m->has_add) chain.push_back(m->add);
    if (m->has_out_transpose) chain.push_back(m->out_transpose);
    bool taken = false;
    for (size_t n : chain) taken = taken || drop[n];
    if (taken) continue;
    for (size_t n : chain) drop[n] = 1;
    at[i] = m;
    ++found;
  }
  if (!found) return 0;
  std::vector<ValueId> map;
  Graph out = start_rebuild(g, map);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (at[i]) {
      const Match& m = *at[i];
      std::vector<ValueId> ins{map[m.q], map[m.k], map[m.v]};
      std::vector<TensorType> types;
      if (m.mask != kNoValue) ins.push_back(map[m.mask]);
      Attrs attrs{{"causal", int64_t{0}}, {"layout", std::string("bshd")}, {"scale", m.scale}};
      const Sizes q = *static_sizes(g.type(m.q).shape), v = *static_sizes(g.type(m.v).shape);
      const TensorType bshd{DType::f32, to_shape(Sizes{q[0], q[1], q[2], v[3]})};
      const ValueId att = out.add_node_typed(Op::Attention, ins, attrs, {bshd}, n.name, n.origin)[0];
      if (m.has_out_transpose) {
        map[g.nodes[m.out_transpose].outputs[0]] = att;
        out.values[att].name = g.values[g.nodes[m.out_transpose].outputs[0]].name;
      } else {
        // the consumers read [B, H, Sq, Dv], as the product gave it
        map[n.outputs[0]] = out.add_node_typed(Op::Transpose, {att}, Attrs{{"perm", std::vector<int64_t>{0, 2, 1, 3}}},
                                               {g.type(n.outputs[0])}, n.name, n.origin)[0];
      }
      continue;
    }
    if (drop[i]) continue;
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[v]);
    copy_node(g, n, ins, out, map);
  }
  for (ValueId v : g.outputs) out.outputs.push_back(map[v]);
  g = std::move(out);
  return found;
}

}  // namespace rlx::passes

// Host implementations of the data-dependent ops, and the graph cuts Model::run stages with.
#include "runtime/data_dependent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace rlx::runtime {
namespace {

// Element i of t as a key that orders and compares it exactly: integers as int64 (u64 with its
// sign bit flipped, so the order holds), floats as double.
struct Keys {
  bool integer = false;
  std::vector<int64_t> i;
  std::vector<double> f;
  static Keys of(const Tensor& t) {
    Keys k;
    const int64_t n = t.numel();
    k.integer = !is_float(t.dtype());
    if (k.integer) {
      k.i.resize(static_cast<size_t>(n));
      for (int64_t e = 0; e < n; ++e) {
        if (t.dtype() == DType::i64) k.i[e] = t.data<int64_t>()[e];
        else if (t.dtype() == DType::u64) k.i[e] = static_cast<int64_t>(t.data<uint64_t>()[e] ^ (uint64_t{1} << 63));
        else k.i[e] = static_cast<int64_t>(t.get_f64(e));  // exact for 32 bits and less
      }
    } else {
      k.f = t.to_f64();
    }
    return k;
  }
  // -1, 0, 1 comparing elements a and b; NaNs equal each other and order after numbers
  int cmp(int64_t a, int64_t b) const {
    if (integer) return i[a] < i[b] ? -1 : i[a] > i[b] ? 1 : 0;
    const double x = f[a], y = f[b];
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) == std::isnan(y) ? 0 : std::isnan(x) ? 1 : -1;
    return x < y ? -1 : x > y ? 1 : 0;
  }
};

Expected<std::vector<Tensor>> nonzero(const Tensor& x) {
  const std::vector<double> v = x.to_f64();
  std::vector<int64_t> hits;
  for (size_t e = 0; e < v.size(); ++e)
    if (v[e] != 0) hits.push_back(static_cast<int64_t>(e));  // NaN counts, as in NumPy
  const int r = x.rank();
  const int64_t n = static_cast<int64_t>(hits.size());
  RLX_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(DType::i64, {r, n}, "nonzero indices"));
  int64_t* o = out.data<int64_t>();
  for (int64_t h = 0; h < n; ++h) {
    int64_t rem = hits[h];
    for (int d = r - 1; d >= 0; --d) {
      o[d * n + h] = rem % x.sizes()[d];
      rem /= x.sizes()[d];
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

Expected<std::vector<Tensor>> unique(const Node& n, const Tensor& x) {
  // slices along the axis (or single elements): slice s is `inner` runs of `len` elements
  // at s * len + o * (len * slices) for o in [0, outer)
  const bool has_axis = n.attrs.has("axis");
  int axis = 0;
  int64_t slices = x.numel(), outer = 1, len = 1;
  if (has_axis) {
    RLX_ASSIGN_OR_RETURN(axis, normalize_axis(n.attrs.i("axis", 0), x.rank()));
    slices = x.sizes()[axis];
    for (int d = 0; d < axis; ++d) outer *= x.sizes()[d];
    for (int d = axis + 1; d < x.rank(); ++d) len *= x.sizes()[d];
  }
  const Keys k = Keys::of(x);
  auto elem = [&](int64_t s, int64_t o, int64_t e) { return o * slices * len + s * len + e; };
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < len; ++e)
        if (int c = k.cmp(elem(a, o, e), elem(b, o, e))) return c;
    return 0;
  };
  // slices in order (stable: equal slices keep their first occurrence first)
  std::vector<int64_t> order(static_cast<size_t>(slices));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(slices));
  for (size_t p = 0; p < order.size(); ++p) {
    if (p == 0 || cmp(order[p - 1], order[p]) != 0) {
      first.push_back(order[p]);
      counts.push_back(0);
    }
    inverse[order[p]] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  if (n.attrs.i("sorted", 1) == 0) {
    // by first occurrence: renumber the groups
    std::vector<int64_t> by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    std::vector<int64_t> rank(first.size());
    for (size_t r = 0; r < by_first.size(); ++r) rank[by_first[r]] = static_cast<int64_t>(r);
    std::vector<int64_t> f2(first.size()), c2(first.size());
    for (size_t g = 0; g < first.size(); ++g) {
      f2[rank[g]] = first[g];
      c2[rank[g]] = counts[g];
    }
    for (int64_t& v : inverse) v = rank[v];
    first = std::move(f2);
    counts = std::move(c2);
  }
  const int64_t u = static_cast<int64_t>(first.size());
  Sizes ys = has_axis ? x.sizes() : Sizes{u};
  if (has_axis) ys[axis] = u;
  RLX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), ys, "unique values"));
  const size_t eb = static_cast<size_t>(dtype_bits(x.dtype()) / 8);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < u; ++g)
      std::memcpy(y.bytes() + static_cast<size_t>((o * u + g) * len) * eb,
                  x.bytes() + static_cast<size_t>(elem(first[g], o, 0)) * eb, static_cast<size_t>(len) * eb);
  return std::vector<Tensor>{y, Tensor::from_vector(DType::i64, {u}, first),
                             Tensor::from_vector(DType::i64, {slices}, inverse), Tensor::from_vector(DType::i64, {u}, counts)};
}

// ONNX Runtime's rule: boxes overlap when their intersection over union exceeds the
// threshold; empty intersections and degenerate boxes never suppress.
bool suppresses(const float* a, const float* b, bool center, float iou_threshold) {
  auto corners = [&](const float* p, float& y0, float& x0, float& y1, float& x1) {
    if (center) {
      x0 = p[0] - p[2] / 2;
      x1 = p[0] + p[2] / 2;
      y0 = p[1] - p[3] / 2;
      y1 = p[1] + p[3] / 2;
    } else {
      y0 = std::min(p[0], p[2]);
      y1 = std::max(p[0], p[2]);
      x0 = std::min(p[1], p[3]);
      x1 = std::max(p[1], p[3]);
    }
  };
  float ay0, ax0, ay1, ax1, by0, bx0, by1, bx1;
  corners(a, ay0, ax0, ay1, ax1);
  corners(b, by0, bx0, by1, bx1);
  const float iy0 = std::max(ay0, by0), ix0 = std::max(ax0, bx0), iy1 = std::min(ay1, by1), ix1 = std::min(ax1, bx1);
  if (ix1 <= ix0 || iy1 <= iy0) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

Expected<std::vector<Tensor>> non_max_suppression(const Node& n, std::span<const Tensor> in) {
  const Tensor& boxes = in[0];
  const Tensor& scores = in[1];
  const int64_t B = boxes.sizes()[0], N = boxes.sizes()[1], C = scores.sizes()[1];
  if (scores.sizes()[0] != B || scores.sizes()[2] != N)
    return error(ErrorCode::shape_error, "boxes ", sizes_to_string(boxes.sizes()), " and scores ",
                 sizes_to_string(scores.sizes()), " disagree");
  auto one = [&](size_t i, double def) { return in.size() > i && in[i].numel() > 0 ? in[i].get_f64(0) : def; };
  const double max_boxes = one(2, 0);
  const float iou = static_cast<float>(one(3, 0));
  const bool has_score = in.size() > 4 && in[4].numel() > 0;
  const float score_min = has_score ? static_cast<float>(in[4].get_f64(0)) : 0.f;
  const bool center = n.attrs.i("center_point_box", 0) == 1;
  std::vector<int64_t> rows;
  if (max_boxes > 0) {
    const int64_t limit = static_cast<int64_t>(std::min<double>(max_boxes, static_cast<double>(N)));
    std::vector<int64_t> cand, kept;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const float* s = scores.data<float>() + (b * C + c) * N;
        cand.clear();
        for (int64_t i = 0; i < N; ++i)
          if (!has_score || s[i] > score_min) cand.push_back(i);
        std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
        kept.clear();
        for (int64_t i : cand) {
          if (static_cast<int64_t>(kept.size()) >= limit) break;
          const float* bi = boxes.data<float>() + (b * N + i) * 4;
          bool drop = false;
          for (int64_t k : kept) drop = drop || suppresses(boxes.data<float>() + (b * N + k) * 4, bi, center, iou);
          if (drop) continue;
          kept.push_back(i);
          rows.insert(rows.end(), {b, c, i});
        }
      }
  }
  const int64_t m = static_cast<int64_t>(rows.size() / 3);
  return std::vector<Tensor>{Tensor::from_vector(DType::i64, {m, 3}, rows)};
}

// The k largest or smallest along the axis, sorted, ties by lower index; NaN counts as larger
// than every number (first among the largest, last among the smallest, as PyTorch's topk).
Expected<std::vector<Tensor>> top_k(const Node& n, const Tensor& x, const Tensor& kt) {
  RLX_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attrs.i("axis", -1), x.rank()));
  const int64_t len = x.sizes()[axis];
  const double kd = kt.get_f64(0);
  if (!(kd >= 0 && kd <= static_cast<double>(len)))
    return error(ErrorCode::out_of_range, "k = ", kd, " is outside [0, ", len, "], the size of axis ", axis);
  const int64_t k = static_cast<int64_t>(kd);
  const bool largest = n.attrs.i("largest", 1) != 0;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.sizes()[d];
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.sizes()[d];
  Sizes os = x.sizes();
  os[axis] = k;
  RLX_ASSIGN_OR_RETURN(Tensor vals, Tensor::allocate(x.dtype(), os, "top_k values"));
  RLX_ASSIGN_OR_RETURN(Tensor idx, Tensor::allocate(DType::i64, os, "top_k indices"));
  const Keys keys = Keys::of(x);
  const size_t eb = static_cast<size_t>(dtype_bits(x.dtype()) / 8);
  std::vector<int64_t> order(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t i) { return (o * len + i) * inner + in; };
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        const int c = keys.cmp(at(a), at(b));
        return c != 0 ? (largest ? c > 0 : c < 0) : a < b;
      });
      for (int64_t r = 0; r < k; ++r) {
        const int64_t dst = (o * k + r) * inner + in;
        std::memcpy(vals.bytes() + static_cast<size_t>(dst) * eb, x.bytes() + static_cast<size_t>(at(order[r])) * eb, eb);
        idx.data<int64_t>()[dst] = order[r];
      }
    }
  return std::vector<Tensor>{std::move(vals), std::move(idx)};
}

}  // namespace

Expected<Tensor> range_values(const Tensor& start, const Tensor& limit, const Tensor& delta, const std::string& what) {
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1)
    return error(ErrorCode::shape_error, what, ": start, limit and delta must hold one value each");
  const DType dt = start.dtype();
  const double s = start.get_f64(0), l = limit.get_f64(0), d = delta.get_f64(0);
  if (d == 0) return error(ErrorCode::invalid_argument, what, ": delta is 0");
  const double nf = std::ceil((l - s) / d);
  if (std::isnan(nf)) return error(ErrorCode::invalid_argument, what, ": start, limit or delta is NaN");
  if (nf > static_cast<double>(int64_t{1} << 40))
    return error(ErrorCode::out_of_range, what, ": ", nf, " elements, more than 2^40");
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(nf), 0);
  RLX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dt, {n}, what));
  if (is_float(dt)) {
    double v = s;
    for (int64_t i = 0; i < n; ++i) {
      t.set_f64(i, v);
      v = dt == DType::f32 ? static_cast<float>(static_cast<float>(v) + static_cast<float>(d)) : v + d;
    }
  } else if (dt == DType::i64) {
    const int64_t s64 = start.data<int64_t>()[0], d64 = delta.data<int64_t>()[0];
    for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = s64 + i * d64;
  } else {
    for (int64_t i = 0; i < n; ++i) t.set_f64(i, s + static_cast<double>(i) * d);
  }
  return t;
}

bool has_data_dependent(const Graph& g) { return first_data_dependent(g) >= 0; }

int32_t first_data_dependent(const Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (op_info(g.nodes[i].op).family == OpFamily::data_dependent) return static_cast<int32_t>(i);
  return -1;
}

Expected<std::vector<Tensor>> run_data_dependent(const Node& n, std::span<const Tensor> inputs, const std::string& label) {
  std::vector<TensorType> types;
  for (const Tensor& t : inputs) types.push_back(t.type());
  // the node's own checks on the concrete input types
  RLX_TRY(infer_types(n.op, NodeSig{types, n.attrs, n.name}).status().with_context(label));
  Expected<std::vector<Tensor>> out = std::vector<Tensor>{};
  switch (n.op) {
    case Op::NonZero: out = nonzero(inputs[0]); break;
    case Op::Unique: out = unique(n, inputs[0]); break;
    case Op::NonMaxSuppression: out = non_max_suppression(n, inputs); break;
    case Op::TopK: out = top_k(n, inputs[0], inputs[1]); break;
    case Op::Range: {
      auto r = range_values(inputs[0], inputs[1], inputs[2], "range");
      if (r) out = std::vector<Tensor>{std::move(*r)};
      else out = std::move(r).take_status();
      break;
    }
    default: return error(ErrorCode::internal, label, ": not a data-dependent op");
  }
  if (!out) return std::move(out).take_status().with_context(label);
  return out;
}

Expected<int64_t> data_dependent_count(const Graph& g, const Node& n, std::span<const Tensor> outputs) {
  const std::string sym = n.attrs.s("count", "");
  for (size_t k = 0; k < n.outputs.size() && k < outputs.size(); ++k) {
    const Shape& s = g.type(n.outputs[k]).shape;
    for (size_t d = 0; d < s.size() && d < outputs[k].sizes().size(); ++d)
      if (s[d].is_symbol() && s[d].symbol_name() == sym) return outputs[k].sizes()[d];
  }
  return error(ErrorCode::internal, "no output of ", op_name(n.op), " carries its count '", sym, "'");
}

namespace {

// A copy of g's nodes i with keep[i] into `out`, where map gives out's value for each of g's
// values read (graph inputs already added); the kept nodes' indices in g go to source.
void copy_nodes(const Graph& g, const std::vector<char>& keep, Graph& out, std::vector<ValueId>& map,
                std::vector<int32_t>& source) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!keep[i]) continue;
    const Node& n = g.nodes[i];
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[v]);
    std::vector<TensorType> types;
    for (ValueId v : n.outputs) types.push_back(g.values[v].type);
    auto outs = out.add_node_typed(n.op, ins, n.attrs, types, n.name, n.origin);
    out.nodes.back().native = n.native;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      map[n.outputs[k]] = outs[k];
      out.values[outs[k]].name = g.values[n.outputs[k]].name;
    }
    source.push_back(static_cast<int32_t>(i));
  }
}

Graph empty_like(const Graph& g) {
  Graph out;
  out.name = g.name;
  out.level = g.level;
  out.weights = g.weights;
  return out;
}

}  // namespace

std::vector<TensorType> computed_types(const Graph& g, const Node& n, std::span<const Tensor> outputs) {
  std::vector<TensorType> types;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    TensorType t = g.type(n.outputs[k]);
    for (size_t d = 0; d < t.shape.size() && k < outputs.size() && d < outputs[k].sizes().size(); ++d)
      if (t.shape[d].is_unknown()) t.shape[d] = Dim(outputs[k].sizes()[d]);
    types.push_back(std::move(t));
  }
  return types;
}

CutGraph cut_node(const Graph& g, int32_t node, std::span<const TensorType> types) {
  CutGraph c{empty_like(g), {}};
  std::vector<ValueId> map(g.values.size(), kNoValue);
  for (ValueId in : g.inputs) map[in] = c.graph.add_input(g.values[in].name, g.values[in].type);
  const Node& cut = g.nodes[node];
  for (size_t k = 0; k < cut.outputs.size(); ++k) {
    const Value& v = g.values[cut.outputs[k]];
    std::string name = v.name.empty() ? cat(cut.name.empty() ? std::string(op_name(cut.op)) : cut.name, ":", k) : v.name;
    map[cut.outputs[k]] = c.graph.add_input(std::move(name), k < types.size() ? types[k] : v.type);
  }
  std::vector<char> keep(g.nodes.size(), 1);
  keep[node] = 0;
  copy_nodes(g, keep, c.graph, map, c.source_node);
  for (ValueId v : g.outputs) c.graph.outputs.push_back(map[v]);
  return c;
}

Graph with_outputs(const Graph& g, const std::vector<ValueId>& values) {
  // the nodes the values need, found backwards over the topological order
  std::vector<char> need(g.values.size(), 0), keep(g.nodes.size(), 0);
  for (ValueId v : values) need[v] = 1;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    for (ValueId v : n.outputs) keep[i] |= need[v];
    if (keep[i])
      for (ValueId v : n.inputs) need[v] = 1;
  }
  Graph out = empty_like(g);
  std::vector<ValueId> map(g.values.size(), kNoValue);
  for (ValueId in : g.inputs) map[in] = out.add_input(g.values[in].name, g.values[in].type);
  std::vector<int32_t> source;
  copy_nodes(g, keep, out, map, source);
  for (ValueId v : values) out.outputs.push_back(map[v]);
  return out;
}

}  // namespace rlx::runtime

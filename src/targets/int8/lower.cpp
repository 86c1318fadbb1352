// Lowering a graph-level graph to the int8 targets' layer program, with a dispatch report
// in the same form as every device's (native for what the target runs, illegal otherwise).
#include <algorithm>
#include <map>

#include "rlx/compile.h"
#include "passes/weight_of.h"
#include "rlx/op_builder.h"
#include "targets/int8/int8.h"

namespace rlx::targets::int8 {
namespace {

std::vector<TensorType> types_of(const Graph& g, const std::vector<ValueId>& vs) {
  std::vector<TensorType> t;
  for (ValueId v : vs) t.push_back(g.type(v));
  return t;
}

NodeDecision decision(const Graph& g, int32_t i) {
  const Node& n = g.nodes[static_cast<size_t>(i)];
  NodeDecision d;
  d.node = i;
  d.name = n.name.empty() ? cat("%", n.outputs.empty() ? -1 : n.outputs[0]) : n.name;
  d.op = n.op;
  d.inputs = types_of(g, n.inputs);
  d.outputs = types_of(g, n.outputs);
  return d;
}

void mark_illegal(const std::string& t, NodeDecision& d, const std::string& why, const std::string& runs) {
  d.path = DispatchPath::illegal;
  d.native_refused = why;
  d.common_refused = "the " + t + " target has no common-IR renderer (it emits whole int8 layers)";
  d.rewrite_refused = cat("no rewrite of ", op_name(d.op), " into the layers the target runs");
  d.hint = cat("the " + t + " target runs ", runs, " today; ", op_name(d.op), " as used here is not supported yet by the " +
               t + " target (docs/targets.md); run this model on cpu");
}

// A 2-D (or 1-D) f32 weight behind a param node, or null.
const Tensor* param_tensor(const Graph& g, ValueId v, int rank) {
  const Tensor* w = passes::weight_of(g, v);
  return w && w->dtype() == DType::f32 && w->rank() == rank ? w : nullptr;
}

std::string param_name(const Graph& g, ValueId v) {
  const int32_t p = g.values[static_cast<size_t>(v)].producer;
  const AttrValue* name = g.nodes[static_cast<size_t>(p)].attrs.find("name");
  const std::string* ns = name ? std::get_if<std::string>(name) : nullptr;
  return ns ? *ns : g.value_label(v);
}

// [batch, C, H, W] with C, H, W static.
bool static_chw(const TensorType& t) {
  return t.rank() == 4 && t.shape[1].is_static() && t.shape[2].is_static() && t.shape[3].is_static();
}

int32_t dim32(const TensorType& t, int k) { return static_cast<int32_t>(t.shape[static_cast<size_t>(k)].size()); }

int64_t features(const TensorType& t) {
  int64_t n = 1;
  for (size_t k = 1; k < t.shape.size(); ++k) n *= t.shape[k].is_static() ? t.shape[k].size() : -1;
  return n;
}

}  // namespace

const char* layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::dense: return "dense";
    case LayerKind::conv2d: return "conv2d";
    case LayerKind::maxpool2d: return "maxpool2d";
    case LayerKind::avgpool2d: return "avgpool2d";
    case LayerKind::add: return "add";
  }
  return "?";
}

Expected<Graph> classifier_graph(const train::ModelDef& model, const std::map<std::string, Tensor>& weights,
                                 bool use_init) {
  Graph g;
  g.name = model.name;
  Shape in{Dim::symbol("batch")};
  for (int64_t s : model.example_shape) in.push_back(Dim(s));
  const ValueId images = g.add_input("images", TensorType{DType::f32, in});
  std::vector<ValueId> params;
  for (const train::ParamSpec& ps : model.params) {
    auto it = weights.find(ps.name);
    if (it == weights.end() && !use_init)
      return error(ErrorCode::invalid_argument, "the ", model.name, " model needs a weight named '", ps.name,
                   "', which the checkpoint lacks");
    const Tensor& t = it == weights.end() ? ps.init : it->second;
    if (t.dtype() != DType::f32 || t.sizes() != ps.init.sizes())
      return error(ErrorCode::invalid_argument, "weight '", ps.name, "' is ", t.type().to_string(), ", the ", model.name,
                   " model expects ", ps.init.type().to_string());
    params.push_back(g.add_param(ps.name, ps.init.type(), t.clone()));
  }
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const ValueId logits = model.forward(o, images, params, nullptr);
  RLX_TRY(o.status().with_context(cat("building the ", model.name, " graph")));
  g.outputs = {logits};
  return g;
}

Expected<FloatProgram> lower_to_int8(const Graph& g, const std::string& t, const LayerSupport& support) {
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    return error(ErrorCode::invalid_argument, "the " + t + " target compiles graphs with one input and one output; ",
                 g.name, " has ", g.inputs.size(), " inputs and ", g.outputs.size(), " outputs");
  FloatProgram p;
  p.report.device = t;
  p.report.policy = "int8 (full-integer post-training quantization)";
  const TensorType& in = g.type(g.inputs[0]);
  if (in.dtype != DType::f32 || in.rank() < 2 || features(in) <= 0)
    return error(ErrorCode::invalid_argument, "the " + t + " target needs an f32 input [batch, features...] with static "
                 "features, got ", in.to_string());
  p.n_in = static_cast<int32_t>(features(in));
  // how many nodes (and graph outputs) read each value: relu and a bias fuse into a layer only
  // when they alone read its output
  std::vector<int32_t> uses(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (ValueId v : n.inputs) ++uses[static_cast<size_t>(v)];
  for (ValueId v : g.outputs) ++uses[static_cast<size_t>(v)];
  std::map<ValueId, int32_t> pv;  // graph value -> program value (-1 the input, k layer k's output)
  std::vector<bool> poisoned(g.values.size(), false);  // downstream of an illegal node
  pv[g.inputs[0]] = -1;
  const std::string runs = cat("dense (matmul + bias), conv2d", support.grouped_conv ? " (also grouped and depthwise)" : " (group 1)",
                               support.padded_pool ? ", max_pool2d" : ", max_pool2d without padding",
                               support.avg_pool ? ", avg_pool2d, reduce_mean over H and W" : "",
                               support.residual_add ? ", add of two activations" : "", ", relu and reshape");
  auto count_kind = [&](LayerKind k) {
    return 1 + std::count_if(p.layers.begin(), p.layers.end(), [&](const FloatLayer& l) { return l.kind == k; });
  };
  for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()); ++i) {
    const Node& n = g.nodes[static_cast<size_t>(i)];
    if (n.op == Op::Param || n.op == Op::Constant) continue;  // weights: consumed by their layer
    NodeDecision d = decision(g, i);
    d.path = DispatchPath::native;
    const ValueId x = n.inputs.empty() ? kNoValue : n.inputs[0];
    const bool x_poisoned = x != kNoValue && poisoned[static_cast<size_t>(x)];
    const bool x_act = x != kNoValue && pv.count(x) != 0;  // x is an activation the program holds
    std::string why;      // set: the node is illegal
    FloatLayer L;         // set kind/name: the node becomes this layer
    bool new_layer = false;
    auto weight_name = [&](ValueId w) {
      std::string s = param_name(g, w);  // "fc1.weight" names the layer "fc1"
      if (s.size() > 7 && s.ends_with(".weight")) s.resize(s.size() - 7);
      return s;
    };
    auto pool_geometry = [&](const TensorType& xt, const TensorType& yt, const std::vector<int64_t>& k,
                             const std::vector<int64_t>& st, const std::vector<int64_t>& pads) {
      return Conv2dGeometry{dim32(xt, 1), dim32(xt, 2), dim32(xt, 3), dim32(yt, 1), dim32(yt, 2), dim32(yt, 3),
                            static_cast<int32_t>(k[0]), static_cast<int32_t>(k[1]), static_cast<int32_t>(st[0]),
                            static_cast<int32_t>(st[1]), static_cast<int32_t>(pads[0]), static_cast<int32_t>(pads[1]),
                            static_cast<int32_t>(pads[2]), static_cast<int32_t>(pads[3]), 1};
    };
    if (n.op == Op::Reshape && n.outputs.size() == 1 && (x_act || x_poisoned)) {
      const TensorType& yt = g.type(n.outputs[0]);
      if (yt.rank() < 2 || features(yt) != features(g.type(x))) {
        why = "reshape runs on the " + t + " target only when it keeps the batch axis and the static features per example";
      } else {
        d.how = "reshape: no code (the activation is contiguous)";
        if (x_act) pv[n.outputs[0]] = pv[x];
      }
    } else if (n.op == Op::MatMul && n.inputs.size() == 2 && (x_act || x_poisoned)) {
      const Tensor* w = param_tensor(g, n.inputs[1], 2);
      if (!w || g.type(x).rank() != 2 || w->sizes()[0] != features(g.type(x))) {
        why = "matmul runs on the " + t + " target only as activation [batch, K] x f32 weight param [K, N]";
      } else {
        L.name = weight_name(n.inputs[1]);
        L.n_in = static_cast<int32_t>(w->sizes()[0]);
        L.n_out = static_cast<int32_t>(w->sizes()[1]);
        const std::vector<double> wv = w->to_f64();
        L.w.assign(wv.begin(), wv.end());
        L.b.assign(static_cast<size_t>(L.n_out), 0.0f);
        d.how = cat("dense_s8 ", L.n_in, "x", L.n_out, " (int8 weights per output channel, int32 accumulate)");
        new_layer = true;
      }
    } else if (n.op == Op::Conv2d && n.outputs.size() == 1 && (x_act || x_poisoned)) {
      const TensorType& xt = g.type(x);
      const TensorType& yt = g.type(n.outputs[0]);
      const Tensor* w = n.inputs.size() >= 2 ? param_tensor(g, n.inputs[1], 4) : nullptr;
      const Tensor* b = n.inputs.size() == 3 ? param_tensor(g, n.inputs[2], 1) : nullptr;
      const std::vector<int64_t> st = n.attrs.ints("strides", {1, 1}), pads = n.attrs.ints("pads", {0, 0, 0, 0});
      const int64_t group = n.attrs.i("group", 1);
      if (!w) {
        why = "conv2d runs on the " + t + " target only with an f32 weight param [M, C / group, kh, kw]";
      } else if (n.inputs.size() == 3 && !b) {
        why = "conv2d runs on the " + t + " target only with an f32 bias param [M]";
      } else if (group != 1 && !support.grouped_conv) {
        why = "grouped and depthwise conv2d (group != 1) are not supported yet by the " + t + " target";
      } else if (n.attrs.ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1}) {
        why = "dilated conv2d is not supported yet by the " + t + " target";
      } else if (!static_chw(xt) || !static_chw(yt) || st.size() != 2 || pads.size() != 4) {
        why = "conv2d needs static [batch, C, H, W] shapes on the " + t + " target";
      } else if (group < 1 || xt.shape[1].size() % group != 0 || yt.shape[1].size() % group != 0 ||
                 w->sizes()[1] != xt.shape[1].size() / group) {
        why = cat("conv2d with group ", group, " needs C and M divisible by it and a weight [M, C / group, kh, kw]");
      } else {
        L.kind = LayerKind::conv2d;
        L.name = weight_name(n.inputs[1]);
        L.geo = pool_geometry(xt, yt, {w->sizes()[2], w->sizes()[3]}, st, pads);
        L.geo.groups = static_cast<int32_t>(group);
        L.n_in = L.geo.c_in * L.geo.h_in * L.geo.w_in;
        L.n_out = L.geo.c_out * L.geo.h_out * L.geo.w_out;
        const std::vector<double> wv = w->to_f64();
        L.w.assign(wv.begin(), wv.end());
        L.b.assign(static_cast<size_t>(L.geo.c_out), 0.0f);
        if (b) {
          const std::vector<double> bv = b->to_f64();
          for (size_t k = 0; k < bv.size(); ++k) L.b[k] = static_cast<float>(bv[k]);
        }
        d.how = cat("conv2d_s8 ", L.geo.c_in, "x", L.geo.h_in, "x", L.geo.w_in, " -> ", L.geo.c_out, "x", L.geo.h_out, "x",
                    L.geo.w_out, ", kernel ", L.geo.kh, "x", L.geo.kw,
                    group == 1 ? "" : group == L.geo.c_in && group == L.geo.c_out ? ", depthwise" : cat(", ", group, " groups"),
                    " (int8 weights per output channel", b ? ", int32 bias" : "", ")");
        new_layer = true;
      }
    } else if ((n.op == Op::MaxPool2d || n.op == Op::AvgPool2d) && n.outputs.size() == 1 && (x_act || x_poisoned)) {
      const bool avg = n.op == Op::AvgPool2d;
      const TensorType& xt = g.type(x);
      const TensorType& yt = g.type(n.outputs[0]);
      const std::vector<int64_t> k = n.attrs.ints("kernel"),
                                 st = n.attrs.has("strides") ? n.attrs.ints("strides") : std::vector<int64_t>{1, 1};
      const std::vector<int64_t> pads = n.attrs.ints("pads", {0, 0, 0, 0});
      const bool padded = pads != std::vector<int64_t>{0, 0, 0, 0} || n.attrs.i("ceil_mode", 0) != 0;
      if (avg && !support.avg_pool) {
        why = "avg_pool2d is not supported yet by the " + t + " target";
      } else if (k.size() != 2 || st.size() != 2 || pads.size() != 4 ||
                 n.attrs.ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1} || !static_chw(xt) || !static_chw(yt)) {
        why = cat(op_name(n.op), " runs on the " + t + " target only with a 2-D kernel, dilation 1 and static [batch, C, H, W] "
                  "shapes");
      } else if (padded && !support.padded_pool) {
        why = "max_pool2d with padding, dilation or ceil_mode is not supported yet by the " + t + " target";
      } else {
        L.kind = avg ? LayerKind::avgpool2d : LayerKind::maxpool2d;
        L.name = cat(avg ? "avgpool" : "pool", count_kind(L.kind));
        L.geo = pool_geometry(xt, yt, k, st, pads);
        L.count_include_pad = avg && n.attrs.i("count_include_pad", 0) != 0;
        L.n_in = L.geo.c_in * L.geo.h_in * L.geo.w_in;
        L.n_out = L.geo.c_out * L.geo.h_out * L.geo.w_out;
        d.how = cat(avg ? "avgpool2d_s8 " : "maxpool2d_s8 ", L.geo.kh, "x", L.geo.kw, " stride ", L.geo.sh,
                    padded ? " padded" : "", " on int8 (keeps the input's scale)");
        new_layer = true;
      }
    } else if (n.op == Op::ReduceMean && n.outputs.size() == 1 && (x_act || x_poisoned)) {
      // global average pooling: the mean over H and W of [batch, C, H, W] is an average pool
      // with the whole image as its window (same flat layout with or without keepdims)
      const TensorType& xt = g.type(x);
      std::vector<int64_t> axes = n.attrs.ints("axes", {});
      for (int64_t& a : axes) a = a < 0 ? a + xt.rank() : a;
      std::sort(axes.begin(), axes.end());
      if (!support.avg_pool) {
        why = "reduce_mean is not supported yet by the " + t + " target";
      } else if (!static_chw(xt) || axes != std::vector<int64_t>{2, 3}) {
        why = "reduce_mean runs on the " + t + " target only over axes H and W of a static [batch, C, H, W] activation "
              "(global average pooling)";
      } else {
        L.kind = LayerKind::avgpool2d;
        L.name = cat("avgpool", count_kind(L.kind));
        const int32_t c = dim32(xt, 1), h = dim32(xt, 2), w = dim32(xt, 3);
        L.geo = Conv2dGeometry{c, h, w, c, 1, 1, h, w, 1, 1, 0, 0, 0, 0, 1};
        L.n_in = c * h * w;
        L.n_out = c;
        d.how = cat("avgpool2d_s8 ", h, "x", w, " (global average pooling on int8, keeps the input's scale)");
        new_layer = true;
      }
    } else if (n.op == Op::Add && n.inputs.size() == 2 && n.outputs.size() == 1) {
      const ValueId a = n.inputs[0], b = n.inputs[1];
      const bool a_act = pv.count(a) != 0, b_act = pv.count(b) != 0;
      const bool any_poisoned = poisoned[static_cast<size_t>(a)] || poisoned[static_cast<size_t>(b)];
      // the bias of a dense layer: the layer's own output, read by nothing else, plus a 1-D param
      const ValueId act = a_act ? a : b, other = a_act ? b : a;
      FloatLayer* dense = nullptr;
      if ((a_act != b_act) && pv[act] >= 0) {
        FloatLayer& l = p.layers[static_cast<size_t>(pv[act])];
        if (l.kind == LayerKind::dense && !l.relu && l.out_value == act && uses[static_cast<size_t>(act)] == 1) dense = &l;
      }
      if (any_poisoned) {
        // reads the output of an illegal node: not reported again (below)
      } else if (dense) {
        const Tensor* bias = param_tensor(g, other, 1);
        if (!bias || bias->sizes()[0] != dense->n_out) {
          why = cat("add runs on the " + t + " target as the bias of a dense layer only with an f32 param [", dense->n_out, "]");
        } else {
          const std::vector<double> bvals = bias->to_f64();
          for (size_t k = 0; k < bvals.size(); ++k) dense->b[k] += static_cast<float>(bvals[k]);
          d.how = cat("bias of ", dense->name, ": int32, input zero point folded in");
          dense->out_value = n.outputs[0];
          pv[n.outputs[0]] = pv[act];
        }
      } else if (a_act && b_act && support.residual_add) {
        const TensorType &at = g.type(a), &bt = g.type(b);
        if (at != bt || features(at) <= 0) {
          why = cat("add of two activations runs on the " + t + " target only on equal static shapes, got ", at.to_string(),
                    " and ", bt.to_string());
        } else {
          L.kind = LayerKind::add;
          L.name = cat("add", count_kind(LayerKind::add));
          L.n_in = L.n_out = static_cast<int32_t>(features(at));
          L.input2 = pv[b];
          d.how = cat("add_s8 of ", L.n_in, " values (each operand rescaled to the output's scale)");
          new_layer = true;
        }
      } else {
        why = support.residual_add
                  ? "add runs on the " + t + " target only as a dense layer's bias (an f32 param) or on two activations"
                  : "add runs on the " + t + " target only as the bias of a dense layer (an f32 param [N]) that it alone reads";
      }
    } else if (n.op == Op::Relu && n.outputs.size() == 1 && (x_act || x_poisoned)) {
      FloatLayer* l = x_act && pv[x] >= 0 ? &p.layers[static_cast<size_t>(pv[x])] : nullptr;
      if (x_act && (!l || l->relu || is_pool(l->kind) || l->out_value != x || uses[static_cast<size_t>(x)] != 1)) {
        why = "relu runs on the " + t + " target only fused into the dense, conv2d or add layer whose output it alone reads";
      } else if (l) {
        l->relu = true;
        l->out_value = n.outputs[0];
        pv[n.outputs[0]] = pv[x];
        d.how = cat("fused into ", l->name, " as the requantization clamp at the zero point");
      }
    } else {
      why = cat("the " + t + " target has no ", op_name(n.op), " kernel");
      if (!x_act && !x_poisoned && (n.op == Op::Relu || n.op == Op::Add || n.op == Op::MatMul || n.op == Op::Reshape ||
                                    n.op == Op::Conv2d || n.op == Op::MaxPool2d))
        why = cat(op_name(n.op), " runs on the " + t + " target only on activations computed from the model's input");
    }
    const bool any_input_poisoned =
        std::any_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return poisoned[static_cast<size_t>(v)]; });
    if (!why.empty()) {
      mark_illegal(t, d, why, runs);
      for (ValueId v : n.outputs) poisoned[static_cast<size_t>(v)] = true;
    } else if (any_input_poisoned) {
      // its own form is fine, but what it reads could not be lowered: not lowered either, and
      // not reported as a second error
      if (d.how.empty()) d.how = "(not lowered: reads the output of an illegal node)";
      for (ValueId v : n.outputs) poisoned[static_cast<size_t>(v)] = true;
      for (ValueId v : n.outputs) pv.erase(v);
    } else if (new_layer) {
      L.input = pv[x];
      L.out_value = n.outputs[0];
      pv[n.outputs[0]] = static_cast<int32_t>(p.layers.size());
      p.layers.push_back(std::move(L));
    }
    p.report.nodes.push_back(std::move(d));
  }
  if (!p.report.ok()) return p.report.illegal_error();
  if (p.layers.empty()) return error(ErrorCode::illegal, g.name, ": no layer for the " + t + " target to run");
  const int32_t last = static_cast<int32_t>(p.layers.size()) - 1;
  auto out = pv.find(g.outputs[0]);
  if (out == pv.end() || out->second != last)
    return error(ErrorCode::illegal, g.name, ": the output ", g.value_label(g.outputs[0]),
                 " is not the last layer's output; the " + t + " target runs the layers that compute the output");
  std::vector<bool> read(p.layers.size(), false);
  for (const FloatLayer& l : p.layers) {
    for (int32_t v : {l.input, l.kind == LayerKind::add ? l.input2 : -1})
      if (v >= 0) read[static_cast<size_t>(v)] = true;
  }
  for (int32_t k = 0; k < last; ++k)
    if (!read[static_cast<size_t>(k)])
      return error(ErrorCode::illegal, g.name, ": layer ", p.layers[static_cast<size_t>(k)].name,
                   " computes a value the output does not need; the " + t + " target runs only the layers it needs");
  for (int32_t k = 0; k <= last; ++k) {
    const FloatLayer& l = p.layers[static_cast<size_t>(k)];
    if (!support.residual_add && l.input != k - 1)
      return error(ErrorCode::illegal, g.name, ": layer ", l.name, " does not read the layer before it; the " + t +
                   " target runs one chain of layers");
    const int32_t in_size = l.input < 0 ? p.n_in : p.layers[static_cast<size_t>(l.input)].n_out;
    if (l.n_in != in_size)
      return error(ErrorCode::shape_error, l.name, " reads ", l.n_in, " values per example, its input holds ", in_size);
  }
  return p;
}

Expected<std::vector<Tensor>> run_float(const Graph& g, const FloatProgram& p, const Tensor& images,
                                        const std::string& device) {
  Graph f = g;
  f.outputs.clear();
  for (const FloatLayer& L : p.layers) f.outputs.push_back(L.out_value);
  CompileOptions o;
  o.device = device;
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(std::move(f), o));
  Tensor x = images;
  const Shape& want = g.type(g.inputs[0]).shape;  // [batch, example dims...]
  if (images.rank() != static_cast<int>(want.size())) {
    Sizes s{images.rank() > 0 ? images.sizes()[0] : 0};
    for (size_t k = 1; k < want.size(); ++k) s.push_back(want[k].size());
    RLX_ASSIGN_OR_RETURN(x, images.reshaped(s));
  }
  std::vector<Tensor> in{x};
  return model->run(in);
}

}  // namespace rlx::targets::int8

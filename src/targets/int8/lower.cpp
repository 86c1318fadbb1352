// Lowering a graph-level graph to the Cortex-M target's layer program, with a dispatch report
// in the same form as every device's (native for what the target runs, illegal otherwise).
#include <algorithm>
#include <map>

#include "rlx/compile.h"
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

void mark_illegal(const std::string& t, NodeDecision& d, const std::string& why) {
  d.path = DispatchPath::illegal;
  d.native_refused = why;
  d.common_refused = "the " + t + " target has no common-IR renderer (it emits whole int8 layers)";
  d.rewrite_refused = cat("no rewrite of ", op_name(d.op), " into the layers the target runs");
  d.hint = cat("the " + t + " target runs dense (matmul + bias), conv2d (group 1), max_pool2d, relu and flatten "
               "today; ", op_name(d.op), " as used here is not supported yet by the " + t + " target (docs/targets.md); "
               "run this model on cpu");
}

// A 2-D (or 1-D) f32 weight behind a param node, or null.
const Tensor* param_tensor(const Graph& g, ValueId v, int rank) {
  const int32_t p = g.values[static_cast<size_t>(v)].producer;
  if (p < 0 || g.nodes[static_cast<size_t>(p)].op != Op::Param) return nullptr;
  const AttrValue* name = g.nodes[static_cast<size_t>(p)].attrs.find("name");
  const std::string* ns = name ? std::get_if<std::string>(name) : nullptr;
  if (!ns) return nullptr;
  auto it = g.weights.find(*ns);
  if (it == g.weights.end() || it->second.dtype() != DType::f32 || it->second.rank() != rank) return nullptr;
  return &it->second;
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

Expected<FloatProgram> lower_to_int8(const Graph& g, const std::string& t) {
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
  ValueId cur = g.inputs[0];  // the activation the next layer reads
  bool poisoned = false;      // cur comes from an illegal node (keep going to report them all)
  for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()); ++i) {
    const Node& n = g.nodes[static_cast<size_t>(i)];
    if (n.op == Op::Param || n.op == Op::Constant) continue;  // weights: consumed by their layer
    NodeDecision d = decision(g, i);
    const bool reads_cur = !n.inputs.empty() && n.inputs[0] == cur;
    FloatLayer* last = p.layers.empty() ? nullptr : &p.layers.back();
    const bool after_layer = last && last->out_value == cur && !poisoned;
    const bool after_weighted = after_layer && last->kind != LayerKind::maxpool2d;  // relu can fuse
    const bool after_dense = after_layer && last->kind == LayerKind::dense;        // add is its bias
    d.path = DispatchPath::native;
    if (n.op == Op::Reshape && reads_cur && n.outputs.size() == 1 && g.type(n.outputs[0]).rank() == 2 &&
        features(g.type(n.outputs[0])) == features(g.type(cur))) {
      d.how = "flatten: no code (the activation is already contiguous)";
      cur = n.outputs[0];
      if (last && !poisoned) last->out_value = cur;
    } else if (n.op == Op::MatMul && reads_cur && n.inputs.size() == 2) {
      const Tensor* w = param_tensor(g, n.inputs[1], 2);
      if (!w || w->sizes()[0] != features(g.type(cur)) || g.type(cur).rank() != 2) {
        mark_illegal(t, d, "matmul runs on the " + t + " target only as activation [batch, K] x f32 weight param [K, N]");
        poisoned = true;
      } else {
        FloatLayer L;
        L.name = param_name(g, n.inputs[1]);  // "fc1.weight" names the layer "fc1"
        if (L.name.size() > 7 && L.name.ends_with(".weight")) L.name.resize(L.name.size() - 7);
        L.n_in = static_cast<int32_t>(w->sizes()[0]);
        L.n_out = static_cast<int32_t>(w->sizes()[1]);
        const std::vector<double> wv = w->to_f64();
        L.w.assign(wv.begin(), wv.end());
        L.b.assign(static_cast<size_t>(L.n_out), 0.0f);
        d.how = cat("dense_s8 ", L.n_in, "x", L.n_out, " (int8 weights per output channel, int32 accumulate)");
        p.layers.push_back(std::move(L));
        poisoned = false;
      }
      cur = n.outputs[0];
      if (!poisoned) p.layers.back().out_value = cur;
    } else if (n.op == Op::Conv2d && reads_cur && n.outputs.size() == 1) {
      const TensorType& xt = g.type(cur);
      const TensorType& yt = g.type(n.outputs[0]);
      const Tensor* w = n.inputs.size() >= 2 ? param_tensor(g, n.inputs[1], 4) : nullptr;
      const Tensor* b = n.inputs.size() == 3 ? param_tensor(g, n.inputs[2], 1) : nullptr;
      const std::vector<int64_t> st = n.attrs.ints("strides", {1, 1}), pads = n.attrs.ints("pads", {0, 0, 0, 0});
      std::string why;
      if (!w) {
        why = "conv2d runs on the " + t + " target only with an f32 weight param [M, C, kh, kw]";
      } else if (n.inputs.size() == 3 && !b) {
        why = "conv2d runs on the " + t + " target only with an f32 bias param [M]";
      } else if (n.attrs.i("group", 1) != 1) {
        why = "grouped and depthwise conv2d (group != 1) are not supported yet by the " + t + " target";
      } else if (n.attrs.ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1}) {
        why = "dilated conv2d is not supported yet by the " + t + " target";
      } else if (!static_chw(xt) || !static_chw(yt) || st.size() != 2 || pads.size() != 4) {
        why = "conv2d needs static [batch, C, H, W] shapes on the " + t + " target";
      }
      if (!why.empty()) {
        mark_illegal(t, d, why);
        poisoned = true;
      } else {
        FloatLayer L;
        L.kind = LayerKind::conv2d;
        L.name = param_name(g, n.inputs[1]);
        if (L.name.size() > 7 && L.name.ends_with(".weight")) L.name.resize(L.name.size() - 7);
        L.geo = {dim32(xt, 1), dim32(xt, 2), dim32(xt, 3), dim32(yt, 1), dim32(yt, 2), dim32(yt, 3),
                 static_cast<int32_t>(w->sizes()[2]), static_cast<int32_t>(w->sizes()[3]), static_cast<int32_t>(st[0]),
                 static_cast<int32_t>(st[1]), static_cast<int32_t>(pads[0]), static_cast<int32_t>(pads[1])};
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
                    L.geo.w_out, ", kernel ", L.geo.kh, "x", L.geo.kw, " (int8 weights per output channel", b ? ", int32 bias" : "",
                    ")");
        p.layers.push_back(std::move(L));
        poisoned = false;
      }
      cur = n.outputs[0];
      if (!poisoned) p.layers.back().out_value = cur;
    } else if (n.op == Op::MaxPool2d && reads_cur && n.outputs.size() == 1) {
      const TensorType& xt = g.type(cur);
      const TensorType& yt = g.type(n.outputs[0]);
      const std::vector<int64_t> k = n.attrs.ints("kernel"),
                                 st = n.attrs.has("strides") ? n.attrs.ints("strides") : std::vector<int64_t>{1, 1};
      const std::vector<int64_t> pads = n.attrs.ints("pads", {0, 0, 0, 0});
      if (k.size() != 2 || st.size() != 2 || pads != std::vector<int64_t>{0, 0, 0, 0} ||
          n.attrs.ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1} || n.attrs.i("ceil_mode", 0) != 0 ||
          !static_chw(xt) || !static_chw(yt)) {
        mark_illegal(t, d, "max_pool2d with padding, dilation or ceil_mode, or without static [batch, C, H, W] shapes, is "
                        "not supported yet by the " + t + " target");
        poisoned = true;
      } else if (!poisoned) {
        FloatLayer L;
        L.kind = LayerKind::maxpool2d;
        L.name = cat("pool", 1 + std::count_if(p.layers.begin(), p.layers.end(),
                                              [](const FloatLayer& l) { return l.kind == LayerKind::maxpool2d; }));
        L.geo = {dim32(xt, 1), dim32(xt, 2), dim32(xt, 3), dim32(yt, 1), dim32(yt, 2), dim32(yt, 3),
                 static_cast<int32_t>(k[0]), static_cast<int32_t>(k[1]), static_cast<int32_t>(st[0]),
                 static_cast<int32_t>(st[1]), 0, 0};
        L.n_in = L.geo.c_in * L.geo.h_in * L.geo.w_in;
        L.n_out = L.geo.c_out * L.geo.h_out * L.geo.w_out;
        L.out_value = n.outputs[0];
        d.how = cat("maxpool2d_s8 ", L.geo.kh, "x", L.geo.kw, " stride ", L.geo.sh, " on int8 (keeps the input's scale)");
        p.layers.push_back(std::move(L));
      } else {
        d.how = "maxpool2d_s8";
      }
      cur = n.outputs[0];
    } else if (n.op == Op::Add && n.inputs.size() == 2 && after_dense && !last->relu &&
               (n.inputs[0] == cur || n.inputs[1] == cur)) {
      const ValueId bv = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
      const Tensor* b = param_tensor(g, bv, 1);
      if (!b || b->sizes()[0] != last->n_out) {
        mark_illegal(t, d, cat("add runs on the " + t + " target only as the bias of a dense layer (an f32 param [",
                            last->n_out, "])"));
        poisoned = true;
      } else {
        const std::vector<double> bvals = b->to_f64();
        for (size_t k = 0; k < bvals.size(); ++k) last->b[k] += static_cast<float>(bvals[k]);
        d.how = cat("bias of ", last->name, ": int32, input zero point folded in");
        last->out_value = n.outputs[0];
      }
      cur = n.outputs[0];
    } else if (n.op == Op::Relu && reads_cur && after_weighted && !last->relu) {
      last->relu = true;
      last->out_value = n.outputs[0];
      d.how = cat("fused into ", last->name, " as the requantization clamp at the zero point");
      cur = n.outputs[0];
    } else {
      if (n.op == Op::Relu && reads_cur && poisoned) {
        d.how = "(would fuse into the preceding layer)";
      } else if (n.op == Op::Reshape && reads_cur && poisoned) {
        d.how = "flatten: no code";
      } else {
        std::string why = cat("the " + t + " target has no ", op_name(n.op), " kernel");
        if (n.op == Op::Relu || n.op == Op::Add || n.op == Op::MatMul || n.op == Op::Reshape)
          why = cat(op_name(n.op), " is supported only in a chain of layers fed by the model's input (conv2d or matmul, "
                    "+ bias, relu; max_pool2d; flatten)");
        mark_illegal(t, d, why);
      }
      poisoned = true;
      if (!n.outputs.empty()) cur = n.outputs[0];
    }
    p.report.nodes.push_back(std::move(d));
  }
  if (!p.report.ok()) return p.report.illegal_error();
  if (p.layers.empty()) return error(ErrorCode::illegal, g.name, ": no layer for the " + t + " target to run");
  if (cur != g.outputs[0] || p.layers.back().out_value != cur)
    return error(ErrorCode::illegal, g.name, ": the output ", g.value_label(g.outputs[0]),
                 " is not the last layer's output; the " + t + " target runs one chain of layers");
  for (size_t k = 1; k < p.layers.size(); ++k)
    if (p.layers[k].n_in != p.layers[k - 1].n_out)
      return error(ErrorCode::shape_error, p.layers[k].name, " reads ", p.layers[k].n_in, " features, the layer before "
                   "writes ", p.layers[k - 1].n_out);
  if (p.layers.front().n_in != p.n_in)
    return error(ErrorCode::shape_error, p.layers.front().name, " reads ", p.layers.front().n_in, " features, the input has ",
                 p.n_in);
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

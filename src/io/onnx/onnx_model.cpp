// ONNX ModelProto import: parsing with limits, the graph walk (initializers, inputs with
// symbolic dims, nodes in order, outputs), constant folding of nodes whose inputs are all
// known (shape arithmetic), and the retry that folds graph inputs an op needs as constants.
#include <sys/stat.h>

#include <climits>
#include <fstream>

#include <google/protobuf/io/coded_stream.h>

#include "rlx/mapped_file.h"
#include "io/loaders.h"
#include "onnx_internal.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"
#include "rlx/verify.h"

namespace rlx::onnx_import {

using ::onnx::AttributeProto;

namespace {

constexpr int64_t kFoldMaxElements = int64_t{1} << 20;
// Constants up to this many elements become constant nodes; larger ones weights (params).
constexpr int64_t kInlineConstMax = 64;

}  // namespace

const OpTable& training_op_table() {
  static const OpTable t = [] {
    OpTable r;
    register_training_ops(r);
    return r;
  }();
  return t;
}

const OpTable& op_table() {
  static const OpTable t = [] {
    OpTable r;
    register_elementwise_ops(r);
    register_reduce_ops(r);
    register_movement_ops(r);
    register_nn_ops(r);
    register_misc_ops(r);
    register_resize_ops(r);
    register_rnn_ops(r);
    register_attention_ops(r);
    register_control_ops(r);
    register_sequence_ops(r);
    register_data_dependent_ops(r);
    register_string_ops(r);
    return r;
  }();
  return t;
}

Importer::Importer(Graph& g, std::string file, const onnx::LoadOptions& opts, std::set<std::string> const_inputs)
    : model_(g), file_(std::move(file)), opts_(opts), target_(&g), const_inputs_(std::move(const_inputs)) {
  gb_ = std::make_unique<GraphBuilder>(g);
  ob_ = std::make_unique<OpBuilder>(*gb_);
}

std::string Importer::where() const {
  if (!node) return file_;
  std::string nm = node->name().empty() ? cat("#", node_index) : cat("'", node->name(), "' (#", node_index, ")");
  return cat(file_, ": node ", nm, " ", node->op_type());
}

int Importer::num_inputs() const { return node ? node->input_size() : 0; }
bool Importer::has(int i) const { return node && i >= 0 && i < node->input_size() && !node->input(i).empty(); }
int Importer::num_outputs() const { return node ? node->output_size() : 0; }
bool Importer::wants(int i) const { return node && i >= 0 && i < node->output_size() && !node->output(i).empty(); }

bool Importer::is_konst(int i) const {
  if (!has(i)) return false;
  if (folding_) return fold_inputs_[i].konst.has_value();
  auto it = values_.find(node->input(i));
  return it != values_.end() && it->second.konst.has_value();
}

const TensorType& Importer::type(int i) const {
  static const TensorType none;
  if (!has(i)) return none;
  inputs_read_.insert(i);
  if (folding_) return fold_inputs_[i].type;
  return values_.at(node->input(i)).type;
}

Expected<ValueId> Importer::materialize(OValue& v, const std::string& name) {
  if (v.id != kNoValue) return v.id;
  if (!v.konst) return fail(ErrorCode::internal, "value '", name, "' has neither a graph value nor a constant");
  if (parent_ && (v.initializer || v.konst->numel() > kInlineConstMax)) {
    // a loop body's graph carries no weights (its text does not): the enclosing graph holds
    // the tensor and feeds it to the body as an input
    OValue outer = v;
    RLX_ASSIGN_OR_RETURN(ValueId oid, parent_->materialize(outer, name));
    v.id = model_.add_input(cat("outer.", name), v.konst->type());
    outside_.push_back(oid);
    return v.id;
  }
  ValueId id;
  if (v.initializer || v.konst->numel() > kInlineConstMax) {
    std::string wname = name;
    while (model_.weights.count(wname)) wname += "_";
    id = model_.add_param(wname, v.konst->type(), *v.konst);
  } else {
    id = model_.add_node_typed(Op::Constant, {}, Attrs{{"value", *v.konst}}, {v.konst->type()})[0];
  }
  if (model_.values[id].name.empty()) model_.values[id].name = name;
  v.id = id;
  return id;
}

bool Importer::is_sym(int i) const {
  if (!has(i) || folding_) return false;
  auto it = values_.find(node->input(i));
  return it != values_.end() && it->second.sym.has_value();
}

Expected<std::vector<Dim>> Importer::dims_in(int i) {
  if (is_sym(i)) {
    inputs_read_.insert(i);
    return *values_.at(node->input(i)).sym;
  }
  RLX_ASSIGN_OR_RETURN(auto v, ints(i));
  return std::vector<Dim>(v.begin(), v.end());
}

Status Importer::out_dims(int i, std::vector<Dim> dims, bool scalar) {
  bool all_static = true;
  for (const Dim& d : dims) all_static &= d.is_static();
  if (all_static) {
    Sizes s;
    if (!scalar) s.push_back(static_cast<int64_t>(dims.size()));
    Tensor t = Tensor::zeros(DType::i64, s);
    for (size_t k = 0; k < dims.size(); ++k) t.data<int64_t>()[k] = dims[k].size();
    return out_const(i, t);
  }
  if (!wants(i)) return Status::ok();
  OValue v;
  v.type = TensorType{DType::i64, scalar ? Shape{} : Shape{Dim(static_cast<int64_t>(dims.size()))}};
  v.sym = std::move(dims);
  values_[node->output(i)] = std::move(v);
  return Status::ok();
}

Expected<ValueId> Importer::value_with_dim(const Dim& d) {
  // a graph input, else any value (a data-dependent op's output carries its count)
  std::vector<ValueId> order(model_.inputs.begin(), model_.inputs.end());
  for (ValueId v = 0; v < static_cast<ValueId>(model_.values.size()); ++v) order.push_back(v);
  for (ValueId in : order) {
    const Shape& s = model_.type(in).shape;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] != d) continue;
      ValueId v = in;
      if (s.size() > 1) {
        std::vector<int64_t> axes;
        for (size_t j = 0; j < s.size(); ++j)
          if (j != k) axes.push_back(static_cast<int64_t>(j));
        if (model_.type(in).dtype == DType::boolean) v = o().cast(v, DType::i32);
        v = o().reduce(Op::ReduceMax, v, axes, false);
      }
      return v;
    }
  }
  return fail(ErrorCode::unsupported, "no graph value has the symbolic dim ", d.to_string());
}

Expected<ValueId> Importer::in(int i) {
  if (!has(i)) return fail(ErrorCode::format_error, "input ", i, " is missing");
  inputs_read_.insert(i);
  if (folding_) return fold_inputs_[i].id;
  OValue& v = values_.at(node->input(i));
  if (v.seq)
    return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i), "') is a sequence, which rlx reads only "
                "through the Sequence ops (SequenceAt, ConcatFromSequence, ...)");
  if (v.none)
    return fail(ErrorCode::invalid_argument, "input ", i, " ('", node->input(i), "') is an empty optional, not a tensor");
  if (v.strs)
    return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i), "') is a string tensor, which rlx holds only "
                "at import (read by Cast, CastLike, StringNormalizer and Identity)");
  if (v.sym) {
    std::vector<Dim> d = *v.sym;
    return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i), "') is a shape value with symbolic dims ",
                shape_to_string(d), " used as data; bind the dims (rlx --dims NAME=SIZE) to import it");
  }
  return materialize(v, node->input(i));
}

bool Importer::foldable_from_given(int i) {
  if (!has(i) || is_konst(i) || folding_) return false;
  const size_t before = needed_inputs_.size();
  std::set<std::string> seen;
  std::vector<std::string> stack{node->input(i)};
  bool given = false;
  while (!stack.empty()) {
    std::string v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    if (graph_input_names_.count(v)) {
      given |= opts_.input_values.count(v) > 0 && !const_inputs_.count(v);
      continue;
    }
    auto it = producer_.find(v);
    if (it == producer_.end()) continue;
    for (const std::string& in : it->second->input())
      if (!in.empty()) stack.push_back(in);
  }
  note_needed(node->input(i));
  return given || needed_inputs_.size() > before;
}

void Importer::note_needed(const std::string& value_name) {
  std::set<std::string> seen;
  std::vector<std::string> stack{value_name};
  while (!stack.empty()) {
    std::string v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    if (graph_input_names_.count(v)) {
      if (opts_.input_values.count(v)) needed_inputs_.insert(v);
      continue;
    }
    auto it = producer_.find(v);
    if (it == producer_.end()) continue;
    for (const std::string& in : it->second->input())
      if (!in.empty()) stack.push_back(in);
  }
}

Expected<Tensor> Importer::konst(int i) {
  if (!has(i)) return fail(ErrorCode::format_error, "input ", i, " is missing");
  inputs_read_.insert(i);
  if (is_konst(i)) return folding_ ? *fold_inputs_[i].konst : *values_.at(node->input(i)).konst;
  note_needed(node->input(i));
  if (!folding_ && values_.at(node->input(i)).seq)
    return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i), "') is a sequence, not a tensor");
  if (!folding_ && values_.at(node->input(i)).none)
    return fail(ErrorCode::invalid_argument, "input ", i, " ('", node->input(i), "') is an empty optional, not a tensor");
  if (!folding_ && values_.at(node->input(i)).strs)
    return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i), "') is a string tensor, not a numeric one");
  if (is_sym(i))
    return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i), "') holds symbolic dims ",
                shape_to_string(*values_.at(node->input(i)).sym),
                " where rlx needs constants; bind them with rlx --dims NAME=SIZE");
  return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i),
              "') must be known at import time (an initializer, a Constant, or computed from them); "
              "rlx does not import data-dependent shapes");
}

Expected<std::vector<int64_t>> tensor_ints(const Tensor& t, const std::string& what) {
  if (!is_int(t.dtype()) || is_packed(t.dtype()))
    return error(ErrorCode::dtype_error, what, " must be an integer tensor, got ", dtype_name(t.dtype()));
  if (t.rank() > 1) return error(ErrorCode::shape_error, what, " must be a scalar or 1-D, got rank ", t.rank());
  std::vector<int64_t> r(static_cast<size_t>(t.numel()));
  for (int64_t k = 0; k < t.numel(); ++k) {
    if (t.dtype() == DType::i64) {
      r[k] = t.data<int64_t>()[k];
    } else {
      const double v = t.get_f64(k);  // exact for every narrower integer type; u64 may not fit
      if (!(v < 9.2233720368547758e18)) return error(ErrorCode::out_of_range, what, " holds ", v, ", past int64");
      r[k] = static_cast<int64_t>(v);
    }
  }
  return r;
}

Expected<std::vector<int64_t>> Importer::ints(int i) {
  RLX_ASSIGN_OR_RETURN(Tensor t, konst(i));
  auto r = tensor_ints(t, cat("input ", i, " ('", node->input(i), "')"));
  if (!r) return r.status().with_context(where());
  return r;
}

Expected<std::vector<double>> Importer::floats(int i) {
  RLX_ASSIGN_OR_RETURN(Tensor t, konst(i));
  return t.to_f64();
}

const AttributeProto* Importer::attr(const std::string& name) const {
  if (!node) return nullptr;
  attrs_read_.insert(name);
  for (const AttributeProto& a : node->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
bool Importer::has_attr(const std::string& name) const { return attr(name) != nullptr; }
void Importer::ignore_input(int i) const { inputs_read_.insert(i); }
const AttributeProto* Importer::typed_attr(const std::string& name, int type, const char* what) const {
  const AttributeProto* a = attr(name);
  if (!a || a->type() == AttributeProto::UNDEFINED || a->type() == type) return a;
  if (attr_error_.is_ok())
    attr_error_ = fail(ErrorCode::format_error, "attribute '", name, "' must be ", what, ", got type ",
                       AttributeProto::AttributeType_Name(a->type()));
  return nullptr;
}
int64_t Importer::ai(const std::string& name, int64_t def) const {
  const AttributeProto* a = typed_attr(name, AttributeProto::INT, "an integer (INT)");
  return a ? a->i() : def;
}
double Importer::af(const std::string& name, double def) const {
  // an integer where a float is read is exact, and some exporters write one
  const AttributeProto* a = attr(name);
  if (a && a->type() == AttributeProto::INT) return static_cast<double>(a->i());
  a = typed_attr(name, AttributeProto::FLOAT, "a float (FLOAT)");
  return a ? a->f() : def;
}
std::string Importer::as(const std::string& name, const std::string& def) const {
  const AttributeProto* a = typed_attr(name, AttributeProto::STRING, "a string (STRING)");
  return a ? a->s() : def;
}
std::vector<int64_t> Importer::aints(const std::string& name, std::vector<int64_t> def) const {
  const AttributeProto* a = typed_attr(name, AttributeProto::INTS, "a list of integers (INTS)");
  if (!a) return def;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
std::vector<double> Importer::afloats(const std::string& name, std::vector<double> def) const {
  const AttributeProto* a = typed_attr(name, AttributeProto::FLOATS, "a list of floats (FLOATS)");
  if (!a) return def;
  return std::vector<double>(a->floats().begin(), a->floats().end());
}
Expected<Tensor> Importer::atensor(const std::string& name) const {
  const AttributeProto* a = attr(name);
  if (!a || !a->has_t()) return fail(ErrorCode::format_error, "attribute '", name, "' must be a tensor");
  return tensor_from_proto(a->t(), folder_, cat(where(), ": attribute '", name, "'"));
}
Status Importer::only_attrs(std::initializer_list<const char*> known) const {
  for (const char* k : known) attrs_read_.insert(k);
  for (const AttributeProto& a : node->attribute()) {
    bool ok = false;
    for (const char* k : known) ok |= a.name() == k;
    if (!ok) return fail(ErrorCode::unsupported, "attribute '", a.name(), "' is not supported");
  }
  return Status::ok();
}

Status Importer::out(int i, ValueId v) {
  if (!ob_->ok()) return ob_->status().with_context(where());
  if (v == kNoValue) return fail(ErrorCode::internal, "output ", i, " was not produced");
  if (!wants(i)) return Status::ok();
  OValue ov;
  ov.id = v;
  ov.type = target_->type(v);
  if (folding_) {
    pending_outputs_[i] = ov;
    return Status::ok();
  }
  if (model_.values[v].name.empty() && model_.values[v].producer >= 0) model_.values[v].name = node->output(i);
  values_[node->output(i)] = ov;
  return Status::ok();
}

Status Importer::out_const(int i, Tensor t) {
  if (!wants(i)) return Status::ok();
  OValue ov;
  ov.type = t.type();
  ov.konst = std::move(t);
  if (folding_) pending_outputs_[i] = ov;
  else values_[node->output(i)] = ov;
  return Status::ok();
}

Expected<int> axis_of(Importer& m, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank || rank == 0)
    return m.fail(ErrorCode::out_of_range, "axis ", axis, " is out of range for rank ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<int64_t> static_dims(const TensorType& t) {
  std::vector<int64_t> r;
  for (const Dim& d : t.shape) r.push_back(d.is_static() ? d.size() : -1);
  return r;
}

Status Importer::run_mapping(const OpMapping& m) {
  ob_ = std::make_unique<OpBuilder>(*gb_);
  attr_error_ = Status::ok();
  attrs_read_.clear();
  inputs_read_.clear();
  Status s = m.fn(*this);
  if (!attr_error_.is_ok()) return attr_error_;
  if (!s.is_ok()) return s;
  // Likewise an input: newer opsets moved attributes into inputs (Pad's axes, DFT's axis) and
  // added optional ones; a mapping that does not know one must not drop it.
  for (int i = 0; i < node->input_size(); ++i)
    if (has(i) && !inputs_read_.count(i))
      return fail(ErrorCode::unsupported, "input ", i, " ('", node->input(i), "') is not supported (rlx's ",
                  node->op_type(), " does not read it)");
  // An attribute the mapping never looked at would be silently ignored: a wrong answer when it
  // changes the op's meaning (an exporter's newer attribute, a misspelling). It is refused.
  for (const AttributeProto& a : node->attribute())
    if (!attrs_read_.count(a.name()))
      return fail(ErrorCode::unsupported, "attribute '", a.name(), "' is not supported (rlx's ", node->op_type(),
                  " does not read it)");
  if (!ob_->ok()) return ob_->status().with_context(where());
  return Status::ok();
}

Status Importer::fold_node(const OpMapping& m) {
  Graph scratch;
  std::vector<Tensor> feeds;
  fold_inputs_.assign(node->input_size(), OValue{});
  for (int i = 0; i < node->input_size(); ++i) {
    if (!has(i)) continue;
    const OValue& src = values_.at(node->input(i));
    OValue v;
    v.konst = src.konst;
    v.type = src.type;
    v.id = scratch.add_input(cat("in", i), src.type);
    feeds.push_back(*src.konst);
    fold_inputs_[i] = v;
  }
  pending_outputs_.assign(node->output_size(), std::nullopt);
  Graph* saved_target = target_;
  auto saved_gb = std::move(gb_);
  target_ = &scratch;
  gb_ = std::make_unique<GraphBuilder>(scratch);
  folding_ = true;
  Status s = run_mapping(m);
  folding_ = false;
  target_ = saved_target;
  gb_ = std::move(saved_gb);
  ob_ = std::make_unique<OpBuilder>(*gb_);
  if (!s.is_ok()) return s;
  std::vector<int> computed;
  for (int i = 0; i < node->output_size(); ++i) {
    if (!wants(i)) continue;
    if (!pending_outputs_[i]) return fail(ErrorCode::internal, "output ", i, " was not produced");
    if (!pending_outputs_[i]->konst && !pending_outputs_[i]->strs) {
      scratch.outputs.push_back(pending_outputs_[i]->id);
      computed.push_back(i);
    }
  }
  std::vector<Tensor> results;
  if (!computed.empty()) {
    for (ValueId o : scratch.outputs) {
      auto sz = static_sizes(scratch.type(o).shape);
      if (!sz || numel(*sz) > kFoldMaxElements) return fail(ErrorCode::unsupported, "result too large to fold");
    }
    // a value that is both input and output of the scratch graph needs no run
    bool trivial = true;
    for (ValueId o : scratch.outputs) trivial &= scratch.values[o].producer < 0;
    if (trivial) {
      for (ValueId o : scratch.outputs) results.push_back(feeds[static_cast<size_t>(o)]);
    } else {
      RLX_ASSIGN_OR_RETURN(auto model, Model::compile(std::move(scratch), {.device = "ref"}));
      RLX_ASSIGN_OR_RETURN(results, model->run(feeds));
    }
  }
  size_t k = 0;
  for (int i = 0; i < node->output_size(); ++i) {
    if (!wants(i)) continue;
    OValue v;
    if (pending_outputs_[i]->konst || pending_outputs_[i]->strs) {
      v = *pending_outputs_[i];
    } else {
      v.konst = results[k++];
      v.type = v.konst->type();
    }
    v.id = kNoValue;
    values_[node->output(i)] = v;
  }
  return Status::ok();
}

Status Importer::import_node(const ::onnx::NodeProto& n, int index) {
  node = &n;
  node_index = index;
  const bool training = n.domain() == kTrainingDomain;
  if (!n.domain().empty() && n.domain() != "ai.onnx" && !training)
    return fail(ErrorCode::unsupported, "op domain '", n.domain(), "' is not supported (the default ONNX domain and ",
                kTrainingDomain, " are)");
  if (training && training_opset != 1)
    return fail(ErrorCode::unsupported, "the model imports ", kTrainingDomain, " version ", training_opset,
                " (rlx reads version 1)");
  if (!training && !default_opset_imported)
    return fail(ErrorCode::format_error, "a default-domain op, and the model imports no version of the default ONNX opset");
  if (opset < 7 && !training) {
    // Models older than opset 7 load only if every op is one whose semantics have not changed
    // since (its definition in the model's opset is the one rlx maps).
    static const std::set<std::string> unchanged = {
        "Not", "Softplus", "Softsign", "GlobalAveragePool", "GlobalMaxPool", "Elu", "HardSigmoid", "Selu",
        "InstanceNormalization", "LeakyRelu", "ThresholdedRelu", "Identity", "Transpose", "Floor", "Ceil",
        "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "ArgMax", "ArgMin"};
    if (!unchanged.count(n.op_type()))
      return fail(ErrorCode::unsupported, "opset ", opset, " is not supported for ", n.op_type(),
                  " (rlx imports opsets 7 to 23; older models only with ops unchanged since)");
  }
  const OpTable& table = training ? training_op_table() : op_table();
  auto it = table.find(n.op_type());
  if (it == table.end()) return fail(ErrorCode::unsupported, "op ", n.op_type(), " is not supported by rlx's ONNX importer");
  bool all_konst = true, any_sym = false;
  int64_t elems = 0;
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty()) continue;
    auto v = values_.find(n.input(i));
    if (v == values_.end()) {  // in a loop body imported as a graph of its own: an outer-scope value
      RLX_ASSIGN_OR_RETURN(bool captured, capture_outer(n.input(i)));
      node = &n;
      node_index = index;
      if (captured) v = values_.find(n.input(i));
    }
    if (v == values_.end())
      return fail(ErrorCode::format_error, "input '", n.input(i),
                  "' is not a graph input, an initializer or an output of an earlier node (missing "
                  "initializer, or nodes out of order / in a cycle)");
    if (!v->second.konst) all_konst = false;
    else elems += v->second.konst->numel();
    any_sym |= v->second.sym.has_value();
  }
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty()) continue;
    if (values_.count(n.output(i)))
      return fail(ErrorCode::format_error, "output '", n.output(i), "' is already defined (names must be assigned once)");
  }
  if (it->second.foldable && all_konst && elems <= kFoldMaxElements) {
    Status s = fold_node(it->second);
    if (s.is_ok()) return s;
    if (s.code() != ErrorCode::unsupported && s.code() != ErrorCode::illegal && s.code() != ErrorCode::unavailable)
      return s;
    // not evaluable on the reference device: emit the node into the graph instead
  }
  size_t first = model_.nodes.size();
  if (any_sym && is_symbolic_op(n.op_type())) RLX_TRY(run_mapping(OpMapping{map_symbolic}));
  else RLX_TRY(run_mapping(it->second));
  for (size_t k = first; k < model_.nodes.size(); ++k)
    if (model_.nodes[k].name.empty()) model_.nodes[k].name = n.name().empty() ? cat(n.op_type(), "_", index) : n.name();
  for (int i = 0; i < n.output_size(); ++i)
    if (wants(i) && !values_.count(n.output(i))) return fail(ErrorCode::internal, "output ", i, " was not produced");
  return Status::ok();
}

Expected<OValue> Importer::input_value(int i) {
  if (!has(i)) return fail(ErrorCode::format_error, "input ", i, " is missing");
  inputs_read_.insert(i);
  if (folding_) return fold_inputs_[i];
  return values_.at(node->input(i));
}

Status Importer::out_value(int i, OValue v) {
  if (!wants(i)) return Status::ok();
  if (folding_) {
    pending_outputs_[i] = std::move(v);
    return Status::ok();
  }
  if (v.id != kNoValue && model_.values[v.id].name.empty() && model_.values[v.id].producer >= 0)
    model_.values[v.id].name = node->output(i);
  values_[node->output(i)] = std::move(v);
  return Status::ok();
}

Expected<std::vector<OValue>> Importer::seq_in(int i) {
  if (!has(i)) return fail(ErrorCode::format_error, "input ", i, " is missing");
  inputs_read_.insert(i);
  const OValue* v = folding_ ? &fold_inputs_[i] : &values_.at(node->input(i));
  if (v->none) return fail(ErrorCode::invalid_argument, "input ", i, " ('", node->input(i), "') is an empty optional, not a sequence");
  if (!v->seq) return fail(ErrorCode::dtype_error, "input ", i, " ('", node->input(i), "') must be a sequence");
  return *v->seq;
}

bool Importer::is_strings(int i) const {
  if (!has(i)) return false;
  if (folding_) return fold_inputs_[i].strs != nullptr;
  auto it = values_.find(node->input(i));
  return it != values_.end() && it->second.strs != nullptr;
}

Expected<std::shared_ptr<const StringTensor>> Importer::strings_in(int i) {
  if (!has(i)) return fail(ErrorCode::format_error, "input ", i, " is missing");
  inputs_read_.insert(i);
  const OValue* v = folding_ ? &fold_inputs_[i] : &values_.at(node->input(i));
  if (!v->strs) return fail(ErrorCode::dtype_error, "input ", i, " ('", node->input(i), "') must be a string tensor");
  return v->strs;
}

Status Importer::out_strings(int i, StringTensor t) {
  OValue v;
  v.type = TensorType{DType::u8, Shape(t.sizes.begin(), t.sizes.end())};  // dtype unused: strs marks it
  v.strs = std::make_shared<const StringTensor>(std::move(t));
  return out_value(i, std::move(v));
}

Status Importer::out_seq(int i, std::vector<OValue> elems, DType dt) {
  OValue v;
  v.type = TensorType{dt, {}};
  v.seq = std::make_shared<const std::vector<OValue>>(std::move(elems));
  return out_value(i, std::move(v));
}

Expected<bool> Importer::capture_outer(const std::string& name) {
  if (!parent_) return false;
  auto it = parent_->values_.find(name);
  if (it == parent_->values_.end()) {
    RLX_ASSIGN_OR_RETURN(bool found, parent_->capture_outer(name));
    if (!found) return false;
    it = parent_->values_.find(name);
  }
  OValue& ov = it->second;
  if (ov.seq || ov.none || ov.strs)
    return parent_->fail(ErrorCode::unsupported, "the loop body reads '", name, "', a sequence, optional or string "
                         "tensor, which a loop run at run time cannot read");
  if (ov.sym || (ov.konst && !ov.initializer && ov.konst->numel() <= kInlineConstMax)) {
    OValue copy = ov;  // known at import: the body gets it as it is
    copy.id = kNoValue;
    copy.sym = ov.sym;
    if (!copy.konst && !copy.sym) return parent_->fail(ErrorCode::internal, "'", name, "' has no value");
    values_[name] = std::move(copy);
    return true;
  }
  RLX_ASSIGN_OR_RETURN(ValueId oid, parent_->materialize(ov, name));
  OValue bv;
  bv.type = parent_->model_.type(oid);
  bv.id = model_.add_input(cat("outer.", name), bv.type);
  outside_.push_back(oid);
  values_[name] = std::move(bv);
  return true;
}

Expected<std::string> Importer::import_loop_body(const ::onnx::GraphProto& g, const std::vector<TensorType>& types,
                                                 std::vector<ValueId>& outside) {
  if (static_cast<size_t>(g.input_size()) != types.size())
    return fail(ErrorCode::format_error, "the body has ", g.input_size(), " inputs, the node gives it ", types.size());
  if (g.sparse_initializer_size() > 0) return fail(ErrorCode::unsupported, "the body has sparse initializers");
  inlined_nodes_ += g.node_size() + 1;
  if (inlined_nodes_ > kMaxInlinedNodes)
    return fail(ErrorCode::unsupported, "control flow imports more than ", kMaxInlinedNodes, " subgraph nodes");
  Graph bg;
  bg.name = "loop_body";
  Importer sub(bg, file_, opts_, {});
  sub.opset = opset;
  sub.training_opset = training_opset;
  sub.default_opset_imported = default_opset_imported;
  sub.folder_ = folder_;
  sub.parent_ = this;
  sub.inlined_nodes_ = inlined_nodes_;
  for (int i = 0; i < g.input_size(); ++i) {
    OValue v;
    v.type = types[static_cast<size_t>(i)];
    v.id = bg.add_input(g.input(i).name().empty() ? cat("in", i) : g.input(i).name(), v.type);
    sub.values_[g.input(i).name()] = std::move(v);
  }
  for (const auto& t : g.initializer()) {
    RLX_ASSIGN_OR_RETURN(Tensor tensor, tensor_from_proto(t, folder_, cat(where(), ": body initializer")));
    OValue v;
    v.type = tensor.type();
    v.konst = std::move(tensor);
    sub.values_[t.name()] = std::move(v);
  }
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& o : g.node(i).output())
      if (!o.empty()) sub.producer_.emplace(o, &g.node(i));
  const std::string outer_where = where();
  for (int i = 0; i < g.node_size(); ++i) {
    Status ns = sub.import_node(g.node(i), i);
    if (!ns.is_ok()) return ns.with_context(cat("in the body of ", outer_where, " (a loop run at run time)"));
  }
  sub.node = nullptr;
  for (const auto& vi : g.output()) {
    auto it = sub.values_.find(vi.name());
    if (it == sub.values_.end()) return fail(ErrorCode::format_error, "body output '", vi.name(), "' is not produced");
    if (it->second.seq || it->second.none || it->second.strs || it->second.sym)
      return fail(ErrorCode::unsupported, "body output '", vi.name(), "' is a sequence, optional, string or symbolic "
                  "shape value, which a loop run at run time cannot carry");
    RLX_TRY(sub.add_graph_output(it->second, vi.name()));
  }
  inlined_nodes_ = sub.inlined_nodes_;
  outside = sub.outside_;
  RLX_TRY(verify_graph(bg).with_context(cat(where(), ": loop body")));
  std::string text = print_graph(bg);
  // a nested loop's text is escaped once more per level: bound what nesting can make of a small file
  constexpr size_t kMaxBodyText = size_t{1} << 24;
  if (text.size() > kMaxBodyText)
    return fail(ErrorCode::unsupported, "the loop body's text is ", text.size(), " bytes, over rlx's 2^24 (loops run at "
                "run time nested too deep or too large)");
  return text;
}

Expected<std::vector<OValue>> Importer::run_subgraph(const ::onnx::GraphProto& g, std::vector<OValue> inputs,
                                                     const std::string& what) {
  if (folding_) return fail(ErrorCode::internal, "a subgraph while folding");
  if (static_cast<size_t>(g.input_size()) != inputs.size())
    return fail(ErrorCode::format_error, what, " has ", g.input_size(), " inputs, the op gives it ", inputs.size());
  if (g.sparse_initializer_size() > 0) return fail(ErrorCode::unsupported, what, " has sparse initializers");
  // Unrolled and nested loops multiply: a budget on the nodes imported from subgraphs keeps a
  // small hostile file from taking unbounded time and memory.
  inlined_nodes_ += g.node_size() + 1;
  if (inlined_nodes_ > kMaxInlinedNodes)
    return fail(ErrorCode::unsupported, "control flow unrolls to more than ", kMaxInlinedNodes,
                " subgraph nodes (rlx compiles If, Loop and Scan inline)");
  // the outer node's state: its mapping resumes when the subgraph is in
  const ::onnx::NodeProto* outer = node;
  const int outer_index = node_index;
  std::unique_ptr<OpBuilder> outer_ob = std::move(ob_);
  Status outer_attr_error = attr_error_;
  std::set<std::string> outer_attrs = attrs_read_;
  std::set<int> outer_inputs = inputs_read_;
  std::map<std::string, OValue> scope = values_;
  auto restore = [&] {
    node = outer;
    node_index = outer_index;
    ob_ = std::move(outer_ob);
    attr_error_ = outer_attr_error;
    attrs_read_ = outer_attrs;
    inputs_read_ = outer_inputs;
    // outer values the subgraph made graph values keep them (else every unrolled iteration
    // would add another copy of a weight)
    for (auto& [name, v] : scope)
      if (v.id == kNoValue) {
        auto it = values_.find(name);
        if (it != values_.end() && it->second.id != kNoValue && it->second.konst && v.konst &&
            it->second.konst->bytes() == v.konst->bytes())  // the same value, not a shadowing one
          v.id = it->second.id;
      }
    values_ = std::move(scope);
  };
  Status s = [&]() -> Status {
    for (const auto& t : g.initializer()) {
      RLX_ASSIGN_OR_RETURN(Tensor tensor, tensor_from_proto(t, folder_, cat(where(), ": ", what, " initializer")));
      OValue v;
      v.type = tensor.type();
      v.konst = std::move(tensor);
      values_[t.name()] = std::move(v);
    }
    for (int i = 0; i < g.input_size(); ++i) values_[g.input(i).name()] = inputs[static_cast<size_t>(i)];
    for (int i = 0; i < g.node_size(); ++i)
      for (const std::string& o : g.node(i).output())
        if (!o.empty()) producer_.emplace(o, &g.node(i));
    for (int i = 0; i < g.node_size(); ++i) {
      Status ns = import_node(g.node(i), i);
      if (!ns.is_ok()) return ns.with_context(cat("in ", what, " of node '", outer->name(), "' (", outer->op_type(), ")"));
    }
    return Status::ok();
  }();
  std::vector<OValue> outs;
  if (s.is_ok())
    for (const auto& vi : g.output()) {
      auto it = values_.find(vi.name());
      if (it == values_.end()) {
        s = error(ErrorCode::format_error, file_, ": ", what, " output '", vi.name(), "' is not produced");
        break;
      }
      outs.push_back(it->second);
    }
  restore();
  if (!s.is_ok()) return s;
  return outs;
}

Status Importer::import_graph(const ::onnx::GraphProto& gp, const std::string& folder) {
  folder_ = folder;
  model_.name = gp.name().empty() ? "main" : gp.name();
  if (gp.sparse_initializer_size() > 0)
    return error(ErrorCode::unsupported, file_, ": sparse initializers are not supported");
  for (const auto& t : gp.initializer()) {
    if (t.name().empty()) return error(ErrorCode::format_error, file_, ": an initializer has no name");
    if (values_.count(t.name())) return error(ErrorCode::format_error, file_, ": initializer '", t.name(), "' is defined twice");
    RLX_ASSIGN_OR_RETURN(Tensor tensor, tensor_from_proto(t, folder, cat(file_, ": initializer")));
    OValue v;
    v.type = tensor.type();
    v.konst = std::move(tensor);
    v.initializer = true;
    values_[t.name()] = std::move(v);
  }
  std::set<std::string> initializer_names;
  for (const auto& [k, v] : values_) initializer_names.insert(k);
  for (const auto& vi : gp.input()) {
    const std::string& name = vi.name();
    if (name.empty()) return error(ErrorCode::format_error, file_, ": a graph input has no name");
    if (initializer_names.count(name)) continue;  // an initializer with a default value: a weight
    if (values_.count(name)) return error(ErrorCode::format_error, file_, ": graph input '", name, "' is defined twice");
    graph_input_names_.insert(name);
    RLX_ASSIGN_OR_RETURN(onnx::ValueKind kind, value_kind_of(vi.type(), cat(file_, ": graph input '", name, "'")));
    const ::onnx::TypeProto& declared =
        vi.type().has_optional_type() ? vi.type().optional_type().elem_type() : vi.type();
    auto structured = opts_.structured_inputs.find(name);
    if (structured != opts_.structured_inputs.end() && structured->second.kind != onnx::Value::Kind::tensor &&
        structured->second.kind != onnx::Value::Kind::strings) {
      if (structured->second.kind == onnx::Value::Kind::none && kind != onnx::ValueKind::optional_tensor &&
          kind != onnx::ValueKind::optional_sequence)
        return error(ErrorCode::invalid_argument, file_, ": graph input '", name, "' is given no value, and it is not optional");
      RLX_TRY(import_structured_input(name, declared, structured->second));
      continue;
    }
    if (kind == onnx::ValueKind::sequence || kind == onnx::ValueKind::optional_sequence)
      return error(ErrorCode::unsupported, file_, ": graph input '", name, "' is a sequence: give its elements "
                   "(rlx compiles the graph for one length of it; LoadOptions::structured_inputs)");
    const auto& tt = declared.tensor_type();
    if (tt.elem_type() == ::onnx::TensorProto::STRING) {
      if (structured == opts_.structured_inputs.end() || structured->second.kind != onnx::Value::Kind::strings)
        return error(ErrorCode::unsupported, file_, ": graph input '", name, "' is a string tensor: rlx has no string "
                     "dtype and computes string ops at import, so it needs the input's value (rlx run)");
      const onnx::Value& sv = structured->second;
      auto n = checked_numel(sv.string_sizes);
      if (!n || *n != static_cast<int64_t>(sv.strings.size()))
        return error(ErrorCode::invalid_argument, file_, ": graph input '", name, "' is given ", sv.strings.size(),
                     " strings for the shape ", sizes_to_string(sv.string_sizes));
      OValue v;
      v.type = TensorType{DType::u8, Shape(sv.string_sizes.begin(), sv.string_sizes.end())};
      v.strs = std::make_shared<const StringTensor>(StringTensor{sv.string_sizes, sv.strings});
      values_[name] = std::move(v);
      continue;
    }
    if (structured != opts_.structured_inputs.end() && structured->second.kind == onnx::Value::Kind::strings)
      return error(ErrorCode::dtype_error, file_, ": graph input '", name, "' is given strings; the model declares ",
                   onnx_dtype_name(tt.elem_type()));
    auto dt = dtype_from_onnx(tt.elem_type());
    if (!dt) return error(ErrorCode::unsupported, file_, ": graph input '", name, "' has data type ", onnx_dtype_name(tt.elem_type()));
    auto given = opts_.input_values.find(name);
    if (const_inputs_.count(name) && given != opts_.input_values.end()) {
      if (given->second.dtype() == DType::u16 && *dt == DType::bf16) {
        OValue v;  // bf16 given as its u16 bits (NumPy has no bfloat16)
        v.konst = Tensor(DType::bf16, given->second.sizes(), given->second.storage(), given->second.byte_offset());
        v.type = v.konst->type();
        values_[name] = std::move(v);
        continue;
      }
      if (given->second.dtype() != *dt)
        return error(ErrorCode::dtype_error, file_, ": value for input '", name, "' is ", dtype_name(given->second.dtype()),
                     ", the model declares ", dtype_name(*dt));
      OValue v;
      v.konst = given->second;
      v.type = given->second.type();
      values_[name] = std::move(v);
      continue;
    }
    if (!tt.has_shape())
      return error(ErrorCode::unsupported, file_, ": graph input '", name, "' has no shape (rank unknown)");
    if (tt.shape().dim_size() > 64) return error(ErrorCode::format_error, file_, ": graph input '", name, "' has rank over 64");
    TensorType type{*dt, {}};
    for (int k = 0; k < tt.shape().dim_size(); ++k) {
      const auto& d = tt.shape().dim(k);
      if (d.has_dim_value()) {
        if (d.dim_value() < 0 || d.dim_value() > (int64_t{1} << 40))
          return error(ErrorCode::format_error, file_, ": graph input '", name, "' has invalid dimension ", d.dim_value());
        type.shape.push_back(Dim(d.dim_value()));
        continue;
      }
      std::string sym = d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : cat(name, "_dim", k);
      auto b = opts_.dims.find(sym);
      if (b != opts_.dims.end()) {
        type.shape.push_back(Dim(b->second));
      } else if (given != opts_.input_values.end() && opts_.bind_dims_from_values &&
                 given->second.rank() == tt.shape().dim_size()) {
        type.shape.push_back(Dim(given->second.sizes()[k]));
      } else {
        type.shape.push_back(Dim::symbol(sym));
      }
    }
    OValue v;
    v.type = type;
    v.id = model_.add_input(name, type);
    values_[name] = std::move(v);
  }
  for (int i = 0; i < gp.node_size(); ++i)
    for (const std::string& o : gp.node(i).output())
      if (!o.empty()) producer_.emplace(o, &gp.node(i));
  for (int i = 0; i < gp.node_size(); ++i) RLX_TRY(import_node(gp.node(i), i));
  node = nullptr;
  if (gp.output_size() == 0) return error(ErrorCode::format_error, file_, ": the graph has no outputs");
  for (const auto& vi : gp.output()) {
    auto it = values_.find(vi.name());
    if (it == values_.end())
      return error(ErrorCode::format_error, file_, ": graph output '", vi.name(), "' is not produced by any node");
    OValue& v = it->second;
    if (v.strs) {
      output_structure_[kImportOutputKey + vi.name()] = "string" + sizes_to_string(v.strs->sizes);
      import_outputs_[vi.name()] = onnx::Value::of_strings(v.strs->sizes, v.strs->values);
    } else if (v.none) {
      output_structure_[kNoneOutputKey + vi.name()] = dtype_name(v.type.dtype);
    } else if (v.seq) {
      output_structure_[kSequenceOutputKey + vi.name()] = std::to_string(v.seq->size());
      std::vector<OValue> elems = *v.seq;
      for (size_t k = 0; k < elems.size(); ++k) RLX_TRY(add_graph_output(elems[k], element_name(vi.name(), k)));
    } else {
      RLX_TRY(add_graph_output(v, vi.name()));
    }
  }
  if (model_.outputs.empty() && import_outputs_.empty())
    return error(ErrorCode::unsupported, file_, ": every graph output is an empty sequence or optional, so the "
                 "compiled graph would compute nothing");
  return Status::ok();
}

Status Importer::add_graph_output(OValue& v, const std::string& name) {
  RLX_ASSIGN_OR_RETURN(ValueId id, materialize(v, name));
  bool reused = model_.values[id].producer < 0;
  for (ValueId o : model_.outputs) reused |= o == id;
  if (reused || (!model_.values[id].name.empty() && model_.values[id].name != name)) {
    // a graph input or an already named value: give the output its own node and name
    id = model_.add_node_typed(Op::Reshape, {id}, Attrs{{"shape", std::vector<int64_t>(model_.type(id).rank(), 0)}},
                               {model_.type(id)}, "output_" + name)[0];
  }
  model_.values[id].name = name;
  model_.outputs.push_back(id);
  return Status::ok();
}

// A sequence graph input becomes one graph input per given element (NAME[k], typed as the
// element), checked against the declared element type; an empty optional becomes `none`.
Status Importer::import_structured_input(const std::string& name, const ::onnx::TypeProto& declared,
                                         const onnx::Value& given) {
  const ::onnx::TypeProto& elem_type =
      declared.has_sequence_type() ? declared.sequence_type().elem_type() : declared;
  if (!elem_type.has_tensor_type())
    return error(ErrorCode::unsupported, file_, ": graph input '", name, "' holds no tensors");
  const auto& tt = elem_type.tensor_type();
  auto dt = dtype_from_onnx(tt.elem_type());
  if (!dt) return error(ErrorCode::unsupported, file_, ": graph input '", name, "' has data type ", onnx_dtype_name(tt.elem_type()));
  OValue v;
  v.type = TensorType{*dt, {}};
  if (given.kind == onnx::Value::Kind::none) {
    v.none = true;
    values_[name] = std::move(v);
    return Status::ok();
  }
  if (!declared.has_sequence_type())
    return error(ErrorCode::dtype_error, file_, ": graph input '", name, "' is given a sequence; the model declares a tensor");
  if (given.elements.size() > (size_t{1} << 16))
    return error(ErrorCode::unsupported, file_, ": graph input '", name, "' is given ", given.elements.size(),
                 " elements (rlx holds sequences of up to 2^16)");
  std::vector<OValue> elems;
  for (size_t k = 0; k < given.elements.size(); ++k) {
    const Tensor& e = given.elements[k];
    const std::string en = element_name(name, k);
    if (e.dtype() != *dt)
      return error(ErrorCode::dtype_error, file_, ": graph input '", en, "' is ", dtype_name(e.dtype()),
                   ", the model declares a sequence of ", dtype_name(*dt));
    if (tt.has_shape()) {
      if (tt.shape().dim_size() != e.rank())
        return error(ErrorCode::shape_error, file_, ": graph input '", en, "' has rank ", e.rank(),
                     ", the model declares elements of rank ", tt.shape().dim_size());
      for (int d = 0; d < e.rank(); ++d)
        if (tt.shape().dim(d).has_dim_value() && tt.shape().dim(d).dim_value() != e.sizes()[d])
          return error(ErrorCode::shape_error, file_, ": graph input '", en, "' has size ", e.sizes()[d], " in dim ", d,
                       ", the model declares ", tt.shape().dim(d).dim_value());
    }
    for (ValueId in : model_.inputs)
      if (model_.values[in].name == en) return error(ErrorCode::format_error, file_, ": two graph inputs are named '", en, "'");
    OValue ev;
    ev.type = e.type();
    ev.id = model_.add_input(en, ev.type);
    elems.push_back(std::move(ev));
  }
  v.seq = std::make_shared<const std::vector<OValue>>(std::move(elems));
  values_[name] = std::move(v);
  return Status::ok();
}

}  // namespace rlx::onnx_import

namespace rlx::onnx_import {

Status parse_model_proto(std::string_view bytes, const std::string& name, ::onnx::ModelProto& mp) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return error(ErrorCode::format_error, name, ": larger than protobuf's 2 GiB limit");
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  in.SetRecursionLimit(64);
  if (!mp.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return error(ErrorCode::format_error, name,
                 ": not a valid ONNX ModelProto: truncated or malformed protobuf, or subgraphs (If, Loop, Scan bodies) "
                 "nested deeper than rlx reads (64 protobuf messages, about 20 levels)");
  return Status::ok();
}

}  // namespace rlx::onnx_import

namespace rlx::onnx {

using onnx_import::parse_model_proto;

namespace {

// load() and parse() return a graph; an output computed at import is not in it.
Status string_output_error(const std::string& file, const std::map<std::string, Value>& import_outputs) {
  return error(ErrorCode::unsupported, file, ": graph output '", import_outputs.begin()->first,
               "' is a string tensor, which rlx computes at import and no compiled graph holds (onnx::load_and_run "
               "and rlx run return it)");
}

}  // namespace

Expected<LoadedModel> parse(std::string_view bytes, const std::string& name, const std::string& folder,
                            const LoadOptions& options) {
  std::map<std::string, Value> import_outputs;
  RLX_ASSIGN_OR_RETURN(LoadedModel m, onnx_import::parse_model(bytes, name, folder, options, &import_outputs));
  if (!import_outputs.empty()) return string_output_error(name, import_outputs);
  return m;
}

}  // namespace rlx::onnx

namespace rlx::onnx_import {

Expected<LoadedModel> parse_model(std::string_view bytes, const std::string& name, const std::string& folder,
                                  const onnx::LoadOptions& options, std::map<std::string, onnx::Value>* import_outputs) {
  using onnx::LoadOptions;
  ::onnx::ModelProto mp;
  RLX_TRY(parse_model_proto(bytes, name, mp));
  if (!mp.has_graph()) return error(ErrorCode::format_error, name, ": the model has no graph");
  int64_t opset = -1, training_opset = 0;
  for (const auto& o : mp.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
    if (o.domain() == kTrainingDomain) training_opset = o.version();
  }
  bool default_imported = true;
  if (opset < 0 && training_opset > 0) {
    opset = kMaxOpset;  // only the training domain: a default-domain node is refused
    default_imported = false;
  }
  if (opset < 0) {
    if (mp.ir_version() >= 3 || mp.opset_import_size() > 0)
      return error(ErrorCode::format_error, name, ": the model imports no version of the default ONNX opset");
    opset = 1;
  }
  if (opset < 1 || opset > onnx_import::kMaxOpset)
    return error(ErrorCode::unsupported, name, ": opset ", opset, " is not supported (rlx imports opsets 7 to ", onnx_import::kMaxOpset, ")");
  std::set<std::string> consts;
  for (int attempt = 0;; ++attempt) {
    LoadedModel m;
    onnx_import::Importer imp(m.graph, name, options, consts);
    imp.opset = static_cast<int>(opset);
    imp.training_opset = training_opset;
    imp.default_opset_imported = default_imported;
    Status s = imp.import_graph(mp.graph(), folder);
    if (s.is_ok()) {
      RLX_TRY(verify_graph(m.graph).with_context(name));
      m.format = "onnx";
      m.metadata["ir_version"] = std::to_string(mp.ir_version());
      m.metadata["opset"] = std::to_string(opset);
      if (!mp.producer_name().empty()) m.metadata["producer"] = mp.producer_name() + " " + mp.producer_version();
      if (!mp.graph().name().empty()) m.metadata["graph"] = mp.graph().name();
      for (const auto& p : mp.metadata_props()) m.metadata["meta." + p.key()] = p.value();
      for (const std::string& c : consts) m.metadata["folded_input." + c] = "yes";
      for (const auto& [k, v] : imp.output_structure()) m.metadata[k] = v;
      *import_outputs = imp.import_outputs();
      return m;
    }
    bool grew = false;
    for (const std::string& n : imp.needed_inputs()) grew |= consts.insert(n).second;
    if (!grew || attempt > 64) return s;
  }
}

namespace {

Expected<std::string> read_model_bytes(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return error(ErrorCode::io_error, "no such file: ", path);
  if (!S_ISREG(st.st_mode)) return error(ErrorCode::io_error, path, ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > static_cast<uint64_t>(INT_MAX))
    return error(ErrorCode::format_error, path, ": ", st.st_size, " bytes is over protobuf's 2 GiB limit");
  return read_regular_file(path, static_cast<uint64_t>(INT_MAX));
}

}  // namespace

Expected<LoadedModel> load_model_file(const std::string& path, const onnx::LoadOptions& options,
                                      std::map<std::string, onnx::Value>* import_outputs) {
  RLX_ASSIGN_OR_RETURN(std::string bytes, read_model_bytes(path));
  std::string folder = path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/'));
  if (folder.empty()) folder = "/";
  return parse_model(bytes, path, folder, options, import_outputs);
}

}  // namespace rlx::onnx_import

namespace rlx::onnx {

Expected<Signature> read_signature(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(path, static_cast<uint64_t>(INT_MAX)));
  ::onnx::ModelProto mp;
  RLX_TRY(parse_model_proto(bytes, path, mp));
  std::set<std::string> inits;
  for (const auto& t : mp.graph().initializer()) inits.insert(t.name());
  Signature s;
  for (const auto& v : mp.graph().input()) {
    if (inits.count(v.name())) continue;
    RLX_ASSIGN_OR_RETURN(onnx::ValueKind k, onnx_import::value_kind_of(v.type(), cat(path, ": graph input '", v.name(), "'")));
    s.inputs.push_back(v.name());
    s.input_kinds.push_back(k);
  }
  for (const auto& v : mp.graph().output()) {
    RLX_ASSIGN_OR_RETURN(onnx::ValueKind k, onnx_import::value_kind_of(v.type(), cat(path, ": graph output '", v.name(), "'")));
    s.outputs.push_back(v.name());
    s.output_kinds.push_back(k);
  }
  return s;
}

Expected<LoadedModel> load(const std::string& path, const LoadOptions& options) {
  std::map<std::string, Value> import_outputs;
  RLX_ASSIGN_OR_RETURN(LoadedModel m, onnx_import::load_model_file(path, options, &import_outputs));
  if (!import_outputs.empty()) return string_output_error(path, import_outputs);
  return m;
}

}  // namespace rlx::onnx

namespace rlx::io {

Expected<LoadedModel> load_onnx_model(const std::string& path) { return onnx::load(path); }

}  // namespace rlx::io

// ONNX importer internals: the per-node context that op mappings are written against, and the
// table of op mappings (one file per op family registers its rows).
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/graph.h"
#include "rlx/onnx.h"
#include "rlx/op_builder.h"

namespace rlx::onnx_import {
// The newest default-domain opset imported: every op whose inputs, attributes or meaning changed
// up to it is mapped at the version the model declares (docs/onnx.md, "Opsets").
inline constexpr int64_t kMaxOpset = 23;

// Parses a serialized ModelProto (at most protobuf's 2 GiB) with protobuf's recursion limit at
// 64 messages, so that nested subgraphs cannot overflow the stack; `name` is used in messages.
Status parse_model_proto(std::string_view bytes, const std::string& name, ::onnx::ModelProto& mp);
// ONNX TensorProto.DataType to rlx; nullopt for types rlx has no dtype for (string, c128...).
std::optional<DType> dtype_from_onnx(int32_t t);
int32_t dtype_to_onnx(DType t);
std::string onnx_dtype_name(int32_t t);

// Decodes a TensorProto (raw_data, typed fields or external data under `folder`).
// `what` names the file and tensor in messages.
Expected<Tensor> tensor_from_proto(const ::onnx::TensorProto& t, const std::string& folder, const std::string& what);

// A TensorProto of STRING data as a Value (Kind::strings); `what` names it in errors.
Expected<onnx::Value> strings_from_proto(const ::onnx::TensorProto& t, const std::string& what);

// A string tensor during import: rlx has no string dtype, so strings are values of the import
// (given graph inputs, or computed from constants by the string ops) and never graph values.
struct StringTensor {
  Sizes sizes;
  std::vector<std::string> values;  // row-major, UTF-8
};

// One ONNX value during import: a graph value, a constant known at import time, or both.
struct OValue {
  ValueId id = kNoValue;
  std::optional<Tensor> konst;
  // An integer shape value (rank 0 or 1) with symbolic entries, as Shape gives for symbolic
  // dims; shape ops (Gather, Unsqueeze, Concat, Slice, Cast) propagate it, and Reshape,
  // Expand and Range consume it. It has no graph value.
  std::optional<std::vector<Dim>> sym;
  TensorType type;  // valid when id != kNoValue or konst or sym is set
  bool initializer = false;  // an initializer of the file: becomes a named weight when used as data
  // A sequence of tensors whose length and elements are known at import (SequenceConstruct,
  // SplitToSequence, ... compile to list operations here); `type.dtype` is the elements'.
  // It has no graph value: the Sequence ops read it, anything else refuses it.
  std::shared_ptr<const std::vector<OValue>> seq;
  // An empty optional (Optional without an input, or a graph input given Value::none);
  // `type.dtype` is the element dtype. An optional holding a value is that value.
  bool none = false;
  // A string tensor (then nothing else is set but `type.shape`).
  std::shared_ptr<const StringTensor> strs;
};

// What a declared graph input or output type holds; `what` names it in errors.
Expected<onnx::ValueKind> value_kind_of(const ::onnx::TypeProto& t, const std::string& what);
// Metadata keys under which parse() records graph outputs that are not single tensors:
// "onnx.output_sequence.NAME" = element count (the graph outputs NAME[0] ..), and
// "onnx.output_none.NAME" = the empty optional's element dtype.
inline constexpr const char* kSequenceOutputKey = "onnx.output_sequence.";
inline constexpr const char* kNoneOutputKey = "onnx.output_none.";
// The graph input or output naming element k of sequence `name`.
inline std::string element_name(const std::string& name, size_t k) { return cat(name, "[", k, "]"); }
// Metadata key of a graph output computed at import (a string tensor): no graph output has
// its name; onnx::load_and_run returns its value.
inline constexpr const char* kImportOutputKey = "onnx.output_at_import.";

// parse() that also hands back the outputs computed entirely at import (string tensors),
// which plain parse() refuses since its caller would not see them.
Expected<LoadedModel> parse_model(std::string_view bytes, const std::string& name, const std::string& folder,
                                  const onnx::LoadOptions& options, std::map<std::string, onnx::Value>* import_outputs);
// The same from a file (external data next to it).
Expected<LoadedModel> load_model_file(const std::string& path, const onnx::LoadOptions& options,
                                      std::map<std::string, onnx::Value>* import_outputs);

class Importer;
using MapFn = std::function<Status(Importer&)>;

struct OpMapping {
  MapFn fn;
  // The op's outputs are a pure function of its inputs (so constant inputs fold).
  bool foldable = true;
};

// The table: ONNX op type (default domain) to mapping. Each family file adds its rows.
using OpTable = std::map<std::string, OpMapping>;
void register_elementwise_ops(OpTable& t);
void register_reduce_ops(OpTable& t);
void register_movement_ops(OpTable& t);
void register_nn_ops(OpTable& t);
void register_misc_ops(OpTable& t);
void register_resize_ops(OpTable& t);
void register_rnn_ops(OpTable& t);
void register_attention_ops(OpTable& t);
void register_control_ops(OpTable& t);
void register_sequence_ops(OpTable& t);
void register_data_dependent_ops(OpTable& t);
void register_string_ops(OpTable& t);
// The ai.onnx.preview.training domain's ops (its own table: their names are not default-domain ops).
inline constexpr const char* kTrainingDomain = "ai.onnx.preview.training";
void register_training_ops(OpTable& t);
const OpTable& training_op_table();
// Cast / CastLike where the input or the target is a string tensor (onnx_ops_string.cpp).
Status map_cast_strings(Importer& m, bool to_string, DType to);
// Ops over symbolic shape values; returns false (and does nothing) if `op` is not one.
bool is_symbolic_op(const std::string& op);
Status map_symbolic(Importer& m);
const OpTable& op_table();

// The per-node view an op mapping works with. Inputs are read through in()/konst(); outputs
// are set with out(). Graph nodes are emitted through o() (an OpBuilder over the current
// target graph: the model's graph, or a scratch graph while folding constants).
class Importer {
 public:
  // `const_inputs`: graph inputs whose values (from opts.input_values) are folded in.
  Importer(Graph& g, std::string file, const onnx::LoadOptions& opts, std::set<std::string> const_inputs);

  // node being imported
  const ::onnx::NodeProto* node = nullptr;
  int node_index = -1;
  int opset = 17;
  int64_t training_opset = 0;           // the ai.onnx.preview.training version imported, 0 if none
  bool default_opset_imported = true;   // false: only the training domain is imported

  // inputs
  int num_inputs() const;
  // Input i is present (not past the end, not an empty name).
  bool has(int i) const;
  // Marks input i as deliberately unread: every present input must be read (in, konst, ints,
  // floats, dims_in, type) or ignored with a reason at the call site, else the node is refused.
  void ignore_input(int i) const;
  // Input i as a graph value (constants are materialized as constant/param nodes).
  Expected<ValueId> in(int i);
  // Input i's value, which must be known at import time.
  Expected<Tensor> konst(int i);
  bool is_konst(int i) const;
  // Input i is not known at import, but it is computed from graph inputs given as values that
  // this import has not folded in yet: the import's retry (with them folded) will know it.
  // Records them for the retry.
  bool foldable_from_given(int i);
  // Input i is a shape value with symbolic entries.
  bool is_sym(int i) const;
  // Input i's entries as dims: a constant integer tensor or a symbolic shape value.
  Expected<std::vector<Dim>> dims_in(int i);
  const TensorType& type(int i) const;
  // Input i as integers (a constant 0-D or 1-D tensor).
  Expected<std::vector<int64_t>> ints(int i);
  Expected<std::vector<double>> floats(int i);

  // attributes: an attribute of another type than the accessor reads is an error naming the
  // node and the attribute, reported when the node's mapping returns (attr_error_)
  bool has_attr(const std::string& name) const;
  const ::onnx::AttributeProto* attr(const std::string& name) const;
  int64_t ai(const std::string& name, int64_t def) const;
  double af(const std::string& name, double def) const;
  std::string as(const std::string& name, const std::string& def) const;
  std::vector<int64_t> aints(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<double> afloats(const std::string& name, std::vector<double> def = {}) const;
  Expected<Tensor> atensor(const std::string& name) const;
  // Every attribute must be one of `known` (others are errors naming the node and attribute).
  Status only_attrs(std::initializer_list<const char*> known) const;

  // outputs
  int num_outputs() const;
  bool wants(int i) const;  // output i exists and has a name
  Status out(int i, ValueId v);
  Status out_const(int i, Tensor t);
  // A shape value: a constant when every entry is static, else symbolic (rank 0 if scalar).
  Status out_dims(int i, std::vector<Dim> dims, bool scalar);
  // A graph value of shape [d] for symbolic dim d (taken from a graph input that has it).
  Expected<ValueId> value_with_dim(const Dim& d);

  // emit
  OpBuilder& o() { return *ob_; }
  ValueId c(Tensor t) { return o().constant(std::move(t)); }
  // Scalar constant of a given dtype.
  ValueId cs(double v, DType dt) { return o().scalar(v, dt); }
  Status ok() const { return ob_->status(); }

  // An error about the current node: "FILE: node 'name' (#i, Op): ...".
  template <class... Args>
  Status fail(ErrorCode code, const Args&... args) const {
    return error(code, where(), ": ", args...);
  }
  std::string where() const;

  // Import everything: called by load/parse.
  Status import_graph(const ::onnx::GraphProto& gp, const std::string& folder);
  // Imports a subgraph (an If branch, a Loop or Scan body) inline, once per call: its inputs
  // bound to `inputs`, outer-scope values visible, its names dropped again afterwards (so a
  // body unrolled N times is imported N times). Returns its outputs. The current node's state
  // is kept across the call.
  Expected<std::vector<OValue>> run_subgraph(const ::onnx::GraphProto& g, std::vector<OValue> inputs, const std::string& what);
  // The value of input i (graph value, constant or symbolic shape) as the subgraph binding.
  Expected<OValue> input_value(int i);
  // Sets output i to a value a subgraph produced.
  Status out_value(int i, OValue v);
  // Imports `g` (a Loop body run at run time) as a graph of its own, returned in text IR: its
  // inputs typed `types`; each outer-scope value it reads, and each large constant, becomes a
  // further input of the body fed by a value of the enclosing graph (appended to `outside`,
  // in the body's input order). Its outputs are the body's.
  Expected<std::string> import_loop_body(const ::onnx::GraphProto& g, const std::vector<TensorType>& types,
                                         std::vector<ValueId>& outside);
  // Input i, which must be a sequence: its elements.
  Expected<std::vector<OValue>> seq_in(int i);
  // Sets output i to a sequence of `elems` (of dtype `dt`).
  Status out_seq(int i, std::vector<OValue> elems, DType dt);
  // Input i is a string tensor.
  bool is_strings(int i) const;
  // Input i, which must be a string tensor.
  Expected<std::shared_ptr<const StringTensor>> strings_in(int i);
  // Sets output i to a string tensor.
  Status out_strings(int i, StringTensor t);
  // A subgraph result as a graph value.
  Expected<ValueId> value_id(OValue& v, const std::string& name) { return materialize(v, name); }

 private:
  // The attribute `name` when it holds `type` (or declares no type, as some old exporters
  // write); null, recording attr_error_, when it holds another.
  const ::onnx::AttributeProto* typed_attr(const std::string& name, int type, const char* what) const;
  mutable Status attr_error_;
  // The attributes the current node's mapping looked at (see run_mapping).
  mutable std::set<std::string> attrs_read_;
  // The inputs it read (see run_mapping).
  mutable std::set<int> inputs_read_;
  // Nodes imported from subgraphs so far, against kMaxInlinedNodes.
  static constexpr int64_t kMaxInlinedNodes = int64_t{1} << 18;
  int64_t inlined_nodes_ = 0;
  friend struct FoldScope;
  Status import_node(const ::onnx::NodeProto& n, int index);
  Status run_mapping(const OpMapping& m);
  Status fold_node(const OpMapping& m);
  Expected<ValueId> materialize(OValue& v, const std::string& name);

  Graph& model_;
  std::string file_;
  const onnx::LoadOptions& opts_;
  std::map<std::string, OValue> values_;
  // current target: the model graph or a scratch graph for folding
  Graph* target_;
  std::unique_ptr<GraphBuilder> gb_;
  std::unique_ptr<OpBuilder> ob_;
  bool folding_ = false;
  std::vector<OValue> fold_inputs_;   // while folding: the node's inputs in the scratch graph
  std::vector<std::optional<OValue>> pending_outputs_;
  std::map<std::string, int> weight_uses_;
  std::set<std::string> const_inputs_;
  std::set<std::string> needed_inputs_;
  std::set<std::string> graph_input_names_;
  std::map<std::string, const ::onnx::NodeProto*> producer_;
  std::string folder_;

  void note_needed(const std::string& value_name);

 public:
  // Graph inputs with values in opts.input_values that a failed konst() depended on.
  const std::set<std::string>& needed_inputs() const { return needed_inputs_; }
  // After import_graph: the outputs that are sequences or empty optionals (kSequenceOutputKey).
  const std::map<std::string, std::string>& output_structure() const { return output_structure_; }
  // After import_graph: the outputs computed entirely at import (string tensors), by name.
  const std::map<std::string, onnx::Value>& import_outputs() const { return import_outputs_; }

 private:
  std::map<std::string, std::string> output_structure_;
  std::map<std::string, onnx::Value> import_outputs_;
  Status import_structured_input(const std::string& name, const ::onnx::TypeProto& type, const onnx::Value& given);
  // A loop body's importer: the enclosing one, and the enclosing graph's values fed to the
  // body's extra inputs (import_loop_body).
  Importer* parent_ = nullptr;
  std::vector<ValueId> outside_;
  // Makes an enclosing scope's value `name` visible in this loop body; false if none has it.
  Expected<bool> capture_outer(const std::string& name);
  Status add_graph_output(OValue& v, const std::string& name);
};

// Helpers shared by the op families.
Expected<std::vector<int64_t>> tensor_ints(const Tensor& t, const std::string& what);
// Normalizes axis against rank (error names the node).
Expected<int> axis_of(Importer& m, int64_t axis, int rank);
// The positions Compress keeps of a condition known only at run time, and Range of run-time
// values (onnx_ops_data_dependent.cpp).
Expected<ValueId> compress_positions(Importer& m);
Status map_range_computed(Importer& m);
// TopK with a k known only at run time (or too large for the unrolled rounds): the host's top_k.
Status map_topk_computed(Importer& m, ValueId x);
std::vector<int64_t> static_dims(const TensorType& t);  // -1 for non-static dims

}  // namespace rlx::onnx_import

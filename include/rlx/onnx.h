// rlx/onnx.h: importing ONNX models (ModelProto, opsets 7 to 23) into the graph level, and
// reading/writing TensorProto files as in ONNX's test_data_set folders.
//
// Security promise (what the importer guarantees on untrusted input)
// ------------------------------------------------------------------
// load() and parse() treat every byte of a .onnx file, of its external-data files and of
// TensorProto (.pb) files as untrusted. On any input they:
//  - never crash, abort, assert, throw, hang or read outside the file: every failure is an
//    rlx::Status (format_error for a malformed file, unsupported for an op, attribute or dtype
//    rlx does not import, io_error when the file system fails) naming the file, and the node
//    (name, index and op type) or the tensor at fault;
//  - refuse files over 2 GiB (protobuf's own limit) before parsing, and parse with protobuf's
//    recursion limit (so nested subgraphs cannot exhaust the stack);
//  - check every tensor's dims (rank at most 64, each dim >= 0, element count and byte size
//    computed with checked arithmetic, at most 2^40 elements) against the bytes actually
//    present (raw_data length, typed field length, or the external file's size) before
//    allocating, so memory is bounded by the file's size;
//  - read external data only from regular files inside the model's folder: the location must
//    be a relative path with no ".." component, no NUL byte and no absolute prefix, and after
//    resolving symbolic links it must still lie inside the folder; offset and length must lie
//    inside that file;
//  - accept a graph only if every node input names a graph input, an initializer or an output
//    of an earlier node (so cycles and dangling references are errors), every name is defined
//    once, and each imported node passes rlx's type inference; the result passes the verifier.
// What it does not promise: tensor values are arbitrary (NaN, huge integers); a model that
// imports can still be too large to compile or run in the memory at hand.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/model_io.h"
#include "rlx/tensor.h"

namespace rlx::onnx {

// What a graph input or output holds, from its declared ONNX type.
enum class ValueKind { tensor, sequence, optional_tensor, optional_sequence };

// A value at an ONNX graph's boundary, as test_data_set files hold them (TensorProto,
// SequenceProto, OptionalProto): a tensor, a sequence of tensors, nothing (an empty
// optional), or a string tensor (rlx has no string dtype: string tensors exist only at
// import, see LoadOptions::structured_inputs). An optional that holds a value is that value.
struct Value {
  enum class Kind { tensor, sequence, none, strings };
  Kind kind = Kind::tensor;
  Tensor tensor;                 // Kind::tensor
  std::vector<Tensor> elements;  // Kind::sequence
  DType elem_dtype = DType::f32; // the elements' (or the empty optional's) dtype
  Sizes string_sizes;                // Kind::strings: the shape
  std::vector<std::string> strings;  // Kind::strings: the elements, row-major (UTF-8)

  static Value of(Tensor t);
  static Value sequence(std::vector<Tensor> elements, DType elem_dtype);
  static Value none(DType elem_dtype);
  static Value of_strings(Sizes sizes, std::vector<std::string> strings);
  // "tensor f32[2, 3]", "sequence of 3 f32", "none", "string[2, 3]".
  std::string to_string() const;
};

struct LoadOptions {
  // Sizes for symbolic input dimensions (ONNX dim_param names, or "<input>_dim<k>" for
  // unnamed dynamic dims). Bound dims become static, so shape arithmetic folds at import.
  DimBindings dims;
  // Values for graph inputs the importer may use where an op needs a constant (a Reshape's
  // shape, Slice bounds, TopK's k...): such an input is folded into the graph and no longer
  // appears among the graph's inputs. Inputs used as data stay inputs.
  std::map<std::string, Tensor> input_values;
  // Bind every symbolic dim of an input given in input_values to that value's size.
  bool bind_dims_from_values = true;
  // Sequence and optional graph inputs, by name. rlx compiles a graph for one structure of
  // them: a sequence of n tensors becomes the graph inputs "NAME[0]" .. "NAME[n-1]", typed as
  // the given elements (their values are fed at run time, not folded); an empty optional
  // (Value::none) makes OptionalHasElement false at import and OptionalGetElement an error. An
  // optional input holding a tensor is given in input_values like a tensor input. A string
  // tensor input (Value::of_strings) is a constant of the import: the string ops (Cast and
  // CastLike to and from strings, StringNormalizer, Identity) compute at import, and a graph
  // input of strings without a value is refused.
  std::map<std::string, Value> structured_inputs;
};

// Loads an .onnx file; external data is looked up next to it. Graph inputs and outputs keep
// their ONNX names; initializers become weights named as in the file.
Expected<LoadedModel> load(const std::string& path, const LoadOptions& options = {});
// Imports a serialized ModelProto held in memory. `folder` is where external data lives; an
// empty folder refuses external data. `name` is used in messages.
Expected<LoadedModel> parse(std::string_view bytes, const std::string& name, const std::string& folder,
                            const LoadOptions& options = {});

// The names of a model's graph inputs (initializers excluded) and outputs, in order, as
// test_data_set folders number them (input_0.pb is the first input).
struct Signature {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<ValueKind> input_kinds;  // per input: what its declared type holds
  std::vector<ValueKind> output_kinds;
};
Expected<Signature> read_signature(const std::string& path);

// Imports `path` with `inputs` (by graph input name) available where ops need constants,
// binds symbolic dims from the inputs' sizes, compiles for `device` and runs once. Every
// graph input left after import must be in `inputs`. `outputs` are the compiled graph's, in
// its order (a sequence output of n elements is n of them, "NAME[0]" ..; an empty optional
// none); `values` are the ONNX graph's outputs, one per declared output, in its order.
struct RunResult {
  LoadedModel model;
  std::vector<std::string> output_names;
  std::vector<Tensor> outputs;
  std::vector<Value> values;
};
Expected<RunResult> load_and_run(const std::string& path, const std::map<std::string, Value>& inputs,
                                 const std::string& device = "cpu");
Expected<RunResult> load_and_run(const std::string& path, const std::map<std::string, Tensor>& inputs,
                                 const std::string& device = "cpu");

// A TensorProto file (input_0.pb, output_0.pb); `name_out` receives the tensor's name.
Expected<Tensor> read_tensor_file(const std::string& path, std::string* name_out = nullptr);
Expected<Tensor> parse_tensor(std::string_view bytes, const std::string& what, std::string* name_out = nullptr);
// Writes a TensorProto file with raw_data.
Status write_tensor_file(const std::string& path, const Tensor& t, const std::string& name = "");
// A test_data_set file holding a value of the declared `kind`: a TensorProto, a SequenceProto
// of tensors, or an OptionalProto of either (an empty one reads as Value::none).
Expected<Value> read_value_file(const std::string& path, ValueKind kind);
// The same from bytes in memory; `what` names them in messages.
Expected<Value> parse_value(std::string_view bytes, const std::string& what, ValueKind kind);
// Writes `v` as the message `kind` declares (TensorProto, SequenceProto or OptionalProto).
Status write_value_file(const std::string& path, const Value& v, ValueKind kind, const std::string& name = "");

}  // namespace rlx::onnx

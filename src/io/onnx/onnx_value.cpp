// Values at an ONNX graph's boundary beyond tensors: sequences and optionals (onnx::Value), the
// SequenceProto and OptionalProto files that hold them in test_data_set folders, and the kind
// a graph input's or output's declared type gives.
#include <onnx/onnx-data_pb.h>

#include <climits>
#include <fstream>

#include <google/protobuf/io/coded_stream.h>

#include "rlx/mapped_file.h"
#include "onnx_internal.h"

namespace rlx::onnx {

Value Value::of(Tensor t) {
  Value v;
  v.kind = Kind::tensor;
  v.elem_dtype = t.dtype();
  v.tensor = std::move(t);
  return v;
}

Value Value::sequence(std::vector<Tensor> elements, DType elem_dtype) {
  Value v;
  v.kind = Kind::sequence;
  v.elements = std::move(elements);
  v.elem_dtype = elem_dtype;
  return v;
}

Value Value::none(DType elem_dtype) {
  Value v;
  v.kind = Kind::none;
  v.elem_dtype = elem_dtype;
  return v;
}

Value Value::of_strings(Sizes sizes, std::vector<std::string> strings) {
  Value v;
  v.kind = Kind::strings;
  v.string_sizes = std::move(sizes);
  v.strings = std::move(strings);
  return v;
}

std::string Value::to_string() const {
  switch (kind) {
    case Kind::tensor: return "tensor " + tensor.type().to_string();
    case Kind::sequence: return cat("sequence of ", elements.size(), " ", dtype_name(elem_dtype));
    case Kind::none: return "none";
    case Kind::strings: return "string" + sizes_to_string(string_sizes);
  }
  return "?";
}

namespace {

template <class Message>
Status parse_message(std::string_view bytes, const std::string& what, const char* type, Message& m) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return error(ErrorCode::format_error, what, ": larger than protobuf's 2 GiB limit");
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  in.SetRecursionLimit(64);
  if (!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return error(ErrorCode::format_error, what, ": not a valid ", type, " (truncated or malformed protobuf)");
  return Status::ok();
}

Expected<Value> sequence_from_proto(const ::onnx::SequenceProto& s, const std::string& what) {
  if (s.elem_type() != ::onnx::SequenceProto::TENSOR && s.elem_type() != ::onnx::SequenceProto::UNDEFINED)
    return error(ErrorCode::unsupported, what, ": a sequence of ",
                 ::onnx::SequenceProto::DataType_Name(static_cast<::onnx::SequenceProto::DataType>(s.elem_type())),
                 " (rlx reads sequences of tensors)");
  if (s.sparse_tensor_values_size() || s.sequence_values_size() || s.map_values_size() || s.optional_values_size())
    return error(ErrorCode::unsupported, what, ": a sequence holding other values than dense tensors");
  std::vector<Tensor> elems;
  for (int i = 0; i < s.tensor_values_size(); ++i) {
    RLX_ASSIGN_OR_RETURN(Tensor t, onnx_import::tensor_from_proto(s.tensor_values(i), "", cat(what, ": element ", i)));
    if (!elems.empty() && t.dtype() != elems[0].dtype())
      return error(ErrorCode::dtype_error, what, ": element ", i, " is ", dtype_name(t.dtype()), ", element 0 ",
                   dtype_name(elems[0].dtype()));
    elems.push_back(std::move(t));
  }
  const DType dt = elems.empty() ? DType::f32 : elems[0].dtype();
  return Value::sequence(std::move(elems), dt);
}

Status tensor_to_proto(const Tensor& t, ::onnx::TensorProto* p, const std::string& what) {
  const int32_t dt = onnx_import::dtype_to_onnx(t.dtype());
  if (dt == ::onnx::TensorProto::UNDEFINED)
    return error(ErrorCode::unsupported, what, ": ONNX has no data type for ", dtype_name(t.dtype()));
  p->set_data_type(dt);
  for (int64_t d : t.sizes()) p->add_dims(d);
  p->set_raw_data(std::string(reinterpret_cast<const char*>(t.bytes()), t.nbytes()));
  return Status::ok();
}

Status sequence_to_proto(const Value& v, ::onnx::SequenceProto& s, const std::string& what) {
  if (v.kind != Value::Kind::sequence) return error(ErrorCode::invalid_argument, what, ": ", v.to_string(), " is not a sequence");
  s.set_elem_type(::onnx::SequenceProto::TENSOR);
  for (const Tensor& t : v.elements) RLX_TRY(tensor_to_proto(t, s.add_tensor_values(), what));
  return Status::ok();
}

}  // namespace

Expected<Value> read_value_file(const std::string& path, ValueKind kind) {
  RLX_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(path, static_cast<uint64_t>(INT_MAX)));
  return parse_value(bytes, path, kind);
}

Expected<Value> parse_value(std::string_view bytes, const std::string& path, ValueKind kind) {
  if (kind == ValueKind::tensor) {
    ::onnx::TensorProto t;
    RLX_TRY(parse_message(bytes, path, "TensorProto", t));
    if (t.data_type() == ::onnx::TensorProto::STRING) return onnx_import::strings_from_proto(t, path);
    RLX_ASSIGN_OR_RETURN(Tensor x, onnx_import::tensor_from_proto(t, "", path));
    return Value::of(std::move(x));
  }
  if (kind == ValueKind::sequence) {
    ::onnx::SequenceProto s;
    RLX_TRY(parse_message(bytes, path, "SequenceProto", s));
    return sequence_from_proto(s, path);
  }
  ::onnx::OptionalProto o;
  RLX_TRY(parse_message(bytes, path, "OptionalProto", o));
  switch (o.elem_type()) {
    case ::onnx::OptionalProto::UNDEFINED: return Value::none(DType::f32);
    case ::onnx::OptionalProto::TENSOR: {
      if (kind != ValueKind::optional_tensor)
        return error(ErrorCode::dtype_error, path, ": the optional holds a tensor, the model declares a sequence");
      RLX_ASSIGN_OR_RETURN(Tensor t, onnx_import::tensor_from_proto(o.tensor_value(), "", path));
      return Value::of(std::move(t));
    }
    case ::onnx::OptionalProto::SEQUENCE:
      if (kind != ValueKind::optional_sequence)
        return error(ErrorCode::dtype_error, path, ": the optional holds a sequence, the model declares a tensor");
      return sequence_from_proto(o.sequence_value(), path);
    default:
      return error(ErrorCode::unsupported, path, ": an optional holding ",
                   ::onnx::OptionalProto::DataType_Name(static_cast<::onnx::OptionalProto::DataType>(o.elem_type())),
                   " (rlx reads optional tensors and sequences)");
  }
}

Status write_value_file(const std::string& path, const Value& v, ValueKind kind, const std::string& name) {
  if (kind == ValueKind::tensor && v.kind == Value::Kind::tensor) return write_tensor_file(path, v.tensor, name);
  if (kind == ValueKind::tensor && v.kind != Value::Kind::strings)
    return error(ErrorCode::invalid_argument, path, ": ", v.to_string(), " is not a tensor");
  std::string bytes;
  if (kind == ValueKind::tensor) {
    ::onnx::TensorProto p;
    p.set_name(name);
    p.set_data_type(::onnx::TensorProto::STRING);
    for (int64_t d : v.string_sizes) p.add_dims(d);
    for (const std::string& e : v.strings) p.add_string_data(e);
    bytes = p.SerializeAsString();
  } else if (kind == ValueKind::sequence) {
    ::onnx::SequenceProto s;
    s.set_name(name);
    RLX_TRY(sequence_to_proto(v, s, path));
    bytes = s.SerializeAsString();
  } else {
    ::onnx::OptionalProto o;
    o.set_name(name);
    if (v.kind == Value::Kind::tensor) {
      o.set_elem_type(::onnx::OptionalProto::TENSOR);
      RLX_TRY(tensor_to_proto(v.tensor, o.mutable_tensor_value(), path));
    } else if (v.kind == Value::Kind::sequence) {
      o.set_elem_type(::onnx::OptionalProto::SEQUENCE);
      RLX_TRY(sequence_to_proto(v, *o.mutable_sequence_value(), path));
    }
    bytes = o.SerializeAsString();
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return error(ErrorCode::io_error, "cannot write ", path);
  return Status::ok();
}

}  // namespace rlx::onnx

namespace rlx::onnx_import {

Expected<onnx::Value> strings_from_proto(const ::onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL)
    return error(ErrorCode::unsupported, what, ": a string tensor with external data");
  if (t.dims_size() > 64) return error(ErrorCode::format_error, what, ": rank over 64");
  Sizes sizes;
  for (int64_t d : t.dims()) {
    if (d < 0) return error(ErrorCode::format_error, what, ": negative dimension ", d);
    sizes.push_back(d);
  }
  auto n = checked_numel(sizes);
  if (!n || *n != t.string_data_size())
    return error(ErrorCode::format_error, what, ": dims ", sizes_to_string(sizes), " for ", t.string_data_size(), " strings");
  return onnx::Value::of_strings(std::move(sizes), std::vector<std::string>(t.string_data().begin(), t.string_data().end()));
}

Expected<onnx::ValueKind> value_kind_of(const ::onnx::TypeProto& t, const std::string& what) {
  // no type at all (old exporters leave outputs untyped): a tensor, as before types were checked
  if (t.value_case() == ::onnx::TypeProto::VALUE_NOT_SET) return onnx::ValueKind::tensor;
  const bool optional = t.has_optional_type();
  const ::onnx::TypeProto& inner = optional ? t.optional_type().elem_type() : t;
  if (inner.has_tensor_type()) return optional ? onnx::ValueKind::optional_tensor : onnx::ValueKind::tensor;
  if (inner.has_sequence_type()) {
    if (!inner.sequence_type().elem_type().has_tensor_type())
      return error(ErrorCode::unsupported, what, " is a sequence of other values than tensors");
    return optional ? onnx::ValueKind::optional_sequence : onnx::ValueKind::sequence;
  }
  return error(ErrorCode::unsupported, what, " is neither a tensor, a sequence of tensors nor an optional of them "
               "(maps and sparse tensors are not supported)");
}

}  // namespace rlx::onnx_import

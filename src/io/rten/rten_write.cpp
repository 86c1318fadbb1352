// Writing .rten files (version 2) from ONNX models: initializers and Constant nodes become
// constant nodes whose data lies in the tensor data segment (each tensor 64-byte aligned),
// graph inputs, outputs and node outputs become value nodes, and each ONNX node an operator
// node with its attribute table (rten_attrs_write.cpp). int64 narrows to rten's Int32.
#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <cstring>
#include <map>

#include "io/onnx/onnx_internal.h"
#include "rlx/mapped_file.h"
#include "rlx/rten.h"
#include "rten_internal.h"

namespace rlx::rten_io {
namespace {

namespace fbs = flatbuffers;
using NodeOffset = fbs::Offset<fb::Node>;

// The file being built: FlatBuffers nodes by index, names to indices, and the tensor data.
class Writer {
 public:
  Writer(const std::string& name, const std::string& folder) : file_(name), folder_(folder) {}

  Expected<std::string> run(const ::onnx::ModelProto& mp) {
    int64_t opset = -1;
    for (const auto& o : mp.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
    // from 13 on, the attribute forms rten keeps (Split, Squeeze, Unsqueeze, Reduce* axes as inputs)
    if (opset < 13)
      return error(ErrorCode::unsupported, file_, ": opset ", opset, "; rlx writes rten files from ONNX opset 13 or later");
    const ::onnx::GraphProto& g = mp.graph();
    for (const auto& t : g.initializer()) RLX_TRY(add_constant(t, t.name()));
    std::vector<uint32_t> inputs, outputs;
    for (const auto& v : g.input()) {
      if (index_.count(v.name())) continue;  // an initializer listed as input (opset < 9 style)
      RLX_ASSIGN_OR_RETURN(uint32_t i, add_value(v, true));
      inputs.push_back(i);
    }
    for (int k = 0; k < g.node_size(); ++k) RLX_TRY(add_node(g.node(k), k));
    for (const auto& v : g.output()) {
      auto it = index_.find(v.name());
      if (it == index_.end()) return error(ErrorCode::format_error, file_, ": graph output '", v.name(), "' is never produced");
      outputs.push_back(it->second);
    }
    auto graph = fb::CreateGraph(b_, b_.CreateVector(nodes_), b_.CreateVector(inputs), b_.CreateVector(outputs));
    b_.Finish(fb::CreateModel(b_, 1, graph));
    // header, model data, padding to 64, tensor data
    const uint64_t model_len = b_.GetSize();
    const uint64_t tensor_off = (kHeaderSize + model_len + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
    std::string out(tensor_off, '\0');
    std::memcpy(out.data(), "RTEN", 4);
    const uint32_t version = 2;
    const uint64_t fields[3] = {kHeaderSize, model_len, tensor_off};
    std::memcpy(out.data() + 4, &version, 4);
    std::memcpy(out.data() + 8, fields, 24);
    std::memcpy(out.data() + kHeaderSize, b_.GetBufferPointer(), model_len);
    out += data_;
    return out;
  }

 private:
  uint32_t push(NodeOffset n, const std::string& name) {
    const uint32_t i = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(n);
    index_[name] = i;
    return i;
  }

  // A constant: its data appended to the tensor segment at a 64-byte boundary.
  Status add_constant(const ::onnx::TensorProto& t, const std::string& name) {
    if (index_.count(name)) return error(ErrorCode::format_error, file_, ": '", name, "' is defined twice");
    const std::string what = cat(file_, ": tensor '", name, "'");
    RLX_ASSIGN_OR_RETURN(Tensor v, onnx_import::tensor_from_proto(t, folder_, what));
    fb::ConstantDataType dt;
    std::string bytes;
    switch (v.dtype()) {
      case DType::f32: dt = fb::ConstantDataType::Float32; bytes.assign(reinterpret_cast<const char*>(v.bytes()), v.nbytes()); break;
      case DType::i8: dt = fb::ConstantDataType::Int8; bytes.assign(reinterpret_cast<const char*>(v.bytes()), v.nbytes()); break;
      case DType::u8: dt = fb::ConstantDataType::UInt8; bytes.assign(reinterpret_cast<const char*>(v.bytes()), v.nbytes()); break;
      case DType::i32: case DType::i64: {
        dt = fb::ConstantDataType::Int32;
        bytes.resize(4 * static_cast<size_t>(v.numel()));
        for (int64_t k = 0; k < v.numel(); ++k) {
          int64_t x = v.dtype() == DType::i64 ? v.data<int64_t>()[k] : v.data<int32_t>()[k];
          // ±2^62 and beyond are "to the end" bounds (Slice's INT64_MAX): any int32 bound past a dim says the same
          if (x >= (int64_t{1} << 62)) x = INT32_MAX;
          if (x <= -(int64_t{1} << 62)) x = INT32_MIN;
          if (x < INT32_MIN || x > INT32_MAX)
            return error(ErrorCode::unsupported, what, ": element ", k, " (", x, ") does not fit rten's int32");
          const int32_t y = static_cast<int32_t>(x);
          std::memcpy(bytes.data() + 4 * k, &y, 4);
        }
        break;
      }
      default: return error(ErrorCode::unsupported, what, ": dtype ", dtype_name(v.dtype()), " has no rten form (f32, i32/i64, i8, u8)");
    }
    std::vector<uint32_t> shape;
    for (int64_t d : v.sizes()) {
      if (d > UINT32_MAX) return error(ErrorCode::unsupported, what, ": dim ", d, " is over rten's 2^32");
      shape.push_back(static_cast<uint32_t>(d));
    }
    data_.resize((data_.size() + kTensorAlign - 1) / kTensorAlign * kTensorAlign, '\0');
    const uint64_t off = data_.size();
    data_ += bytes;
    auto c = fb::CreateConstantNode(b_, b_.CreateVector(shape), fb::ConstantData::NONE, 0, dt, off);
    push(fb::CreateNode(b_, b_.CreateString(name), fb::NodeKind::ConstantNode, c.Union()), name);
    return Status::ok();
  }

  // A graph input or output (with its dtype and dims, symbolic ones by name).
  Expected<uint32_t> add_value(const ::onnx::ValueInfoProto& v, bool input) {
    const std::string where = cat(file_, ": graph ", input ? "input" : "output", " '", v.name(), "'");
    if (index_.count(v.name())) return error(ErrorCode::format_error, where, ": defined twice");
    if (!v.type().has_tensor_type()) return error(ErrorCode::unsupported, where, ": not a tensor");
    const auto& tt = v.type().tensor_type();
    RLX_ASSIGN_OR_RETURN(fb::DataType dt, rten_dtype(tt.elem_type(), where));
    std::vector<fbs::Offset<fb::Dim>> dims;
    if (tt.has_shape()) {
      for (int k = 0; k < tt.shape().dim_size(); ++k) {
        const auto& d = tt.shape().dim(k);
        if (d.has_dim_value() && d.dim_value() >= 0 && d.dim_value() <= UINT32_MAX)
          dims.push_back(fb::CreateDim(b_, static_cast<uint32_t>(d.dim_value())));
        else
          dims.push_back(fb::CreateDim(b_, 0, b_.CreateString(d.dim_param().empty() ? cat(v.name(), "_dim", k) : d.dim_param())));
      }
    }
    fbs::Offset<fbs::Vector<fbs::Offset<fb::Dim>>> dv;
    if (tt.has_shape()) dv = b_.CreateVector(dims);
    auto name = b_.CreateString(v.name());
    return push(fb::CreateNode(b_, name, fb::NodeKind::ValueNode, fb::CreateValueNode(b_, dv, dt).Union()), v.name());
  }

  Status add_node(const ::onnx::NodeProto& n, int k) {
    const std::string where = cat(file_, ": node ", n.name().empty() ? cat("#", k) : cat("'", n.name(), "' (#", k, ")"), " ",
                                  n.op_type());
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      return error(ErrorCode::unsupported, where, ": domain '", n.domain(), "' has no rten form");
    if (n.op_type() == "Constant") {
      if (n.output_size() != 1 || n.attribute_size() != 1 || n.attribute(0).name() != "value")
        return error(ErrorCode::unsupported, where, ": only Constant with a 'value' tensor has an rten form");
      return add_constant(n.attribute(0).t(), n.output(0));
    }
    auto type = operator_type(n.op_type());
    if (!type) return error(ErrorCode::unsupported, where, ": rten has no operator ", n.op_type(), " that rlx writes");
    for (const auto& a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0) return error(ErrorCode::unsupported, where, ": subgraphs have no rten form");
    std::vector<int32_t> ins, outs;
    for (const std::string& i : n.input()) {
      if (i.empty()) {
        ins.push_back(-1);
        continue;
      }
      auto it = index_.find(i);
      if (it == index_.end()) return error(ErrorCode::format_error, where, ": input '", i, "' is not defined before the node");
      ins.push_back(static_cast<int32_t>(it->second));
    }
    for (const std::string& o : n.output()) {
      if (o.empty()) {
        outs.push_back(-1);
        continue;
      }
      if (index_.count(o)) return error(ErrorCode::format_error, where, ": output '", o, "' is defined twice");
      auto v = fb::CreateValueNode(b_);
      outs.push_back(static_cast<int32_t>(push(fb::CreateNode(b_, b_.CreateString(o), fb::NodeKind::ValueNode, v.Union()), o)));
    }
    RLX_ASSIGN_OR_RETURN(FbAttrs at, attrs_from_onnx(n, *type, b_, where));
    auto op = fb::CreateOperatorNode(b_, *type, at.type, at.table, b_.CreateVector(ins), b_.CreateVector(outs));
    const std::string name = n.name().empty() ? cat("rten_op_", k) : n.name();
    nodes_.push_back(fb::CreateNode(b_, b_.CreateString(name), fb::NodeKind::OperatorNode, op.Union()));
    return Status::ok();
  }

  const std::string file_, folder_;
  fbs::FlatBufferBuilder b_;
  std::vector<NodeOffset> nodes_;
  std::map<std::string, uint32_t> index_;  // value and constant names to node indices
  std::string data_;
};

Expected<std::string> write(std::string_view onnx_bytes, const std::string& name, const std::string& folder) {
  ::onnx::ModelProto mp;
  RLX_TRY(onnx_import::parse_model_proto(onnx_bytes, name, mp));
  return Writer(name, folder).run(mp);
}

}  // namespace

}  // namespace rlx::rten_io

namespace rlx::rten {

Expected<std::string> from_onnx(std::string_view onnx_bytes, const std::string& name) {
  return rten_io::write(onnx_bytes, name, "");
}

namespace {

// Through a temporary file renamed over the target: a reader with the old file mapped keeps it.
Status write_bytes(const std::string& path, const std::string& out) {
  return write_file_via_rename(path, [&](std::FILE* f, const std::string& tmp) -> Status {
    if (std::fwrite(out.data(), 1, out.size(), f) != out.size()) return error(ErrorCode::io_error, tmp, ": writing failed");
    return Status::ok();
  });
}

}  // namespace

Status convert_onnx_file(const std::string& onnx_path, const std::string& rten_path) {
  RLX_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(onnx_path, static_cast<uint64_t>(INT_MAX)));
  std::string folder = onnx_path.find('/') == std::string::npos ? "." : onnx_path.substr(0, onnx_path.find_last_of('/'));
  if (folder.empty()) folder = "/";
  RLX_ASSIGN_OR_RETURN(std::string out, rten_io::write(bytes, onnx_path, folder));
  return write_bytes(rten_path, out);
}

Status convert_rten_file(const std::string& rten_path, const std::string& onnx_path) {
  // a .rten file over 2 GiB would not fit the ModelProto the translation carries its weights in
  RLX_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(rten_path, static_cast<uint64_t>(INT_MAX)));
  RLX_ASSIGN_OR_RETURN(std::string out, to_onnx(bytes, rten_path));
  return write_bytes(onnx_path, out);
}


}  // namespace rlx::rten

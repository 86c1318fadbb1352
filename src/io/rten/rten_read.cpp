// Reading .rten files: the version 2 header and its segments (or a version 1 buffer), the
// FlatBuffers verifier, and the translation of the rten graph into an ONNX ModelProto that the
// ONNX importer turns into an rlx graph (so both formats share one op mapping).
#include <bit>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "io/loaders.h"
#include "rlx/checked.h"
#include "rlx/mapped_file.h"
#include "rlx/rten.h"
#include "rten_internal.h"

static_assert(std::endian::native == std::endian::little, "the rten reader assumes a little-endian host, as the format");

namespace rlx::rten_io {
namespace {

uint32_t le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t le64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Where a file's parts lie: the FlatBuffers model buffer and, in version 2, the tensor data
// segment (from tensor_data_offset to the end of the file; constants' data_offset is relative
// to its start).
struct Layout {
  int version = 0;
  std::string_view model;
  std::string_view tensor_data;
};

// Checks the version 2 header (every offset and length against the file size) or recognizes
// a version 1 file (no header: the file is the FlatBuffers buffer).
Expected<Layout> split_file(std::string_view f, const std::string& name) {
  Layout l;
  const uint64_t size = f.size();
  if (size >= 4 && f.substr(0, 4) == "RTEN") {
    if (size < kHeaderSize)
      return error(ErrorCode::format_error, name, ": truncated header: the file has ", size,
                   " bytes, a version 2 header has 32");
    const uint32_t version = le32(f.data() + 4);
    if (version != 2)
      return error(ErrorCode::unsupported, name, ": rten format version ", version, " (rlx reads versions 1 and 2)");
    const uint64_t mo = le64(f.data() + 8), ml = le64(f.data() + 16), to = le64(f.data() + 24);
    if (mo < kHeaderSize || mo > size)
      return error(ErrorCode::format_error, name, ": the model data offset ", mo, " lies outside the file (", size,
                   " bytes, the header's 32 excluded)");
    if (ml > size - mo)
      return error(ErrorCode::format_error, name, ": the model data (", ml, " bytes at offset ", mo,
                   ") runs past the end of the file (", size, " bytes)");
    if (to < kHeaderSize || to > size)
      return error(ErrorCode::format_error, name, ": the tensor data offset ", to, " lies outside the file (", size,
                   " bytes, the header's 32 excluded)");
    if (to % kTensorAlign != 0)
      return error(ErrorCode::format_error, name, ": the tensor data offset ", to,
                   " is not a multiple of 64, as the format aligns tensor data");
    l.version = 2;
    l.model = f.substr(mo, ml);
    l.tensor_data = f.substr(to);
    return l;
  }
  if (size < 8)
    return error(ErrorCode::format_error, name, ": ", size, " bytes is too short for an rten file");
  l.version = 1;
  l.model = f;
  return l;
}

// The verified root of the model buffer. FlatBuffers reads scalars in place, so a buffer that
// does not start 8-byte aligned (a header may put it anywhere) is first copied to `aligned`.
Expected<const fb::Model*> verify_model(const Layout& l, const std::string& name, std::vector<uint64_t>& aligned) {
  std::string_view buf = l.model;
  if (buf.size() >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return error(ErrorCode::format_error, name, ": the model data is ", buf.size(),
                 " bytes, over FlatBuffers' 2 GiB limit");
  const uint8_t* p = reinterpret_cast<const uint8_t*>(buf.data());
  if (reinterpret_cast<uintptr_t>(p) % 8 != 0) {
    aligned.assign((buf.size() + 7) / 8, 0);
    std::memcpy(aligned.data(), buf.data(), buf.size());
    p = reinterpret_cast<const uint8_t*>(aligned.data());
  }
  flatbuffers::Verifier v(p, buf.size(), /*max_depth=*/64, /*max_tables=*/10'000'000);
  // version 1 files carry the identifier RTEN at bytes 4-7; the model data of version 2 does not
  const bool ok = l.version == 1 ? fb::VerifyModelBuffer(v) : v.VerifyBuffer<fb::Model>(nullptr);
  if (!ok) {
    if (l.version == 1)
      return error(ErrorCode::format_error, name,
                   ": not an rten file: it starts with neither the magic RTEN (version 2) nor a valid rten "
                   "FlatBuffers buffer with identifier RTEN (version 1)");
    return error(ErrorCode::format_error, name,
                 ": the model data is not a valid rten FlatBuffers buffer (an offset or length inside it points "
                 "outside it, or a table is malformed)");
  }
  return fb::GetModel(p);
}

// ONNX element type of an rten value dtype; Int32 reads as int64 (see rlx/rten.h).
int32_t onnx_type(fb::DataType t) {
  switch (t) {
    case fb::DataType::Int32: return ::onnx::TensorProto::INT64;
    case fb::DataType::Float: return ::onnx::TensorProto::FLOAT;
    case fb::DataType::Int8: return ::onnx::TensorProto::INT8;
    case fb::DataType::UInt8: return ::onnx::TensorProto::UINT8;
  }
  return ::onnx::TensorProto::UNDEFINED;
}

// The translation of one rten graph: node names, then constants, inputs, operators, outputs.
// When the file was loaded from disk: the importer reads the tensor data segment's f32, i8 and
// u8 tensors from the file itself as ONNX external data (location = the file's name in its
// folder), so the translated ModelProto stays small (no 2 GiB protobuf limit, no extra copy).
struct External {
  std::string location;        // the file's name, relative to the folder given to the importer
  uint64_t segment_offset = 0;  // where the tensor data segment starts in the file
};

class Translator {
 public:
  Translator(const Layout& l, const fb::Model& m, const std::string& name, const External* ext = nullptr)
      : layout_(l), model_(m), file_(name), ext_(ext) {}

  Expected<std::string> run() {
    const fb::Graph& g = *model_.graph();
    if (!g.nodes() || g.nodes()->size() == 0) return error(ErrorCode::format_error, file_, ": the graph has no nodes");
    if (g.captures() && g.captures()->size() > 0)
      return error(ErrorCode::format_error, file_, ": the main graph lists captures (only subgraphs capture values)");
    nodes_ = g.nodes();
    // a union's type and its table are separate fields: the verifier accepts a type without a table
    for (uint32_t i = 0; i < nodes_->size(); ++i) {
      const fb::Node& n = *nodes_->Get(i);
      if (n.data_type() == fb::NodeKind::NONE || n.data_type() > fb::NodeKind::MAX || !n.data())
        return error(ErrorCode::format_error, file_, ": node #", i, " is of unknown kind ", static_cast<int>(n.data_type()),
                     n.data() ? "" : " or has no contents");
    }
    name_nodes();
    ::onnx::ModelProto mp;
    mp.set_ir_version(8);
    mp.set_producer_name("rten file");
    auto* op = mp.add_opset_import();
    op->set_domain("");
    op->set_version(kOpset);
    if (const fb::Metadata* md = model_.metadata()) add_metadata(*md, mp);
    ::onnx::GraphProto& gp = *mp.mutable_graph();
    gp.set_name("rten");
    for (uint32_t i = 0; i < nodes_->size(); ++i) {
      const fb::Node& n = *nodes_->Get(i);
      if (n.data_type() == fb::NodeKind::ConstantNode) RLX_TRY(add_constant(i, *n.data_as_ConstantNode(), gp));
    }
    if (g.inputs())
      for (uint32_t idx : *g.inputs()) RLX_TRY(add_value_info(idx, "input", *gp.add_input()));
    for (uint32_t i = 0; i < nodes_->size(); ++i) {
      const fb::Node& n = *nodes_->Get(i);
      if (n.data_type() == fb::NodeKind::OperatorNode) RLX_TRY(add_operator(i, *n.data_as_OperatorNode(), gp));
    }
    if (!g.outputs() || g.outputs()->size() == 0) return error(ErrorCode::format_error, file_, ": the graph has no outputs");
    for (uint32_t idx : *g.outputs()) RLX_TRY(add_value_info(idx, "output", *gp.add_output()));
    std::string bytes;
    if (mp.ByteSizeLong() > static_cast<size_t>(INT_MAX))
      return error(ErrorCode::unsupported, file_, ": the model translates to an ONNX graph over protobuf's 2 GiB limit");
    if (!mp.SerializeToString(&bytes)) return error(ErrorCode::internal, file_, ": serializing the translated graph failed");
    return bytes;
  }

 private:
  // Names every node: its own name when it has a unique, non-empty one, else "rten_node_<index>"
  // (ONNX wires nodes by name, rten by index, so names must be unique).
  void name_nodes() {
    std::set<std::string> used;
    for (uint32_t i = 0; i < nodes_->size(); ++i)
      if (const auto* s = nodes_->Get(i)->name()) used.insert(s->str());
    std::set<std::string> taken;
    names_.resize(nodes_->size());
    for (uint32_t i = 0; i < nodes_->size(); ++i) {
      const auto* s = nodes_->Get(i)->name();
      std::string n = s ? s->str() : "";
      if (n.empty() || n.find('\0') != std::string::npos || taken.count(n)) {
        n = cat("rten_node_", i);
        for (int k = 1; used.count(n) || taken.count(n); ++k) n = cat("rten_node_", i, "_", k);
      }
      taken.insert(n);
      names_[i] = n;
    }
  }

  std::string node_label(uint32_t i) const { return cat("node #", i, " '", names_[i], "'"); }

  void add_metadata(const fb::Metadata& md, ::onnx::ModelProto& mp) {
    auto put = [&](const char* key, const flatbuffers::String* v) {
      if (!v || v->size() == 0) return;
      auto* p = mp.add_metadata_props();
      p->set_key(key);
      p->set_value(v->str());
    };
    put("onnx_hash", md.onnx_hash());
    put("description", md.description());
    put("license", md.license());
    put("commit", md.commit());
    put("code_repository", md.code_repository());
    put("model_repository", md.model_repository());
    put("run_id", md.run_id());
    put("run_url", md.run_url());
  }

  // A constant node as an ONNX initializer with raw_data: dtype and shape checked against the
  // inline data or the tensor data segment before any copy; Int32 widens to int64.
  Status add_constant(uint32_t i, const fb::ConstantNode& c, ::onnx::GraphProto& gp) {
    const std::string what = cat(file_, ": constant ", node_label(i));
    const auto* shape = c.shape();
    if (shape->size() > static_cast<uint32_t>(kMaxRank))
      return error(ErrorCode::format_error, what, ": rank ", shape->size(), " is over ", kMaxRank);
    uint64_t numel = 1;
    for (uint32_t d : *shape) {
      auto n = checked_mul(numel, d);
      if (!n || *n > kMaxElements)
        return error(ErrorCode::format_error, what, ": its shape has more than 2^40 elements");
      numel = *n;
    }
    // the dtype: the field, or (older files) the inline data's type; both must agree
    std::optional<fb::ConstantDataType> dt = c.dtype() ? std::optional(*c.dtype()) : std::nullopt;
    std::optional<fb::ConstantDataType> inline_dt;
    switch (c.data_type()) {
      case fb::ConstantData::NONE: break;
      case fb::ConstantData::FloatData: inline_dt = fb::ConstantDataType::Float32; break;
      case fb::ConstantData::Int32Data: inline_dt = fb::ConstantDataType::Int32; break;
      case fb::ConstantData::Int8Data: inline_dt = fb::ConstantDataType::Int8; break;
      case fb::ConstantData::UInt8Data: inline_dt = fb::ConstantDataType::UInt8; break;
      default: return error(ErrorCode::format_error, what, ": unknown inline data kind ", static_cast<int>(c.data_type()));
    }
    if (inline_dt && !c.data()) return error(ErrorCode::format_error, what, ": its inline data has a kind but no contents");
    if (!dt) dt = inline_dt;
    if (!dt) return error(ErrorCode::format_error, what, ": it has neither a dtype nor inline data");
    if (inline_dt && *inline_dt != *dt)
      return error(ErrorCode::format_error, what, ": its dtype ", fb::EnumNameConstantDataType(*dt),
                   " disagrees with its inline data (", fb::EnumNameConstantData(c.data_type()), ")");
    size_t esize = 0;
    int32_t onnx_t = 0;
    switch (*dt) {
      case fb::ConstantDataType::Float32: esize = 4; onnx_t = ::onnx::TensorProto::FLOAT; break;
      case fb::ConstantDataType::Int32: esize = 4; onnx_t = ::onnx::TensorProto::INT64; break;
      case fb::ConstantDataType::Int8: esize = 1; onnx_t = ::onnx::TensorProto::INT8; break;
      case fb::ConstantDataType::UInt8: esize = 1; onnx_t = ::onnx::TensorProto::UINT8; break;
      default: return error(ErrorCode::unsupported, what, ": unknown dtype code ", static_cast<int>(*dt));
    }
    const uint64_t nbytes = numel * esize;  // numel <= 2^40: no overflow
    std::string_view src;
    if (inline_dt) {
      if (c.data_offset())
        return error(ErrorCode::format_error, what, ": it has both inline data and a data offset");
      uint64_t count = 0;
      switch (c.data_type()) {
        case fb::ConstantData::FloatData: count = c.data_as_FloatData()->data()->size(); src = bytes_of(c.data_as_FloatData()->data()); break;
        case fb::ConstantData::Int32Data: count = c.data_as_Int32Data()->data()->size(); src = bytes_of(c.data_as_Int32Data()->data()); break;
        case fb::ConstantData::Int8Data: count = c.data_as_Int8Data()->data()->size(); src = bytes_of(c.data_as_Int8Data()->data()); break;
        case fb::ConstantData::UInt8Data: count = c.data_as_UInt8Data()->data()->size(); src = bytes_of(c.data_as_UInt8Data()->data()); break;
        default: break;
      }
      if (count != numel)
        return error(ErrorCode::format_error, what, ": its shape has ", numel, " elements, its inline data ", count);
    } else {
      if (!c.data_offset()) return error(ErrorCode::format_error, what, ": it has neither inline data nor a data offset");
      if (layout_.version != 2)
        return error(ErrorCode::format_error, what, ": a data offset in a version 1 file (which has no tensor data segment)");
      const uint64_t off = *c.data_offset();
      const uint64_t seg = layout_.tensor_data.size();
      if (off % esize != 0)
        return error(ErrorCode::format_error, what, ": its data offset ", off, " is not aligned to its ", esize,
                     "-byte elements");
      if (off > seg || nbytes > seg - off)
        return error(ErrorCode::format_error, what, ": its data (", nbytes, " bytes at offset ", off,
                     ") runs past the end of the tensor data segment (", seg, " bytes)");
      src = layout_.tensor_data.substr(off, nbytes);
    }
    ::onnx::TensorProto& t = *gp.add_initializer();
    t.set_name(names_[i]);
    t.set_data_type(onnx_t);
    for (uint32_t d : *shape) t.add_dims(d);
    if (ext_ && !inline_dt && *dt != fb::ConstantDataType::Int32) {
      t.set_data_location(::onnx::TensorProto::EXTERNAL);
      auto put = [&](const char* k, const std::string& v) {
        auto* e = t.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      put("location", ext_->location);
      put("offset", std::to_string(ext_->segment_offset + *c.data_offset()));
      put("length", std::to_string(nbytes));
      return Status::ok();
    }
    std::string& raw = *t.mutable_raw_data();
    if (*dt == fb::ConstantDataType::Int32) {
      raw.resize(numel * 8);
      for (uint64_t k = 0; k < numel; ++k) {
        int32_t v;
        std::memcpy(&v, src.data() + 4 * k, 4);
        const int64_t w = v;
        std::memcpy(raw.data() + 8 * k, &w, 8);
      }
    } else {
      raw.assign(src.data(), src.size());
    }
    return Status::ok();
  }

  template <class T>
  static std::string_view bytes_of(const flatbuffers::Vector<T>* v) {
    return std::string_view(reinterpret_cast<const char*>(v->Data()), v->size() * sizeof(T));
  }

  // A node index from the file must lie in the node list.
  Status check_index(int64_t idx, const std::string& what) const {
    if (idx < 0 || idx >= static_cast<int64_t>(nodes_->size()))
      return error(ErrorCode::format_error, what, ": node index ", idx, " is out of range (the graph has ",
                   nodes_->size(), " nodes)");
    return Status::ok();
  }

  // A graph input or output: a value node (an output may also be a constant) with its dtype
  // and shape (fixed sizes and symbolic names) when the file gives them.
  Status add_value_info(uint32_t idx, const char* role, ::onnx::ValueInfoProto& vi) {
    RLX_TRY(check_index(idx, cat(file_, ": graph ", role)));
    const fb::Node& n = *nodes_->Get(idx);
    vi.set_name(names_[idx]);
    if (n.data_type() == fb::NodeKind::ConstantNode && std::string(role) == "output") return Status::ok();
    if (n.data_type() != fb::NodeKind::ValueNode)
      return error(ErrorCode::format_error, file_, ": graph ", role, " ", node_label(idx), " is not a value node");
    const fb::ValueNode& v = *n.data_as_ValueNode();
    auto* tt = vi.mutable_type()->mutable_tensor_type();
    if (v.dtype()) {
      const int32_t t = onnx_type(*v.dtype());
      if (t == ::onnx::TensorProto::UNDEFINED)
        return error(ErrorCode::format_error, file_, ": graph ", role, " ", node_label(idx), ": unknown dtype code ",
                     static_cast<int>(*v.dtype()));
      tt->set_elem_type(t);
    } else if (std::string(role) == "input") {
      return error(ErrorCode::unsupported, file_, ": graph input ", node_label(idx),
                   " has no dtype (a file from an older converter); rlx needs one");
    }
    if (v.shape()) {
      if (v.shape()->size() > static_cast<uint32_t>(kMaxRank))
        return error(ErrorCode::format_error, file_, ": graph ", role, " ", node_label(idx), ": rank ",
                     v.shape()->size(), " is over ", kMaxRank);
      auto* shape = tt->mutable_shape();
      for (const fb::Dim* d : *v.shape()) {
        auto* od = shape->add_dim();
        if (d->name() && d->name()->size() > 0) od->set_dim_param(d->name()->str());
        else od->set_dim_value(d->value());
      }
    }
    return Status::ok();
  }

  Status add_operator(uint32_t i, const fb::OperatorNode& op, ::onnx::GraphProto& gp) {
    const std::string type = fb::EnumNameOperatorType(op.type());
    if (type.empty())
      return error(ErrorCode::unsupported, file_, ": ", node_label(i), ": unknown operator code ",
                   static_cast<int>(op.type()), " (newer than rlx's schema)");
    const std::string where = cat(file_, ": ", node_label(i), " ", type);
    ::onnx::NodeProto& n = *gp.add_node();
    n.set_name(names_[i]);
    n.set_op_type(type);
    // inputs and outputs: negative indices are absent optional inputs or unused outputs (""),
    // trailing absent ones dropped as ONNX writers do
    if (op.inputs()) {
      for (int32_t idx : *op.inputs()) {
        if (idx < 0) {
          n.add_input("");
          continue;
        }
        RLX_TRY(check_index(idx, where + ": input"));
        if (nodes_->Get(idx)->data_type() == fb::NodeKind::OperatorNode)
          return error(ErrorCode::format_error, where, ": input ", node_label(idx), " is an operator, not a value");
        n.add_input(names_[idx]);
      }
      while (n.input_size() > 0 && n.input(n.input_size() - 1).empty()) n.mutable_input()->RemoveLast();
    }
    if (op.outputs()) {
      for (int32_t idx : *op.outputs()) {
        if (idx < 0) {
          n.add_output("");
          continue;
        }
        RLX_TRY(check_index(idx, where + ": output"));
        if (nodes_->Get(idx)->data_type() != fb::NodeKind::ValueNode)
          return error(ErrorCode::format_error, where, ": output ", node_label(idx), " is not a value node");
        n.add_output(names_[idx]);
      }
    }
    return attrs_to_onnx(op, n, where);
  }

  const Layout& layout_;
  const fb::Model& model_;
  const std::string file_;
  const External* ext_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Node>>* nodes_ = nullptr;
  std::vector<std::string> names_;
};

}  // namespace
}  // namespace rlx::rten_io

namespace rlx::rten {

Expected<std::string> to_onnx(std::string_view bytes, const std::string& name) {
  RLX_ASSIGN_OR_RETURN(rten_io::Layout l, rten_io::split_file(bytes, name));
  std::vector<uint64_t> aligned;
  RLX_ASSIGN_OR_RETURN(const rten_io::fb::Model* m, rten_io::verify_model(l, name, aligned));
  return rten_io::Translator(l, *m, name).run();
}

namespace {

// Translates and imports; `folder` and `location` are set when the importer reads the tensor
// data from the file itself (see External).
Expected<LoadedModel> import(std::string_view bytes, const std::string& name, const onnx::LoadOptions& options,
                             const std::string& folder, const std::string& location) {
  RLX_ASSIGN_OR_RETURN(rten_io::Layout l, rten_io::split_file(bytes, name));
  std::vector<uint64_t> aligned;
  RLX_ASSIGN_OR_RETURN(const rten_io::fb::Model* fm, rten_io::verify_model(l, name, aligned));
  rten_io::External ext{location, l.version == 2 ? static_cast<uint64_t>(l.tensor_data.data() - bytes.data()) : 0};
  RLX_ASSIGN_OR_RETURN(std::string proto,
                       rten_io::Translator(l, *fm, name, location.empty() ? nullptr : &ext).run());
  RLX_ASSIGN_OR_RETURN(LoadedModel m, onnx::parse(proto, name, folder, options));
  m.format = cat("rten (version ", l.version, ")");
  m.metadata.erase("ir_version");
  m.metadata.erase("producer");
  m.metadata.erase("graph");
  m.metadata["rten_version"] = std::to_string(l.version);
  return m;
}

}  // namespace

Expected<LoadedModel> parse(std::string_view bytes, const std::string& name, const onnx::LoadOptions& options) {
  // no folder: the translation carries every tensor's data, and the importer refuses external data
  return import(bytes, name, options, "", "");
}

Expected<LoadedModel> load(const std::string& path, const onnx::LoadOptions& options) {
  RLX_TRY(require_regular_file(path));
  // the file is mapped, not read: the header and the model data are checked in place, and the
  // importer reads the tensors it needs from the file, through the real path (so a link to the
  // file elsewhere still lies in its folder)
  char real[PATH_MAX];
  if (!realpath(path.c_str(), real)) return error(ErrorCode::io_error, path, ": cannot resolve the path");
  const std::string rp = real;
  const size_t slash = rp.find_last_of('/');
  const std::string folder = slash == 0 ? "/" : rp.substr(0, slash), location = rp.substr(slash + 1);
  RLX_ASSIGN_OR_RETURN(std::shared_ptr<Storage> mapped, map_file(rp));
  const std::string_view bytes(reinterpret_cast<const char*>(mapped->data()), mapped->size());
  return import(bytes, path, options, folder, location);
}

}  // namespace rlx::rten

namespace rlx::io {

Expected<LoadedModel> load_rten_model(const std::string& path) { return rten::load(path); }

}  // namespace rlx::io

// Hand-made corrupt ONNX files: each must fail with a specific ErrorCode and a message that
// names the file and the tensor or node at fault. The models are built with the protobuf
// classes, then broken (truncated bytes, escaping external data, bad dims, cycles, ...).
// Set RLX_ONNX_WRITE_CORPUS=DIR to also write every in-memory case to DIR (fuzz seeds).
#include <chrono>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "rlx/compile.h"
#include "rlx/onnx.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using ::onnx::ModelProto;
using ::onnx::TensorProto;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/rlx_onnx_corrupt_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

ModelProto base_model(int opset = 13) {
  ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("rlx-test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void add_input(ModelProto& m, const std::string& name, int32_t dt, std::vector<int64_t> dims) {
  auto* in = m.mutable_graph()->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dt);
  auto* sh = tt->mutable_shape();
  for (int64_t d : dims) sh->add_dim()->set_dim_value(d);
}

void add_output(ModelProto& m, const std::string& name) { m.mutable_graph()->add_output()->set_name(name); }

// A graph input declared as a sequence of `dt` tensors of `dims`.
void add_sequence_input(ModelProto& m, const std::string& name, int32_t dt, std::vector<int64_t> dims) {
  auto* in = m.mutable_graph()->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  tt->set_elem_type(dt);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

::onnx::NodeProto* add_node(ModelProto& m, const std::string& op, std::vector<std::string> ins,
                            std::vector<std::string> outs, const std::string& name = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_node" : name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

TensorProto* add_init(ModelProto& m, const std::string& name, std::vector<int64_t> dims, int n_floats) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (int i = 0; i < n_floats; ++i) t->add_float_data(static_cast<float>(i));
  return t;
}

// x (f32[4]) + w, where w is an initializer: the model the cases start from.
ModelProto add_model() {
  ModelProto m = base_model();
  add_input(m, "x", TensorProto::FLOAT, {4});
  add_init(m, "w", {4}, 4);
  add_node(m, "Add", {"x", "w"}, {"y"});
  add_output(m, "y");
  return m;
}

void external(TensorProto* t, const std::string& location, int64_t offset = -1, int64_t length = -1) {
  t->clear_float_data();
  t->set_data_location(TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  if (offset >= 0) {
    kv = t->add_external_data();
    kv->set_key("offset");
    kv->set_value(std::to_string(offset));
  }
  if (length >= 0) {
    kv = t->add_external_data();
    kv->set_key("length");
    kv->set_value(std::to_string(length));
  }
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// Writes the bytes as DIR/model.onnx, loads it, and checks the error code and message.
void expect_error(const std::string& case_name, const std::string& bytes, ErrorCode code, const std::string& needle,
                  TempDir* dir_in = nullptr) {
  TempDir own;
  TempDir& dir = dir_in ? *dir_in : own;
  const std::string path = dir.path + "/model.onnx";
  write_file(path, bytes);
  if (const char* out = std::getenv("RLX_ONNX_WRITE_CORPUS")) write_file(std::string(out) + "/" + case_name + ".onnx", bytes);
  auto r = onnx::load(path);
  ASSERT_FALSE(r.has_value()) << case_name << ": loaded although corrupt";
  EXPECT_EQ(r.status().code(), code) << case_name << ": " << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << case_name << ": message lacks '" << needle << "': " << r.status().message();
  EXPECT_NE(r.status().message().find("model.onnx"), std::string::npos)
      << case_name << ": message does not name the file: " << r.status().message();
}

void expect_error(const std::string& case_name, const ModelProto& m, ErrorCode code, const std::string& needle,
                  TempDir* dir = nullptr) {
  expect_error(case_name, m.SerializeAsString(), code, needle, dir);
}

TEST(OnnxCorrupt, ValidModelLoads) {
  TempDir d;
  write_file(d.path + "/model.onnx", add_model().SerializeAsString());
  auto r = onnx::load(d.path + "/model.onnx");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->graph.inputs.size(), 1u);
  if (const char* out = std::getenv("RLX_ONNX_WRITE_CORPUS")) write_file(std::string(out) + "/valid_add.onnx", add_model().SerializeAsString());
}

TEST(OnnxCorrupt, TruncatedProtobuf) {
  std::string b = add_model().SerializeAsString();
  expect_error("truncated", b.substr(0, b.size() / 2), ErrorCode::format_error, "truncated or malformed protobuf");
}

TEST(OnnxCorrupt, GarbageBytes) {
  expect_error("garbage", std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11), ErrorCode::format_error,
               "not a valid ONNX ModelProto");
}

TEST(OnnxCorrupt, EmptyFileHasNoGraph) { expect_error("empty", std::string(), ErrorCode::format_error, "has no graph"); }

TEST(OnnxCorrupt, OpsetTooOld) {
  ModelProto m = add_model();
  m.mutable_opset_import(0)->set_version(6);
  expect_error("opset_6", m, ErrorCode::unsupported, "opset 6");
}

TEST(OnnxCorrupt, OpsetTooNew) {
  ModelProto m = add_model();
  m.mutable_opset_import(0)->set_version(99);
  expect_error("opset_99", m, ErrorCode::unsupported, "opset 99");
  m.mutable_opset_import(0)->set_version(24);
  expect_error("opset_24", m, ErrorCode::unsupported, "opset 24 is not supported (rlx imports opsets 7 to 23)");
}

TEST(OnnxCorrupt, NoDefaultOpset) {
  ModelProto m = add_model();
  m.mutable_opset_import(0)->set_domain("com.example");
  expect_error("no_default_opset", m, ErrorCode::format_error, "imports no version of the default ONNX opset");
}

TEST(OnnxCorrupt, ExternalDataDotDot) {
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "../w.bin");
  expect_error("external_dotdot", m, ErrorCode::format_error, "'..' component");
}

TEST(OnnxCorrupt, ExternalDataDotDotInside) {
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "sub/../../w.bin");
  expect_error("external_dotdot_inside", m, ErrorCode::format_error, "'..' component");
}

TEST(OnnxCorrupt, ExternalDataAbsolute) {
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "/etc/passwd");
  expect_error("external_absolute", m, ErrorCode::format_error, "absolute path");
}

TEST(OnnxCorrupt, ExternalDataSymlinkEscapes) {
  TempDir d;
  TempDir outside;
  write_file(outside.path + "/w.bin", std::string(16, '\0'));
  ASSERT_EQ(symlink((outside.path + "/w.bin").c_str(), (d.path + "/w.bin").c_str()), 0);
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "w.bin");
  expect_error("external_symlink", m, ErrorCode::format_error, "resolves outside the model's folder", &d);
}

TEST(OnnxCorrupt, ExternalDataMissingFile) {
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "nowhere.bin");
  expect_error("external_missing", m, ErrorCode::io_error, "not found");
}

TEST(OnnxCorrupt, ExternalDataPastEnd) {
  TempDir d;
  write_file(d.path + "/w.bin", std::string(16, '\0'));
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "w.bin", 8, 16);
  expect_error("external_past_end", m, ErrorCode::format_error, "lies outside", &d);
}

TEST(OnnxCorrupt, ExternalDataWrongLength) {
  TempDir d;
  write_file(d.path + "/w.bin", std::string(64, '\0'));
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "w.bin", 0, 12);
  expect_error("external_wrong_length", m, ErrorCode::format_error, "does not match", &d);
}

TEST(OnnxCorrupt, ExternalDataBadOffset) {
  TempDir d;
  write_file(d.path + "/w.bin", std::string(64, '\0'));
  ModelProto m = add_model();
  external(m.mutable_graph()->mutable_initializer(0), "w.bin");
  auto* kv = m.mutable_graph()->mutable_initializer(0)->add_external_data();
  kv->set_key("offset");
  kv->set_value("-5");
  expect_error("external_bad_offset", m, ErrorCode::format_error, "is not a number", &d);
}

TEST(OnnxCorrupt, RawDataSizeMismatch) {
  ModelProto m = add_model();
  auto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_float_data();
  t->set_raw_data(std::string(8, '\0'));
  expect_error("raw_size", m, ErrorCode::format_error, "raw_data has 8 bytes");
}

TEST(OnnxCorrupt, TypedFieldCountMismatch) {
  ModelProto m = add_model();
  m.mutable_graph()->mutable_initializer(0)->mutable_float_data()->RemoveLast();
  expect_error("typed_count", m, ErrorCode::format_error, "float_data holds 3 values");
}

TEST(OnnxCorrupt, NegativeDim) {
  ModelProto m = add_model();
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, -4);
  expect_error("negative_dim", m, ErrorCode::format_error, "negative dimension -4");
}

TEST(OnnxCorrupt, HugeDimsOverflow) {
  ModelProto m = add_model();
  auto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_dims();
  for (int i = 0; i < 3; ++i) t->add_dims(int64_t{1} << 31);
  expect_error("huge_dims", m, ErrorCode::overflow, "overflows");
}

TEST(OnnxCorrupt, HugeDimsNoData) {
  // a declared 2^40-element tensor with no data must fail before allocating
  ModelProto m = add_model();
  auto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_dims();
  t->add_dims(int64_t{1} << 40);
  expect_error("huge_no_data", m, ErrorCode::format_error, "float_data holds 4 values");
}

TEST(OnnxCorrupt, RankTooHigh) {
  ModelProto m = add_model();
  auto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_dims();
  for (int i = 0; i < 65; ++i) t->add_dims(1);
  expect_error("rank_65", m, ErrorCode::format_error, "rank 65 exceeds 64");
}

TEST(OnnxCorrupt, UnknownDataType) {
  ModelProto m = add_model();
  m.mutable_graph()->mutable_initializer(0)->set_data_type(99);
  expect_error("unknown_dtype", m, ErrorCode::unsupported, "data type");
}

TEST(OnnxCorrupt, StringTensor) {
  ModelProto m = add_model();
  m.mutable_graph()->mutable_initializer(0)->set_data_type(TensorProto::STRING);
  expect_error("string_tensor", m, ErrorCode::unsupported, "STRING");
}

TEST(OnnxCorrupt, MissingInitializer) {
  ModelProto m = add_model();
  m.mutable_graph()->clear_initializer();
  expect_error("missing_initializer", m, ErrorCode::format_error, "input 'w' is not a graph input, an initializer");
}

TEST(OnnxCorrupt, Cycle) {
  ModelProto m = base_model();
  add_input(m, "x", TensorProto::FLOAT, {4});
  add_node(m, "Add", {"x", "b"}, {"a"}, "first");
  add_node(m, "Neg", {"a"}, {"b"}, "second");
  add_output(m, "b");
  expect_error("cycle", m, ErrorCode::format_error, "node 'first'");
}

TEST(OnnxCorrupt, OutputDefinedTwice) {
  ModelProto m = add_model();
  add_node(m, "Neg", {"x"}, {"y"}, "again");
  expect_error("output_twice", m, ErrorCode::format_error, "output 'y' is already defined");
}

TEST(OnnxCorrupt, DuplicateInitializer) {
  ModelProto m = add_model();
  add_init(m, "w", {4}, 4);
  expect_error("duplicate_initializer", m, ErrorCode::format_error, "initializer 'w' is defined twice");
}

TEST(OnnxCorrupt, UnsupportedOpNamesNode) {
  ModelProto m = add_model();
  add_node(m, "FrobnicateND", {"y"}, {"z"}, "weird");
  expect_error("unsupported_op", m, ErrorCode::unsupported, "node 'weird' (#1) FrobnicateND");
}

TEST(OnnxCorrupt, ForeignDomain) {
  ModelProto m = add_model();
  m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  expect_error("foreign_domain", m, ErrorCode::unsupported, "op domain 'com.microsoft'");
}

// ai.onnx.preview.training: its ops only in its domain, at version 1, and a model importing only
// it has no default-domain ops.
TEST(OnnxCorrupt, TrainingDomainIsCheckedAsItsOwn) {
  ModelProto m = add_model();
  m.mutable_opset_import(0)->set_domain("ai.onnx.preview.training");
  expect_error("training_domain_only", m, ErrorCode::format_error,
               "node 'Add_node' (#0) Add: a default-domain op, and the model imports no version of the default ONNX opset");
  m = add_model();
  m.mutable_graph()->mutable_node(0)->set_op_type("Adam");
  expect_error("adam_in_default_domain", m, ErrorCode::unsupported, "op Adam is not supported");
  auto* op = m.add_opset_import();
  op->set_domain("ai.onnx.preview.training");
  op->set_version(2);
  m.mutable_graph()->mutable_node(0)->set_domain("ai.onnx.preview.training");
  expect_error("training_domain_version", m, ErrorCode::unsupported, "imports ai.onnx.preview.training version 2");
}

TEST(OnnxCorrupt, DtypeMismatch) {
  ModelProto m = base_model();
  add_input(m, "x", TensorProto::FLOAT, {4});
  add_input(m, "i", TensorProto::INT64, {4});
  add_node(m, "Add", {"x", "i"}, {"y"}, "mixed");
  add_output(m, "y");
  expect_error("dtype_mismatch", m, ErrorCode::dtype_error, "node 'mixed'");
}

TEST(OnnxCorrupt, ShapeMismatch) {
  ModelProto m = base_model();
  add_input(m, "a", TensorProto::FLOAT, {2, 3});
  add_input(m, "b", TensorProto::FLOAT, {4, 5});
  add_node(m, "MatMul", {"a", "b"}, {"y"}, "mm");
  add_output(m, "y");
  expect_error("shape_mismatch", m, ErrorCode::shape_error, "node 'mm'");
}

TEST(OnnxCorrupt, UnproducedOutput) {
  ModelProto m = add_model();
  add_output(m, "ghost");
  expect_error("unproduced_output", m, ErrorCode::format_error, "graph output 'ghost' is not produced");
}

TEST(OnnxCorrupt, NoOutputs) {
  ModelProto m = add_model();
  m.mutable_graph()->clear_output();
  expect_error("no_outputs", m, ErrorCode::format_error, "has no outputs");
}

TEST(OnnxCorrupt, InputWithoutTensorType) {
  ModelProto m = add_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  expect_error("input_sequence_of_nothing", m, ErrorCode::unsupported, "graph input 'x' is a sequence of other values than tensors");
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_map_type();
  expect_error("input_map", m, ErrorCode::unsupported, "graph input 'x' is neither a tensor, a sequence of tensors nor an optional");
}

TEST(OnnxCorrupt, InputNegativeDim) {
  ModelProto m = add_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(-3);
  expect_error("input_negative_dim", m, ErrorCode::format_error, "invalid dimension -3");
}

TEST(OnnxCorrupt, DataDependentShape) {
  ModelProto m = base_model();
  add_input(m, "x", TensorProto::FLOAT, {4});
  add_input(m, "s", TensorProto::INT64, {2});
  add_node(m, "Reshape", {"x", "s"}, {"y"}, "rs");
  add_output(m, "y");
  expect_error("data_dependent_shape", m, ErrorCode::unsupported, "must be known at import time");
}

TEST(OnnxCorrupt, UnsupportedAttribute) {
  ModelProto m = base_model();
  add_input(m, "a", TensorProto::FLOAT, {2, 2});
  add_input(m, "b", TensorProto::FLOAT, {2, 2});
  auto* n = add_node(m, "Gemm", {"a", "b"}, {"y"}, "gemm");
  auto* at = n->add_attribute();
  at->set_name("fancy");
  at->set_type(::onnx::AttributeProto::INT);
  at->set_i(1);
  add_output(m, "y");
  expect_error("unsupported_attribute", m, ErrorCode::unsupported, "attribute 'fancy' is not supported");
}

// Every attribute a mapping does not read is refused (an exporter's newer attribute, a
// misspelling), not only those of the ops that list theirs; one of the wrong type is an error
// naming it; constant Gather indices out of range are an error, as ONNX says.
TEST(OnnxCorrupt, UnreadWrongTypedAndOutOfRangeAttributes) {
  {
    ModelProto m = base_model();
    add_input(m, "a", TensorProto::FLOAT, {2, 2});
    auto* at = add_node(m, "Relu", {"a"}, {"y"}, "relu")->add_attribute();
    at->set_name("alpha");
    at->set_type(::onnx::AttributeProto::FLOAT);
    at->set_f(0.1f);
    add_output(m, "y");
    expect_error("unread_attribute", m, ErrorCode::unsupported, "node 'relu' (#0) Relu: attribute 'alpha' is not supported");
  }
  {
    ModelProto m = base_model();
    add_input(m, "a", TensorProto::FLOAT, {2, 3});
    auto* at = add_node(m, "Transpose", {"a"}, {"y"}, "tr")->add_attribute();
    at->set_name("perm");
    at->set_type(::onnx::AttributeProto::FLOATS);
    at->add_floats(1);
    at->add_floats(0);
    add_output(m, "y");
    expect_error("wrong_typed_attribute", m, ErrorCode::format_error,
                 "node 'tr' (#0) Transpose: attribute 'perm' must be a list of integers (INTS), got type FLOATS");
  }
  {
    ModelProto m = base_model();
    add_input(m, "a", TensorProto::FLOAT, {2, 3});
    auto* idx = m.mutable_graph()->add_initializer();
    idx->set_name("i");
    idx->set_data_type(TensorProto::INT64);
    idx->add_dims(1);
    idx->add_int64_data(7);
    add_node(m, "Gather", {"a", "i"}, {"y"}, "ga");
    add_output(m, "y");
    expect_error("gather_out_of_range", m, ErrorCode::out_of_range, "node 'ga' (#0) Gather: index 7 (entry 0 of indices) is outside [-2, 2)");
  }
  {
    // an input the mapping does not read (here one Relu never has) is refused, not dropped
    ModelProto m = base_model();
    add_input(m, "a", TensorProto::FLOAT, {2, 2});
    add_input(m, "b", TensorProto::FLOAT, {2, 2});
    add_node(m, "Relu", {"a", "b"}, {"y"}, "relu2");
    add_output(m, "y");
    expect_error("unread_input", m, ErrorCode::unsupported,
                 "node 'relu2' (#0) Relu: input 1 ('b') is not supported (rlx's Relu does not read it)");
  }
  {
    // opset 20 moved DFT's axis into an input and changed its default; the attribute is refused
    ModelProto m = base_model(20);
    add_input(m, "a", TensorProto::FLOAT, {1, 4, 1});
    auto* at = add_node(m, "DFT", {"a"}, {"y"}, "dft")->add_attribute();
    at->set_name("axis");
    at->set_type(::onnx::AttributeProto::INT);
    at->set_i(1);
    add_output(m, "y");
    expect_error("dft20_axis_attribute", m, ErrorCode::unsupported, "node 'dft' (#0) DFT: attribute 'axis' is not supported");
  }
}

TEST(OnnxCorrupt, DeeplyNestedSubgraphs) {
  // subgraphs nested past protobuf's recursion limit must be refused, not overflow the stack
  ModelProto m = add_model();
  ::onnx::GraphProto inner;
  for (int depth = 0; depth < 200; ++depth) {
    ::onnx::GraphProto outer;
    auto* n = outer.add_node();
    n->set_op_type("If");
    auto* a = n->add_attribute();
    a->set_name("then_branch");
    a->set_type(::onnx::AttributeProto::GRAPH);
    *a->mutable_g() = inner;
    inner = std::move(outer);
  }
  auto* n = add_node(m, "If", {"x"}, {"z"}, "deep");
  auto* a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(::onnx::AttributeProto::GRAPH);
  *a->mutable_g() = inner;
  expect_error("deep_nesting", m, ErrorCode::format_error, "malformed protobuf");
}

TEST(OnnxCorrupt, ConstantOfShapeTooLarge) {
  ModelProto m = base_model();
  add_input(m, "x", TensorProto::FLOAT, {4});
  auto* s = m.mutable_graph()->add_initializer();
  s->set_name("shape");
  s->set_data_type(TensorProto::INT64);
  s->add_dims(3);
  for (int i = 0; i < 3; ++i) s->add_int64_data(int64_t{1} << 30);
  add_node(m, "ConstantOfShape", {"shape"}, {"big"}, "cos");
  add_node(m, "Add", {"x", "big"}, {"y"}, "add");
  add_output(m, "y");
  expect_error("constant_of_shape_huge", m, ErrorCode::overflow, "node 'cos'");
}

TEST(OnnxCorrupt, TensorFileTruncated) {
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT);
  t.add_dims(16);
  t.set_raw_data(std::string(64, '\1'));
  std::string b = t.SerializeAsString();
  auto r = onnx::parse_tensor(b.substr(0, b.size() - 10), "input_0.pb");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::format_error);
  EXPECT_NE(r.status().message().find("input_0.pb"), std::string::npos);
}

// A Loop body that passes its loop-carried value through (and its condition, true); its
// names start with `p` (nested bodies need names of their own: ONNX values are assigned once).
::onnx::GraphProto identity_body(const std::string& p = "") {
  ::onnx::GraphProto b;
  b.set_name(p + "body");
  for (const char* n : {"i", "c", "v"}) b.add_input()->set_name(p + n);
  auto* k = b.add_node();
  k->set_op_type("Identity");
  k->add_input(p + "c");
  k->add_output(p + "c_out");
  auto* n = b.add_node();
  n->set_op_type("Identity");
  n->add_input(p + "v");
  n->add_output(p + "v_out");
  b.add_output()->set_name(p + "c_out");
  b.add_output()->set_name(p + "v_out");
  return b;
}

::onnx::NodeProto* add_loop(ModelProto& m, std::vector<std::string> ins, const std::string& out, ::onnx::GraphProto body) {
  auto* n = add_node(m, "Loop", std::move(ins), {out}, "loop");
  auto* a = n->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(body);
  return n;
}

void add_bool(ModelProto& m, const std::string& name, bool v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::BOOL);
  t->add_int32_data(v);
}

void add_i64(ModelProto& m, const std::string& name, int64_t v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT64);
  t->add_int64_data(v);
}

// LpPool's refusals name what is refused: ceil_mode 1, 3-D windows and a p that is not positive.
TEST(OnnxCorrupt, LpPoolThatIsRefused) {
  auto lppool = [](std::vector<int64_t> dims, int64_t ceil_mode, double p) {
    ModelProto m = base_model(18);
    add_input(m, "x", TensorProto::FLOAT, dims);
    auto* n = add_node(m, "LpPool", {"x"}, {"y"}, "pool");
    auto* k = n->add_attribute();
    k->set_name("kernel_shape");
    k->set_type(::onnx::AttributeProto::INTS);
    for (size_t i = 2; i < dims.size(); ++i) k->add_ints(2);
    auto* c = n->add_attribute();
    c->set_name("ceil_mode");
    c->set_type(::onnx::AttributeProto::INT);
    c->set_i(ceil_mode);
    auto* a = n->add_attribute();
    a->set_name("p");
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(p));
    add_output(m, "y");
    return m;
  };
  expect_error("lppool_ceil_mode", lppool({1, 2, 5, 5}, 1, 2), ErrorCode::unsupported, "LpPool with ceil_mode 1");
  expect_error("lppool_3d", lppool({1, 2, 4, 4, 4}, 0, 2), ErrorCode::unsupported, "only 1-D and 2-D LpPool");
  expect_error("lppool_p0", lppool({1, 2, 5, 5}, 0, 0), ErrorCode::invalid_argument, "p must be positive");
}

// DeformConv's inputs must agree: the offset's shape, W's channels for the group.
TEST(OnnxCorrupt, DeformConvWithInputsThatDisagree) {
  auto deform = [](std::vector<int64_t> w_dims, std::vector<int64_t> off_dims) {
    ModelProto m = base_model(19);
    add_input(m, "x", TensorProto::FLOAT, {1, 2, 5, 5});
    add_input(m, "w", TensorProto::FLOAT, w_dims);
    add_input(m, "off", TensorProto::FLOAT, off_dims);
    add_node(m, "DeformConv", {"x", "w", "off"}, {"y"}, "deform");
    add_output(m, "y");
    return m;
  };
  expect_error("deformconv_offset_shape", deform({3, 2, 3, 3}, {1, 9, 3, 3}), ErrorCode::shape_error,
               "offset must be [1, 18, 3, 3], got [1, 9, 3, 3]");
  expect_error("deformconv_w_channels", deform({3, 1, 3, 3}, {1, 18, 3, 3}), ErrorCode::shape_error,
               "does not fit X [1, 2, 5, 5] with group 1");
}

TEST(OnnxCorrupt, ControlFlowThatCannotBeCompiled) {
  {  // loops nested 4096 x 4096 deep: the unrolling budget stops it, quickly
    ModelProto m = base_model();
    add_input(m, "x", TensorProto::FLOAT, {2});
    add_i64(m, "big", 4096);
    ::onnx::GraphProto inner = identity_body("inner_");
    ::onnx::GraphProto outer = identity_body();
    auto* n = outer.mutable_node(1);
    n->set_op_type("Loop");
    n->clear_input();
    for (const char* in : {"big", "", "v"}) n->add_input(in);
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    *a->mutable_g() = inner;
    add_loop(m, {"big", "", "x"}, "y", outer);
    add_output(m, "y");
    const auto t0 = std::chrono::steady_clock::now();
    expect_error("loop_nested_budget", m, ErrorCode::unsupported, "control flow unrolls to more than");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  }
  {  // If on a run-time condition whose branches differ in shape
    ModelProto m = base_model();
    add_input(m, "c", TensorProto::BOOL, {});
    add_init(m, "a", {2}, 2);
    add_init(m, "b", {3}, 3);
    auto* n = add_node(m, "If", {"c"}, {"y"}, "branch");
    for (const char* br : {"then_branch", "else_branch"}) {
      auto* a = n->add_attribute();
      a->set_name(br);
      a->set_type(::onnx::AttributeProto::GRAPH);
      auto* g = a->mutable_g();
      auto* k = g->add_node();
      k->set_op_type("Identity");
      k->add_input(br[0] == 't' ? "a" : "b");
      k->add_output(std::string(br) + "_out");
      g->add_output()->set_name(std::string(br) + "_out");
    }
    add_output(m, "y");
    expect_error("if_branch_shapes", m, ErrorCode::unsupported, "the branches give f32[2] and f32[3]");
  }
}

// Loops whose trip count or condition is known only at run time: the body a graph of its own,
// run by the host per iteration (the IR's loop op); a loop that would never end stops at
// CompileOptions::max_loop_iterations.
TEST(OnnxLoop, RunTimeTripCountConditionAndOuterValues) {
  TempDir d;
  const std::string path = d.path + "/model.onnx";
  {  // y = x * w^n (w an outer-scope initializer of 8 elements: fed to the body as an input)
    ModelProto m = base_model(13);
    add_input(m, "x", TensorProto::FLOAT, {8});
    add_input(m, "n", TensorProto::INT64, {});
    auto* w = add_init(m, "w", {8}, 8);
    w->clear_float_data();
    for (int i = 0; i < 8; ++i) w->add_float_data(0.5f + 0.25f * static_cast<float>(i));
    ::onnx::GraphProto body = identity_body();
    body.mutable_node(1)->set_op_type("Mul");
    body.mutable_node(1)->add_input("w");
    add_loop(m, {"n", "", "x"}, "y", body);
    add_output(m, "y");
    write_file(path, m.SerializeAsString());
    auto loaded = onnx::load(path);
    ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
    int loops = 0;
    for (const Node& n : loaded->graph.nodes) loops += n.op == Op::Loop;
    EXPECT_EQ(loops, 1);
    auto model = Model::compile(loaded->graph);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    Tensor x = Tensor::from_vector<double>(DType::f32, {8}, {1, -1, 2, -2, 3, -3, 4, -4});
    for (int64_t trips : {0, 1, 5}) {  // one compiled model, three trip counts
      Tensor nt = Tensor::zeros(DType::i64, {});
      nt.data<int64_t>()[0] = trips;
      auto r = (*model)->run(std::vector<Tensor>{x, nt});
      ASSERT_TRUE(r.has_value()) << r.status().to_string();
      for (int i = 0; i < 8; ++i)
        EXPECT_FLOAT_EQ(static_cast<float>((*r)[0].get_f64(i)),
                        static_cast<float>(x.get_f64(i) * std::pow(0.5 + 0.25 * i, static_cast<double>(trips))))
            << "trips " << trips << " element " << i;
    }
    auto report = explain(loaded->graph, "cpu", DispatchPolicy{}, DimBindings{});
    ASSERT_TRUE(report.has_value()) << report.status().to_string();
    bool host_loop = false;
    for (const auto& nd : report->nodes) host_loop |= nd.op == Op::Loop && nd.how.find("iteration by iteration") != std::string::npos;
    EXPECT_TRUE(host_loop);
  }
  {  // no trip count and a condition that stays true: stopped at max_loop_iterations
    ModelProto m = base_model();
    add_input(m, "x", TensorProto::FLOAT, {2});
    add_bool(m, "t", true);
    add_loop(m, {"", "t", "x"}, "y", identity_body());
    add_output(m, "y");
    write_file(path, m.SerializeAsString());
    auto loaded = onnx::load(path);
    ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
    CompileOptions o;
    o.max_loop_iterations = 100;
    auto model = Model::compile(loaded->graph, o);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    auto r = (*model)->run(std::vector<Tensor>{Tensor::zeros(DType::f32, {2})});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.status().code(), ErrorCode::out_of_range);
    EXPECT_NE(r.status().message().find("the loop ran 100 iterations"), std::string::npos) << r.status().message();
  }
  {  // a carried value whose shape changes per iteration: refused at import, naming both types
    ModelProto m = base_model();
    add_input(m, "x", TensorProto::FLOAT, {2});
    add_input(m, "n", TensorProto::INT64, {});
    ::onnx::GraphProto body = identity_body();
    body.mutable_node(1)->set_op_type("Concat");
    body.mutable_node(1)->add_input("v");
    auto* ax = body.mutable_node(1)->add_attribute();
    ax->set_name("axis");
    ax->set_type(::onnx::AttributeProto::INT);
    ax->set_i(0);
    add_loop(m, {"n", "", "x"}, "y", body);
    add_output(m, "y");
    expect_error("loop_growing_state", m, ErrorCode::shape_error, "carried value 0 enters as f32[2] and leaves the body as f32[4]");
  }
}

TEST(OnnxCorrupt, SequencesThatCannotBeCompiled) {
  {  // a sequence graph input given no elements: its length is what rlx compiles for
    ModelProto m = base_model(18);
    add_sequence_input(m, "xs", TensorProto::FLOAT, {2});
    add_node(m, "ConcatFromSequence", {"xs"}, {"y"}, "concat");
    add_output(m, "y");
    expect_error("sequence_input_without_elements", m, ErrorCode::unsupported, "graph input 'xs' is a sequence: give its elements");
  }
  {  // a position past the end
    ModelProto m = base_model(18);
    add_input(m, "a", TensorProto::FLOAT, {2});
    add_i64(m, "p", 2);
    add_node(m, "SequenceConstruct", {"a", "a"}, {"s"}, "construct");
    add_node(m, "SequenceAt", {"s", "p"}, {"y"}, "at");
    add_output(m, "y");
    expect_error("sequence_at_past_end", m, ErrorCode::out_of_range, "node 'at' (#1) SequenceAt: position 2 is outside [-2, 1]");
  }
  {  // a sequence used where a tensor is read
    ModelProto m = base_model(18);
    add_input(m, "a", TensorProto::FLOAT, {2});
    add_node(m, "SequenceConstruct", {"a"}, {"s"}, "construct");
    add_node(m, "Relu", {"s"}, {"y"}, "relu");
    add_output(m, "y");
    expect_error("sequence_as_tensor", m, ErrorCode::unsupported, "input 0 ('s') is a sequence");
  }
}

// Sequences and optionals at the graph's boundary: a sequence input specialized to the elements
// it is given, sequence outputs as NAME[k] graph outputs, empty optionals, and If on a run-time
// condition whose branches make sequences.
TEST(OnnxValues, SequenceAndOptionalInputsAndOutputs) {
  TempDir d;
  const std::string path = d.path + "/model.onnx";
  Tensor a = Tensor::from_vector<double>(DType::f32, {2}, {1, -2});
  Tensor b = Tensor::from_vector<double>(DType::f32, {2}, {3, 4});
  {  // a sequence output: one graph output per element, reassembled by load_and_run
    ModelProto m = base_model(18);
    add_input(m, "a", TensorProto::FLOAT, {2});
    add_node(m, "Relu", {"a"}, {"r"}, "relu");
    add_node(m, "SequenceConstruct", {"a", "r"}, {"s"}, "construct");
    add_output(m, "s");
    write_file(path, m.SerializeAsString());
    auto loaded = onnx::load(path);
    ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
    ASSERT_EQ(loaded->graph.outputs.size(), 2u);
    EXPECT_EQ(loaded->graph.values[loaded->graph.outputs[1]].name, "s[1]");
    EXPECT_EQ(loaded->metadata.at("onnx.output_sequence.s"), "2");
    auto r = onnx::load_and_run(path, std::map<std::string, Tensor>{{"a", a}});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->values.size(), 1u);
    ASSERT_EQ(r->values[0].kind, onnx::Value::Kind::sequence);
    ASSERT_EQ(r->values[0].elements.size(), 2u);
    EXPECT_EQ(r->values[0].elements[0].to_f64(), a.to_f64());
    EXPECT_EQ(r->values[0].elements[1].to_f64(), (std::vector<double>{1, 0}));
  }
  {  // a sequence input: its elements become graph inputs xs[k], checked against the declared type
    ModelProto m = base_model(18);
    add_sequence_input(m, "xs", TensorProto::FLOAT, {2});
    auto* ax = add_node(m, "ConcatFromSequence", {"xs"}, {"y"}, "concat")->add_attribute();
    ax->set_name("axis");
    ax->set_type(::onnx::AttributeProto::INT);
    ax->set_i(0);
    add_output(m, "y");
    write_file(path, m.SerializeAsString());
    onnx::LoadOptions opts;
    opts.structured_inputs["xs"] = onnx::Value::sequence({a, b, a}, DType::f32);
    auto loaded = onnx::load(path, opts);
    ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
    ASSERT_EQ(loaded->graph.inputs.size(), 3u);
    EXPECT_EQ(loaded->graph.values[loaded->graph.inputs[2]].name, "xs[2]");
    auto r = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"xs", opts.structured_inputs["xs"]}});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->values[0].tensor.to_f64(), (std::vector<double>{1, -2, 3, 4, 1, -2}));

    opts.structured_inputs["xs"] = onnx::Value::sequence({a, Tensor::from_vector<double>(DType::i64, {2}, {1, 2})}, DType::f32);
    auto bad = onnx::load(path, opts);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), ErrorCode::dtype_error);
    EXPECT_NE(bad.status().message().find("graph input 'xs[1]' is i64"), std::string::npos) << bad.status().message();
    opts.structured_inputs["xs"] = onnx::Value::sequence({Tensor::from_vector<double>(DType::f32, {3}, {1, 2, 3})}, DType::f32);
    bad = onnx::load(path, opts);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), ErrorCode::shape_error);
    EXPECT_NE(bad.status().message().find("'xs[0]' has size 3 in dim 0, the model declares 2"), std::string::npos)
        << bad.status().message();
    opts.structured_inputs["xs"] = onnx::Value::none(DType::f32);
    bad = onnx::load(path, opts);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), ErrorCode::invalid_argument);
    EXPECT_NE(bad.status().message().find("'xs' is given no value, and it is not optional"), std::string::npos)
        << bad.status().message();
  }
  {  // an empty optional: OptionalHasElement folds to false, OptionalGetElement is an error
    ModelProto m = base_model(18);
    auto* in = m.mutable_graph()->add_input();
    in->set_name("o");
    auto* tt = in->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type();
    tt->set_elem_type(TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    add_node(m, "OptionalHasElement", {"o"}, {"has"}, "has");
    add_output(m, "has");
    write_file(path, m.SerializeAsString());
    auto r = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"o", onnx::Value::none(DType::f32)}});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->values[0].tensor.to_f64(), (std::vector<double>{0}));
    r = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"o", onnx::Value::of(a)}});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->values[0].tensor.to_f64(), (std::vector<double>{1}));
    m.mutable_graph()->mutable_node(0)->set_op_type("OptionalGetElement");
    write_file(path, m.SerializeAsString());
    r = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"o", onnx::Value::none(DType::f32)}});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.status().message().find("OptionalGetElement: the optional ('o') is empty"), std::string::npos)
        << r.status().message();
  }
  // If on a run-time condition, branches making sequences: of one length, selected element by
  // element at run time; of two lengths, refused unless the condition is known at import
  for (int else_len : {2, 3}) {
    ModelProto m = base_model(18);
    add_input(m, "c", TensorProto::BOOL, {});
    add_input(m, "a", TensorProto::FLOAT, {2});
    auto* n = add_node(m, "If", {"c"}, {"s"}, "branch");
    for (const char* br : {"then_branch", "else_branch"}) {
      auto* at = n->add_attribute();
      at->set_name(br);
      at->set_type(::onnx::AttributeProto::GRAPH);
      auto* g = at->mutable_g();
      auto* neg = g->add_node();
      neg->set_op_type("Neg");
      neg->add_input("a");
      neg->add_output(std::string(br) + "_neg");
      auto* k = g->add_node();
      k->set_op_type("SequenceConstruct");
      const int len = br[0] == 't' ? 2 : else_len;
      for (int i = 0; i < len; ++i) k->add_input(br[0] == 't' && i == 1 ? std::string(br) + "_neg" : "a");
      k->add_output(std::string(br) + "_out");
      g->add_output()->set_name(std::string(br) + "_out");
    }
    add_output(m, "s");
    write_file(path, m.SerializeAsString());
    auto loaded = onnx::load(path);
    if (else_len == 2) {
      ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
      EXPECT_EQ(loaded->graph.inputs.size(), 2u);  // the condition stays a run-time input
    } else {
      ASSERT_FALSE(loaded.has_value());
      EXPECT_EQ(loaded.status().code(), ErrorCode::unsupported);
      EXPECT_NE(loaded.status().message().find("the branches give a sequence of 2 and a sequence of 3"), std::string::npos)
          << loaded.status().message();
    }
    for (bool cv : {true, false}) {
      Tensor c = Tensor::zeros(DType::boolean, {});
      c.bytes()[0] = cv;
      auto r = onnx::load_and_run(path, std::map<std::string, Tensor>{{"c", c}, {"a", a}});
      ASSERT_TRUE(r.has_value()) << r.status().to_string();
      ASSERT_EQ(r->values[0].elements.size(), cv ? 2u : static_cast<size_t>(else_len));
      EXPECT_EQ(r->values[0].elements[1].to_f64(), cv ? (std::vector<double>{-1, 2}) : a.to_f64());
    }
  }
}

// String tensors exist only at import: given graph inputs and Casts of constants, read by the
// string ops; load() refuses a string output (only load_and_run returns it).
TEST(OnnxValues, StringTensorsAtImport) {
  TempDir d;
  const std::string path = d.path + "/model.onnx";
  auto add_attr_i = [](::onnx::NodeProto* n, const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  };
  {  // float -> Relu -> string -> float: the cast to string needs x at import
    ModelProto m = base_model(13);
    add_input(m, "x", TensorProto::FLOAT, {3});
    add_node(m, "Relu", {"x"}, {"r"}, "relu");
    add_attr_i(add_node(m, "Cast", {"r"}, {"s"}, "to_string"), "to", TensorProto::STRING);
    add_attr_i(add_node(m, "Cast", {"s"}, {"y"}, "to_float"), "to", TensorProto::FLOAT);
    add_output(m, "y");
    write_file(path, m.SerializeAsString());
    auto loaded = onnx::load(path);
    ASSERT_FALSE(loaded.has_value());
    EXPECT_EQ(loaded.status().code(), ErrorCode::unsupported);
    EXPECT_NE(loaded.status().message().find("node 'to_string' (#1) Cast: a cast to string of a value computed at run time"),
              std::string::npos) << loaded.status().message();
    Tensor x = Tensor::from_vector<double>(DType::f32, {3}, {0.1, -2, 3.25e-7});
    auto r = onnx::load_and_run(path, std::map<std::string, Tensor>{{"x", x}});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->values[0].tensor.to_f64(), (std::vector<double>{static_cast<float>(0.1), 0, static_cast<float>(3.25e-7)}));
  }
  {  // a string input: refused without its value; a string output only through load_and_run
    ModelProto m = base_model(13);
    add_input(m, "s", TensorProto::STRING, {1, 3});
    auto* n = add_node(m, "StringNormalizer", {"s"}, {"y"}, "normalize");
    auto* a = n->add_attribute();
    a->set_name("case_change_action");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s("UPPER");
    a = n->add_attribute();
    a->set_name("stopwords");
    a->set_type(::onnx::AttributeProto::STRINGS);
    a->add_strings("straße");
    add_output(m, "y");
    write_file(path, m.SerializeAsString());
    auto loaded = onnx::load(path);
    ASSERT_FALSE(loaded.has_value());
    EXPECT_NE(loaded.status().message().find("graph input 's' is a string tensor: rlx has no string dtype"), std::string::npos)
        << loaded.status().message();
    onnx::LoadOptions opts;
    const onnx::Value words = onnx::Value::of_strings({1, 3}, {"Straße", "größe", "ok"});
    opts.structured_inputs["s"] = words;
    loaded = onnx::load(path, opts);
    ASSERT_FALSE(loaded.has_value());
    EXPECT_NE(loaded.status().message().find("graph output 'y' is a string tensor"), std::string::npos) << loaded.status().message();
    auto r = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"s", words}});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->values[0].kind, onnx::Value::Kind::strings);
    EXPECT_EQ(r->values[0].string_sizes, (Sizes{1, 2}));  // the stopword matched without case
    EXPECT_EQ(r->values[0].strings, (std::vector<std::string>{"GRÖSSE", "OK"}));
    auto bad = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"s", onnx::Value::of_strings({2, 2}, {"a", "b", "c", "d"})}});
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), ErrorCode::shape_error);
    EXPECT_NE(bad.status().message().find("must be [C] or [1, C], got [2, 2]"), std::string::npos) << bad.status().message();
  }
  {  // a string that is not a number
    ModelProto m = base_model(13);
    add_input(m, "s", TensorProto::STRING, {2});
    add_attr_i(add_node(m, "Cast", {"s"}, {"y"}, "parse"), "to", TensorProto::INT64);
    add_output(m, "y");
    write_file(path, m.SerializeAsString());
    auto r = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"s", onnx::Value::of_strings({2}, {"-12", "7"})}});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->values[0].tensor.to_f64(), (std::vector<double>{-12, 7}));
    r = onnx::load_and_run(path, std::map<std::string, onnx::Value>{{"s", onnx::Value::of_strings({2}, {"3", "3.5"})}});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.status().message().find("node 'parse' (#0) Cast: the string '3.5' is not a i64"), std::string::npos)
        << r.status().message();
  }
  {  // a string tensor file round trip
    const onnx::Value v = onnx::Value::of_strings({2, 1}, {"a b", ""});
    ASSERT_TRUE(onnx::write_value_file(d.path + "/s.pb", v, onnx::ValueKind::tensor, "s").is_ok());
    auto r = onnx::read_value_file(d.path + "/s.pb", onnx::ValueKind::tensor);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->to_string(), "string[2, 1]");
    EXPECT_EQ(r->strings, v.strings);
  }
}

TEST(OnnxValues, ValueFilesRoundTrip) {
  TempDir d;
  Tensor a = Tensor::from_vector<double>(DType::f32, {2}, {1, -2});
  Tensor b = Tensor::from_vector<double>(DType::f32, {1, 3}, {3, 4, 5});
  struct Case {
    onnx::Value v;
    onnx::ValueKind kind;
  };
  for (const Case& c : {Case{onnx::Value::of(a), onnx::ValueKind::tensor},
                        Case{onnx::Value::sequence({a, b}, DType::f32), onnx::ValueKind::sequence},
                        Case{onnx::Value::sequence({}, DType::f32), onnx::ValueKind::sequence},
                        Case{onnx::Value::of(b), onnx::ValueKind::optional_tensor},
                        Case{onnx::Value::sequence({b}, DType::f32), onnx::ValueKind::optional_sequence},
                        Case{onnx::Value::none(DType::f32), onnx::ValueKind::optional_sequence}}) {
    const std::string file = d.path + "/v.pb";
    ASSERT_TRUE(onnx::write_value_file(file, c.v, c.kind, "v").is_ok()) << c.v.to_string();
    auto r = onnx::read_value_file(file, c.kind);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->to_string(), c.v.to_string());
    ASSERT_EQ(r->elements.size(), c.v.elements.size());
    for (size_t k = 0; k < c.v.elements.size(); ++k) {
      EXPECT_EQ(r->elements[k].sizes(), c.v.elements[k].sizes());
      EXPECT_EQ(r->elements[k].to_f64(), c.v.elements[k].to_f64());
    }
  }
  // an optional holding a tensor where the model declares an optional sequence
  ASSERT_TRUE(onnx::write_value_file(d.path + "/o.pb", onnx::Value::of(a), onnx::ValueKind::optional_tensor).is_ok());
  auto r = onnx::read_value_file(d.path + "/o.pb", onnx::ValueKind::optional_sequence);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::dtype_error);
  EXPECT_NE(r.status().message().find("o.pb: the optional holds a tensor"), std::string::npos) << r.status().message();
  write_file(d.path + "/bad.pb", "\x0a\xff\xff");
  r = onnx::read_value_file(d.path + "/bad.pb", onnx::ValueKind::sequence);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::format_error);
  EXPECT_NE(r.status().message().find("bad.pb: not a valid SequenceProto"), std::string::npos) << r.status().message();
}

TEST(OnnxCorrupt, Opset18ImportTimeTablesAreBounded) {
  {  // Col2Im whose pads would overflow the padded image's size
    ModelProto m = base_model(18);
    add_input(m, "x", TensorProto::FLOAT, {1, 4, 4});
    auto* im = m.mutable_graph()->add_initializer();
    im->set_name("image");
    im->set_data_type(TensorProto::INT64);
    im->add_dims(2);
    im->add_int64_data(3);
    im->add_int64_data(3);
    auto* bl = m.mutable_graph()->add_initializer();
    bl->set_name("block");
    bl->set_data_type(TensorProto::INT64);
    bl->add_dims(2);
    bl->add_int64_data(2);
    bl->add_int64_data(2);
    auto* at = add_node(m, "Col2Im", {"x", "image", "block"}, {"y"}, "col2im")->add_attribute();
    at->set_name("pads");
    at->set_type(::onnx::AttributeProto::INTS);
    for (int k = 0; k < 4; ++k) at->add_ints(int64_t{1} << 62);
    add_output(m, "y");
    expect_error("col2im_huge_pads", m, ErrorCode::invalid_argument, "pads in [0, 2^20]");
  }
  {  // an antialiased downscale whose window would be a million gathers
    ModelProto m = base_model(18);
    add_input(m, "x", TensorProto::FLOAT, {1, 1, 4, 4});
    auto* sc = m.mutable_graph()->add_initializer();
    sc->set_name("scales");
    sc->set_data_type(TensorProto::FLOAT);
    sc->add_dims(4);
    for (float v : {1.0f, 1.0f, 1e-6f, 1.0f}) sc->add_float_data(v);
    auto* n = add_node(m, "Resize", {"x", "", "scales"}, {"y"}, "resize");
    auto* a = n->add_attribute();
    a->set_name("mode");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s("linear");
    auto* aa = n->add_attribute();
    aa->set_name("antialias");
    aa->set_type(::onnx::AttributeProto::INT);
    aa->set_i(1);
    add_output(m, "y");
    expect_error("resize_antialias_tiny_scale", m, ErrorCode::unsupported, "windows over 1024 input pixels");
  }
}

TEST(OnnxCorrupt, TensorFileRoundTrip) {
  TempDir d;
  Tensor t = Tensor::from_vector<double>(DType::f32, {2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(onnx::write_tensor_file(d.path + "/t.pb", t, "x").is_ok());
  std::string name;
  auto r = onnx::read_tensor_file(d.path + "/t.pb", &name);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(name, "x");
  EXPECT_EQ(r->to_f64(), t.to_f64());
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

// TfIdfVectorizer's tables are checked against each other before anything is built from them.
TEST(OnnxCorrupt, TfIdfVectorizerTablesThatDoNotAgree) {
  auto model = [](std::vector<int64_t> counts, std::vector<int64_t> indexes, const char* mode, bool strings) {
    ModelProto m = base_model(9);
    add_input(m, "x", TensorProto::INT64, {2, 6});
    auto* n = add_node(m, "TfIdfVectorizer", {"x"}, {"y"}, "tfidf");
    auto ints = [&](const char* name, const std::vector<int64_t>& v) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(::onnx::AttributeProto::INTS);
      for (int64_t x : v) a->add_ints(x);
    };
    auto one = [&](const char* name, int64_t v) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(v);
    };
    one("min_gram_length", 1);
    one("max_gram_length", 2);
    one("max_skip_count", 0);
    auto* md = n->add_attribute();
    md->set_name("mode");
    md->set_type(::onnx::AttributeProto::STRING);
    md->set_s(mode);
    ints("ngram_counts", counts);
    ints("ngram_indexes", indexes);
    if (strings) {
      auto* a = n->add_attribute();
      a->set_name("pool_strings");
      a->set_type(::onnx::AttributeProto::STRINGS);
      a->add_strings("a");
    } else {
      ints("pool_int64s", {1, 2, 3, 4, 5});  // 1 unigram, 2 bigrams
    }
    add_output(m, "y");
    return m;
  };
  {  // the tables agreeing: it loads
    TempDir d;
    write_file(d.path + "/model.onnx", model({0, 1}, {0, 1, 2}, "TF", false).SerializeAsString());
    auto r = onnx::load(d.path + "/model.onnx");
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
  }
  expect_error("tfidf_split_bigram", model({0, 2}, {0, 1, 2}, "TF", false), ErrorCode::format_error,
               "node 'tfidf' (#0) TfIdfVectorizer: ngram_counts 1 gives pool items [2, 5) for 2-grams");
  expect_error("tfidf_indexes", model({0, 1}, {0, 1}, "TF", false), ErrorCode::format_error,
               "ngram_indexes has 2 entries for 3 pool n-grams");
  expect_error("tfidf_mode", model({0, 1}, {0, 1, 2}, "BM25", false), ErrorCode::format_error, "mode must be TF, IDF or TFIDF");
  expect_error("tfidf_strings", model({0, 1}, {0, 1, 2}, "TF", true), ErrorCode::unsupported, "pool_strings: string tensors");
}

}  // namespace
}  // namespace rlx

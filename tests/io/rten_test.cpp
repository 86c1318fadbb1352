// rten files (rlx/rten.h): the fixtures written by rten's own converter (../shared/fixtures/rten)
// run through rlx against ONNX Runtime's outputs and against their .onnx through rlx; files rlx
// writes read back (version 2, and version 1 built here); and corrupt files, each a clear
// error naming the file and what is wrong, never a crash.
// Set RLX_RTEN_WRITE_CORPUS=DIR to also write the small and corrupt cases to DIR (fuzz seeds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "rlx/compile.h"
#include "rlx/mapped_file.h"
#include "rlx/model_io.h"
#include "rlx/npy.h"
#include "rlx/onnx.h"
#include "rlx/rten.h"
#include "rten_generated.h"

namespace rlx {
namespace {

namespace fb = ::rlx::rtenfb;
namespace fs = std::filesystem;

// CI clones the repository beside ../shared; missing fixtures fail the tests (never skip).
const std::string kFixtures = RLX_RTEN_FIXTURES;

std::string read_bytes(const std::string& path) {
  auto b = read_regular_file(path, uint64_t{1} << 30);
  EXPECT_TRUE(b.has_value()) << path << ": " << b.status().to_string();
  return b ? *b : std::string();
}

void maybe_write_corpus(const std::string& name, const std::string& bytes) {
  if (const char* dir = std::getenv("RLX_RTEN_WRITE_CORPUS")) {
    std::ofstream f(std::string(dir) + "/" + name + ".rten", std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

struct Fixture {
  std::string model;                          // mlp, cnn, encoder
  std::vector<std::string> inputs;            // input names (NAME.npy beside the model)
  std::string output;                         // its expected output is OUTPUT.expected.npy
};
const std::vector<Fixture> kCases = {
    {"mlp", {"x"}, "probs"}, {"cnn", {"x"}, "logits"}, {"encoder", {"input_ids", "attention_mask"}, "embedding"}};

std::map<std::string, Tensor> fixture_inputs(const Fixture& f) {
  std::map<std::string, Tensor> in;
  for (const std::string& n : f.inputs) {
    auto t = read_npy(kFixtures + "/" + f.model + "." + n + ".npy");
    EXPECT_TRUE(t.has_value()) << t.status().to_string();
    if (t) in[n] = *t;
  }
  return in;
}

// Compiles the model for the cpu and runs it once, feeding the inputs by name.
std::vector<Tensor> run(const LoadedModel& m, const std::map<std::string, Tensor>& in) {
  std::vector<Tensor> feeds;
  for (ValueId v : m.graph.inputs) {
    auto it = in.find(m.graph.values[v].name);
    EXPECT_NE(it, in.end()) << "no value for input " << m.graph.values[v].name;
    if (it == in.end()) return {};
    feeds.push_back(it->second);
  }
  auto model = Model::compile(m.graph, {.device = "cpu"});
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  if (!model) return {};
  auto outs = (*model)->run(feeds);
  EXPECT_TRUE(outs.has_value()) << outs.status().to_string();
  return outs ? *outs : std::vector<Tensor>{};
}

onnx::LoadOptions options_for(const std::map<std::string, Tensor>& in) {
  onnx::LoadOptions o;
  o.input_values = in;
  return o;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<double> g = got.to_f64(), w = want.to_f64();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) / (1.0 + std::abs(w[i])));
  EXPECT_LE(worst, tol) << what;
}

TEST(RtenFixtures, FixturesArePresent) {
  for (const Fixture& f : kCases)
    EXPECT_TRUE(fs::exists(kFixtures + "/" + f.model + ".rten"))
        << kFixtures << "/" << f.model << ".rten is missing (the fixtures live in ../shared/fixtures/rten beside the repository)";
}

// Each file by rten's converter, run by rlx, matches ONNX Runtime's output and the .onnx through rlx.
TEST(RtenFixtures, MatchOnnxRuntimeAndTheOnnxFile) {
  for (const Fixture& f : kCases) {
    SCOPED_TRACE(f.model);
    const auto in = fixture_inputs(f);
    auto want = read_npy(kFixtures + "/" + f.model + "." + f.output + ".expected.npy");
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    auto m = rten::load(kFixtures + "/" + f.model + ".rten", options_for(in));
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    EXPECT_EQ(m->format, "rten (version 2)");
    auto outs = run(*m, in);
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(m->graph.values[m->graph.outputs[0]].name, f.output);
    expect_close(outs[0], *want, 1e-4, f.model + ".rten vs ONNX Runtime");
    auto o = onnx::load(kFixtures + "/" + f.model + ".onnx", options_for(in));
    ASSERT_TRUE(o.has_value()) << o.status().to_string();
    auto onnx_outs = run(*o, in);
    ASSERT_EQ(onnx_outs.size(), 1u);
    expect_close(outs[0], onnx_outs[0], 1e-5, f.model + ".rten vs .onnx through rlx");
  }
}

TEST(RtenFixtures, LoadModelDispatchesOnTheSuffixAndMagic) {
  auto m = load_model(kFixtures + "/mlp.rten");
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->format, "rten (version 2)");
  EXPECT_EQ(m->metadata["meta.onnx_hash"].size(), 64u);
  ASSERT_EQ(m->graph.inputs.size(), 1u);
  EXPECT_EQ(m->graph.values[m->graph.inputs[0]].name, "x");
  EXPECT_EQ(m->graph.type(m->graph.inputs[0]).to_string(), "f32[batch, 784]");
}

// load() hands the importer the weights as external data in the file itself, through the real
// path: a link to the file from another folder loads, and gives the same outputs as parse().
TEST(RtenFixtures, LoadThroughALinkMatchesParse) {
  const fs::path dir = fs::temp_directory_path() / "rlx_rten_test_link";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(kFixtures + "/mlp.rten", dir / "linked.rten");
  const auto in = fixture_inputs(kCases[0]);
  auto linked = rten::load((dir / "linked.rten").string(), options_for(in));
  ASSERT_TRUE(linked.has_value()) << linked.status().to_string();
  auto parsed = rten::parse(read_bytes(kFixtures + "/mlp.rten"), "mlp.rten", options_for(in));
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string();
  auto a = run(*linked, in), b = run(*parsed, in);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].to_f64(), b[0].to_f64());
  fs::remove_all(dir);
}

// rlx writes each .onnx as rten version 2; reading that back gives ONNX Runtime's outputs.
TEST(RtenWrite, RoundTripThroughOnnx) {
  for (const Fixture& f : kCases) {
    SCOPED_TRACE(f.model);
    const auto in = fixture_inputs(f);
    auto bytes = rten::from_onnx(read_bytes(kFixtures + "/" + f.model + ".onnx"), f.model + ".onnx");
    ASSERT_TRUE(bytes.has_value()) << bytes.status().to_string();
    ASSERT_GE(bytes->size(), 32u);
    EXPECT_EQ(bytes->substr(0, 4), "RTEN");
    uint64_t tensor_off;
    std::memcpy(&tensor_off, bytes->data() + 24, 8);
    EXPECT_EQ(tensor_off % 64, 0u);
    auto m = rten::parse(*bytes, f.model + ".rten", options_for(in));
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    auto outs = run(*m, in);
    ASSERT_EQ(outs.size(), 1u);
    auto want = read_npy(kFixtures + "/" + f.model + "." + f.output + ".expected.npy");
    ASSERT_TRUE(want.has_value());
    expect_close(outs[0], *want, 1e-4, "written " + f.model + ".rten");
    if (f.model == "cnn") maybe_write_corpus("written_cnn", *bytes);
  }
}

TEST(RtenWrite, ConvertFileAndRefusals) {
  const std::string out = (fs::temp_directory_path() / "rlx_rten_test_mlp.rten").string();
  ASSERT_TRUE(rten::convert_onnx_file(kFixtures + "/mlp.onnx", out).is_ok());
  auto m = load_model(out);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  fs::remove(out);
  auto bad = rten::from_onnx("not a protobuf \xff\xff\xff", "x.onnx");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("x.onnx"), std::string::npos);
}

// A small graph built here: y = relu(x + c), x f32[2, 3], c f32[3] = {1, 2, 3}. The knobs
// break it in one place each.
struct Small {
  int version = 2;
  bool inline_data = false;           // version 1 always keeps data inline
  uint64_t data_offset = 0;           // of c, in the tensor data segment (version 2)
  std::vector<uint32_t> shape = {3};  // of c
  bool both_dtypes_disagree = false;  // inline f32 data with dtype Int32
  int32_t add_rhs = 0;                // the Add's second input (node index)
  int op_code = -1;                   // overrides the Relu's operator code
  bool relu_gets_table = false;       // gives Relu an attribute table it does not take
  bool gemm_without_attrs = false;    // the Add becomes a Gemm with no attribute table
  uint64_t tensor_offset_shift = 0;   // moves the tensor data offset (misalignment)
};

std::string build_small(const Small& s) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  const std::vector<float> c = {1, 2, 3};
  flatbuffers::Offset<fb::ConstantNode> cn;
  const bool inl = s.inline_data || s.version == 1;
  auto shape = b.CreateVector(s.shape);
  if (inl) {
    auto data = fb::CreateFloatData(b, b.CreateVector(c));
    fb::ConstantNodeBuilder cb(b);
    cb.add_shape(shape);
    cb.add_data_type(fb::ConstantData::FloatData);
    cb.add_data(data.Union());
    cb.add_dtype(s.both_dtypes_disagree ? fb::ConstantDataType::Int32 : fb::ConstantDataType::Float32);
    cn = cb.Finish();
  } else {
    cn = fb::CreateConstantNode(b, shape, fb::ConstantData::NONE, 0, fb::ConstantDataType::Float32, s.data_offset);
  }
  nodes.push_back(fb::CreateNode(b, b.CreateString("c"), fb::NodeKind::ConstantNode, cn.Union()));
  auto dims = std::vector<flatbuffers::Offset<fb::Dim>>{fb::CreateDim(b, 2), fb::CreateDim(b, 3)};
  auto xv = fb::CreateValueNode(b, b.CreateVector(dims), fb::DataType::Float);
  nodes.push_back(fb::CreateNode(b, b.CreateString("x"), fb::NodeKind::ValueNode, xv.Union()));
  nodes.push_back(fb::CreateNode(b, b.CreateString("t"), fb::NodeKind::ValueNode, fb::CreateValueNode(b).Union()));
  nodes.push_back(fb::CreateNode(b, b.CreateString("y"), fb::NodeKind::ValueNode, fb::CreateValueNode(b).Union()));
  const fb::OperatorType first = s.gemm_without_attrs ? fb::OperatorType::Gemm : fb::OperatorType::Add;
  auto add = fb::CreateOperatorNode(b, first, fb::OperatorAttrs::NONE, 0, b.CreateVector(std::vector<int32_t>{1, s.add_rhs}),
                                    b.CreateVector(std::vector<int32_t>{2}));
  nodes.push_back(fb::CreateNode(b, b.CreateString("add"), fb::NodeKind::OperatorNode, add.Union()));
  flatbuffers::Offset<void> table;
  if (s.relu_gets_table) table = fb::CreateSoftmaxAttrs(b, 1).Union();
  auto relu = fb::CreateOperatorNode(b, s.op_code >= 0 ? static_cast<fb::OperatorType>(s.op_code) : fb::OperatorType::Relu,
                                     s.relu_gets_table ? fb::OperatorAttrs::SoftmaxAttrs : fb::OperatorAttrs::NONE, table,
                                     b.CreateVector(std::vector<int32_t>{2}), b.CreateVector(std::vector<int32_t>{3}));
  nodes.push_back(fb::CreateNode(b, b.CreateString("relu"), fb::NodeKind::OperatorNode, relu.Union()));
  auto g = fb::CreateGraph(b, b.CreateVector(nodes), b.CreateVector(std::vector<uint32_t>{1}),
                           b.CreateVector(std::vector<uint32_t>{3}));
  auto model = fb::CreateModel(b, 1, g);
  if (s.version == 1) {
    b.Finish(model, "RTEN");
    return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  }
  b.Finish(model);
  const uint64_t len = b.GetSize();
  const uint64_t toff = (32 + len + 63) / 64 * 64 + s.tensor_offset_shift;
  std::string f(toff, '\0');
  std::memcpy(f.data(), "RTEN", 4);
  const uint32_t v = 2;
  const uint64_t h[3] = {32, len, toff};
  std::memcpy(f.data() + 4, &v, 4);
  std::memcpy(f.data() + 8, h, 24);
  std::memcpy(f.data() + 32, b.GetBufferPointer(), len);
  f.append(reinterpret_cast<const char*>(c.data()), 12);
  return f;
}

void expect_small_runs(const std::string& bytes, const std::string& what) {
  auto m = rten::parse(bytes, "small.rten");
  ASSERT_TRUE(m.has_value()) << what << ": " << m.status().to_string();
  const Tensor x = Tensor::from_vector(DType::f32, {2, 3}, std::vector<double>{-5, 0, 1, -1, -2, 4});
  auto outs = run(*m, {{"x", x}});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].to_f64(), (std::vector<double>{0, 2, 4, 0, 0, 7})) << what;
}

TEST(RtenRead, SmallModelsOfBothVersions) {
  expect_small_runs(build_small({}), "version 2, data in the segment");
  expect_small_runs(build_small({.inline_data = true}), "version 2, inline data");
  expect_small_runs(build_small({.version = 1}), "version 1");
  maybe_write_corpus("small_v2", build_small({}));
  maybe_write_corpus("small_v1", build_small({.version = 1}));
}

void expect_error(const std::string& case_name, const std::string& bytes, ErrorCode code, const std::string& needle) {
  maybe_write_corpus(case_name, bytes);
  auto r = rten::parse(bytes, "bad.rten");
  ASSERT_FALSE(r.has_value()) << case_name << ": loaded although corrupt";
  EXPECT_EQ(r.status().code(), code) << case_name << ": " << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << case_name << ": message lacks '" << needle << "': " << r.status().message();
  EXPECT_NE(r.status().message().find("bad.rten"), std::string::npos)
      << case_name << ": message does not name the file: " << r.status().message();
}

void put64(std::string& f, size_t at, uint64_t v) { std::memcpy(f.data() + at, &v, 8); }

TEST(RtenCorrupt, Header) {
  const std::string good = build_small({});
  expect_error("truncated_header", good.substr(0, 20), ErrorCode::format_error, "truncated header");
  expect_error("tiny", "RT", ErrorCode::format_error, "too short");
  std::string f = good;
  f[0] = 'X';
  expect_error("bad_magic", f, ErrorCode::format_error, "not an rten file");
  f = good;
  f[4] = 3;
  expect_error("version_3", f, ErrorCode::unsupported, "version 3");
  f = good;
  put64(f, 8, 1u << 20);
  expect_error("model_offset_past_end", f, ErrorCode::format_error, "model data offset");
  f = good;
  put64(f, 8, 8);
  expect_error("model_offset_in_header", f, ErrorCode::format_error, "model data offset");
  f = good;
  put64(f, 16, ~uint64_t{0} - 8);  // offset + length overflows
  expect_error("model_length_lies", f, ErrorCode::format_error, "runs past the end of the file");
  f = good;
  put64(f, 24, f.size() + 64);
  expect_error("tensor_offset_past_end", f, ErrorCode::format_error, "tensor data offset");
  expect_error("tensor_offset_misaligned", build_small({.tensor_offset_shift = 4}), ErrorCode::format_error,
               "not a multiple of 64");
}

TEST(RtenCorrupt, ModelBuffer) {
  std::string f = build_small({});
  for (size_t i = 32; i < 48; ++i) f[i] = static_cast<char>(0xff);
  expect_error("bad_flatbuffer", f, ErrorCode::format_error, "not a valid rten FlatBuffers buffer");
  std::string v1 = build_small({.version = 1});
  v1.resize(v1.size() / 2);
  expect_error("truncated_v1", v1, ErrorCode::format_error, "not an rten file");
  // the model data moved to an odd offset still verifies (it is copied to an aligned buffer)
  const std::string g = build_small({});
  uint64_t len;
  std::memcpy(&len, g.data() + 16, 8);
  std::string moved = g.substr(0, 32) + "x" + g.substr(32, len);
  const uint64_t toff = (33 + len + 63) / 64 * 64;
  moved.resize(toff, '\0');
  const float c[3] = {1, 2, 3};
  moved.append(reinterpret_cast<const char*>(c), 12);
  put64(moved, 8, 33);
  put64(moved, 24, toff);
  expect_small_runs(moved, "model data at offset 33");
}

TEST(RtenCorrupt, Tensors) {
  expect_error("data_past_segment", build_small({.data_offset = 64}), ErrorCode::format_error,
               "runs past the end of the tensor data segment");
  expect_error("data_offset_huge", build_small({.data_offset = ~uint64_t{0} - 7}), ErrorCode::format_error,
               "runs past the end of the tensor data segment");
  expect_error("shape_lies", build_small({.shape = {300}}), ErrorCode::format_error, "runs past the end");
  expect_error("shape_overflows", build_small({.shape = {0xffffffffu, 0xffffffffu, 0xffffffffu}}),
               ErrorCode::format_error, "more than 2^40 elements");
  expect_error("inline_count_lies", build_small({.inline_data = true, .shape = {4}}), ErrorCode::format_error,
               "its inline data 3");
  expect_error("dtype_disagrees", build_small({.inline_data = true, .both_dtypes_disagree = true}),
               ErrorCode::format_error, "disagrees with its inline data");
  expect_error("misaligned_tensor", build_small({.data_offset = 2}), ErrorCode::format_error, "not aligned");
  std::string f = build_small({});
  expect_error("truncated_tensor_data", f.substr(0, f.size() - 4), ErrorCode::format_error,
               "runs past the end of the tensor data segment");
}

TEST(RtenCorrupt, Operators) {
  expect_error("node_index_out_of_range", build_small({.add_rhs = 99}), ErrorCode::format_error, "node index 99");
  expect_error("input_is_an_operator", build_small({.add_rhs = 4}), ErrorCode::format_error, "is an operator");
  expect_error("unknown_operator_code", build_small({.op_code = 250}), ErrorCode::unsupported, "unknown operator code 250");
  expect_error("refused_operator", build_small({.op_code = static_cast<int>(fb::OperatorType::Loop)}),
               ErrorCode::unsupported, "does not read");
  expect_error("wrong_attr_table", build_small({.relu_gets_table = true}), ErrorCode::format_error,
               "the operator takes none");
  expect_error("missing_attr_table", build_small({.gemm_without_attrs = true}), ErrorCode::format_error,
               "no attribute table");
}

// Every truncation of a real file and random byte changes in its model data: errors or a
// loaded model, never a crash (the sanitized build checks the memory accesses).
TEST(RtenCorrupt, TruncationsAndMutationsNeverCrash) {
  const std::string good = read_bytes(kFixtures + "/cnn.rten");
  ASSERT_FALSE(good.empty());
  for (size_t n = 0; n < good.size(); n += (n < 4096 ? 7 : 211)) {
    auto r = rten::parse(good.substr(0, n), "cut.rten");
    if (!r) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  uint64_t model_len;
  std::memcpy(&model_len, good.data() + 16, 8);
  std::mt19937 rng(7);
  for (int k = 0; k < 300; ++k) {
    std::string f = good;
    for (int j = 0; j < 1 + k % 4; ++j) f[32 + rng() % model_len] = static_cast<char>(rng());
    auto r = rten::parse(f, "mutated.rten");
    if (!r) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

}  // namespace
}  // namespace rlx

// GGUF reading and writing: round trips (versions 2 and 3, every metadata type, nested arrays,
// several alignments, typed and block tensors), the typed accessors, zero-copy views, the model
// loader, and an independent reader (@huggingface/gguf under node) on files we write -- and our
// reader on a file that package writes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kernels/ggml_quants.h"
#include "npm_peers.h"
#include "rlx/gguf.h"
#include "rlx/mapped_file.h"
#include "rlx/model_io.h"
#include "rlx/safetensors.h"

namespace rlx::gguf {
namespace {

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return cat(dir ? dir : "/tmp", "/rlx_gguf_", ::getpid(), "_", name);
}

// Every metadata type, as scalars and arrays, plus nested and empty arrays.
std::vector<KeyValue> all_types_metadata() {
  std::vector<KeyValue> md;
  auto add = [&](std::string k, Value v) { md.push_back(KeyValue{std::move(k), std::move(v), 0}); };
  add("general.architecture", Value::string("llama"));
  add("general.name", Value::string("t\xc3\xa9st model \"quoted\"\n"));
  add("t.u8", Value::u8(250));
  add("t.i8", Value::i8(-120));
  add("t.u16", Value::u16(65000));
  add("t.i16", Value::i16(-32000));
  add("t.u32", Value::u32(4000000000u));
  add("t.i32", Value::i32(-2000000000));
  add("t.u64", Value::u64(18446744073709551615ull));
  add("t.i64", Value::i64(-9000000000000000000ll));
  add("t.f32", Value::f32(1e-6f));
  add("t.f64", Value::f64(-2.718281828459045));
  add("t.bool", Value::boolean(true));
  add("t.empty_string", Value::string(""));
  add("a.u8", Value::array(std::vector<uint8_t>{0, 1, 255}));
  add("a.i8", Value::array(std::vector<int8_t>{-128, 0, 127}));
  add("a.u16", Value::array(std::vector<uint16_t>{1, 65535}));
  add("a.i16", Value::array(std::vector<int16_t>{-32768, 32767}));
  add("a.u32", Value::array(std::vector<uint32_t>{7, 4294967295u}));
  add("a.i32", Value::array(std::vector<int32_t>{-1, 2, -3}));
  add("a.u64", Value::array(std::vector<uint64_t>{1, 18446744073709551615ull}));
  add("a.i64", Value::array(std::vector<int64_t>{-5, 5}));
  add("a.f32", Value::array(std::vector<float>{0.5f, -1.25f, 3e38f}));
  add("a.f64", Value::array(std::vector<double>{1e-300, -0.0}));
  add("a.bool", Value::array(std::vector<bool>{true, false, true}));
  add("a.string", Value::array(std::vector<std::string>{"<unk>", "", "\xe2\x96\x81the"}));
  add("a.empty", Value::array(std::vector<int32_t>{}));
  add("a.nested", Value::array_of_arrays({Value::array(std::vector<int32_t>{1, 2}), Value::array(std::vector<int32_t>{})}));
  add("a.nested_strings", Value::array_of_arrays({Value::array(std::vector<std::string>{"a", "b"})}));
  add("a.deep", Value::array_of_arrays({Value::array_of_arrays(
                    {Value::array_of_arrays({Value::array(std::vector<float>{1.f, 2.f})})})}));  // 4 levels
  std::vector<std::string> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back(cat("tok", i));
  add("tokenizer.ggml.tokens", Value::array(tokens));
  return md;
}

Tensor f32_tensor(Sizes s, float base) {
  Tensor t = Tensor::zeros(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + 0.25f * static_cast<float>(i);
  return t;
}

Tensor quantized(quant::QType q, int64_t rows, int64_t cols) {
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const int64_t rb = *quant::row_bytes(q, cols);
  Tensor t = Tensor::zeros(DType::u8, {rows, rb});
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_TRUE(quant::quantize_row(q, x.data() + r * cols, t.bytes() + r * rb, cols).is_ok());
  return t;
}

std::vector<TensorToWrite> sample_tensors() {
  std::vector<TensorToWrite> ts;
  ts.push_back({"token_embd.weight", GgmlType::f32, {6, 4}, f32_tensor({4, 6}, 1.f)});
  Tensor h = Tensor::zeros(DType::f16, {3, 5});
  for (int64_t i = 0; i < h.numel(); ++i) h.set_f64(i, 0.5 * static_cast<double>(i));
  ts.push_back({"blk.0.attn_norm.weight", GgmlType::f16, {5, 3}, h});
  ts.push_back({"blk.0.attn_q.weight", GgmlType::q8_0, {64, 3}, quantized(quant::QType::q8_0, 3, 64)});
  ts.push_back({"blk.0.ffn_up.weight", GgmlType::q4_k, {512, 2}, quantized(quant::QType::q4_k, 2, 512)});
  Tensor i32 = Tensor::zeros(DType::i32, {7});
  for (int64_t i = 0; i < 7; ++i) i32.data<int32_t>()[i] = static_cast<int32_t>(i * i - 10);
  ts.push_back({"positions", GgmlType::i32, {7}, i32});
  Tensor b = Tensor::zeros(DType::bf16, {2, 2, 2});
  for (int64_t i = 0; i < 8; ++i) b.set_f64(i, -1.5 * static_cast<double>(i));
  ts.push_back({"blk.0.conv", GgmlType::bf16, {2, 2, 2}, b});
  ts.push_back({"q6", GgmlType::q6_k, {256, 1, 1, 2}, *quantized(quant::QType::q6_k, 2, 256).reshaped({2, 1, 1, 210})});
  return ts;
}

void expect_same_bytes(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.bytes(), b.bytes(), a.nbytes()), 0);
}

class GgufRoundTrip : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t>> {};

TEST_P(GgufRoundTrip, EveryTypeAndTensor) {
  const auto [version, alignment] = GetParam();
  const std::vector<KeyValue> md = all_types_metadata();
  const std::vector<TensorToWrite> ts = sample_tensors();
  const std::string path = temp_path(cat("rt_", version, "_", alignment, ".gguf"));
  ASSERT_TRUE(save(path, md, ts, WriteOptions{version, alignment}).is_ok());
  // the in-memory writer produces the same bytes
  auto bytes = serialize(md, ts, WriteOptions{version, alignment});
  ASSERT_TRUE(bytes.has_value()) << bytes.status().to_string();
  auto mapped = map_file(path);
  ASSERT_TRUE(mapped.has_value());
  ASSERT_EQ((*mapped)->size(), bytes->size());
  EXPECT_EQ(std::memcmp((*mapped)->data(), bytes->data(), bytes->size()), 0);

  auto f = load(path);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(f->version, version);
  EXPECT_EQ(f->alignment, alignment);
  EXPECT_EQ(f->data_offset % alignment, 0u);
  // metadata: same keys, order and values (plus general.alignment when not the default)
  const size_t extra = alignment != kDefaultAlignment ? 1 : 0;
  ASSERT_EQ(f->metadata.size(), md.size() + extra);
  for (size_t i = 0; i < md.size(); ++i) {
    EXPECT_EQ(f->metadata[i].key, md[i].key);
    EXPECT_TRUE(f->metadata[i].value == md[i].value) << md[i].key << ": " << f->metadata[i].value.to_string();
  }
  if (extra) EXPECT_EQ(*f->get_uint("general.alignment"), alignment);
  // tensors: infos, bytes, and views
  ASSERT_EQ(f->tensors.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo& ti = f->tensors[i];
    SCOPED_TRACE(ti.name);
    EXPECT_EQ(ti.name, ts[i].name);
    EXPECT_EQ(ti.ne, ts[i].ne);
    EXPECT_EQ(ti.type, ts[i].type);
    EXPECT_EQ(ti.offset % alignment, 0u);
    auto t = f->tensor(ti);
    ASSERT_TRUE(t.has_value()) << t.status().to_string();
    EXPECT_EQ(t->sizes(), ts[i].data.sizes()) << sizes_to_string(t->sizes());
    EXPECT_EQ(t->dtype(), ts[i].data.dtype());
    expect_same_bytes(*t, ts[i].data);
    if (alignment >= 8) EXPECT_EQ(t->storage(), f->storage) << "a view of the mapping, not a copy";
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufRoundTrip,
                         ::testing::Combine(::testing::Values(2u, 3u), ::testing::Values(32u, 64u, 8u, 1u)),
                         [](const auto& info) {
                           return cat("v", std::get<0>(info.param), "_align", std::get<1>(info.param));
                         });

TEST(Gguf, TypedAccessors) {
  auto bytes = serialize(all_types_metadata(), {});
  ASSERT_TRUE(bytes.has_value());
  auto storage = allocate_storage(bytes->size());
  std::memcpy(storage->data(), bytes->data(), bytes->size());
  auto f = parse(storage, "mem.gguf");
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_int("t.u8"), 250);
  EXPECT_EQ(*f->get_int("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(*f->get_uint("t.u64"), 18446744073709551615ull);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("t.f32")), 1e-6f);
  EXPECT_EQ(*f->get_bool("t.bool"), true);
  EXPECT_EQ(*f->get_array<int64_t>("a.i32"), (std::vector<int64_t>{-1, 2, -3}));
  EXPECT_EQ(*f->get_array<int8_t>("a.i8"), (std::vector<int8_t>{-128, 0, 127}));
  EXPECT_EQ(*f->get_array<std::string>("a.string"), (std::vector<std::string>{"<unk>", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(*f->get_array<bool>("a.bool"), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(*f->get_array<double>("a.f32"), (std::vector<double>{0.5, -1.25, static_cast<double>(3e38f)}));
  EXPECT_EQ(f->get_array<std::string>("tokenizer.ggml.tokens")->size(), 1000u);

  auto expect_error = [&](const Status& s, const std::string& part) {
    EXPECT_EQ(s.code(), ErrorCode::format_error) << s.to_string();
    EXPECT_NE(s.message().find("mem.gguf"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  };
  expect_error(f->get_int("missing.key").status(), "no metadata key 'missing.key'");
  expect_error(f->get_int("general.architecture").status(), "key 'general.architecture' at offset");
  expect_error(f->get_int("general.architecture").status(), "is string, expected an integer");
  expect_error(f->get_int("t.u64").status(), "does not fit in int64");
  expect_error(f->get_uint("t.i8").status(), "negative");
  expect_error(f->get_string("t.u8").status(), "expected string");
  expect_error(f->get_float("t.i32").status(), "expected f32 or f64");
  expect_error(f->get_bool("t.u8").status(), "expected bool");
  expect_error(f->get_array<uint8_t>("a.i8").status(), "does not fit");
  expect_error(f->get_array<int32_t>("a.u64").status(), "does not fit");
  expect_error(f->get_array<float>("a.f64").status(), "expected f32");
  expect_error(f->get_array<std::string>("a.i32").status(), "expected strings");
  expect_error(f->get_array<int32_t>("t.i32").status(), "expected an array");
  expect_error(f->get_array<int32_t>("a.f32").status(), "expected integers");
  // element access on values
  const Value& v = f->find("a.i32")->value;
  EXPECT_EQ(*v.int_at(2), -3);
  EXPECT_FALSE(v.int_at(3).has_value());
  EXPECT_FALSE(v.string_at(0).has_value());
}

TEST(Gguf, ValueText) {
  EXPECT_EQ(Value::f32(1e-6f).to_string(), "1e-06");
  EXPECT_EQ(Value::u64(18446744073709551615ull).to_string(), "18446744073709551615");
  EXPECT_EQ(Value::boolean(false).to_string(), "false");
  EXPECT_EQ(Value::array(std::vector<int32_t>{1, -2, 3}).to_string(), "[1, -2, 3]");
  EXPECT_EQ(Value::array(std::vector<std::string>(32000, "x")).to_string(), "[32000 strings]");
  EXPECT_EQ(Value::array(std::vector<int32_t>(151936, 0)).to_string(), "[151936 i32]");
  EXPECT_EQ(Value::array_of_arrays({Value::array(std::vector<int32_t>{})}).to_string(), "[1 array]");
}

TEST(Gguf, WriterRejectsWhatTheReaderWould) {
  auto t = f32_tensor({2, 3}, 0.f);
  auto fails = [](const std::vector<KeyValue>& md, const std::vector<TensorToWrite>& ts, const std::string& part,
                  WriteOptions o = {}) {
    auto r = serialize(md, ts, o);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
  };
  fails({{"a", Value::u8(1), 0}, {"a", Value::u8(2), 0}}, {}, "duplicate key");
  fails({{"", Value::u8(1), 0}}, {}, "empty metadata key");
  fails({{"general.alignment", Value::u64(32), 0}}, {}, "must be u32");
  fails({}, {}, "not a power of two", WriteOptions{3, 48});
  fails({}, {}, "versions 2 and 3", WriteOptions{1, 32});
  fails({}, {{"w", GgmlType::f32, {3, 2}, t}, {"w", GgmlType::f32, {3, 2}, t}}, "duplicate tensor name");
  fails({}, {{"w", GgmlType::f32, {3, 0}, t}}, "dim 0 < 1");
  fails({}, {{"w", GgmlType::f32, {1, 1, 1, 3, 2}, t}}, "at most 4");
  fails({}, {{"w", GgmlType::f32, {2, 3}, f32_tensor({2, 2}, 0.f)}}, "takes 24 bytes, the data has 16");
  fails({}, {{"w", GgmlType::q8_0, {31, 1}, Tensor::zeros(DType::u8, {1, 34})}}, "not a multiple");
  fails({}, {{"w", GgmlType::f16, {3, 2}, t}}, "cannot be stored as f16");
  Value deep = Value::array(std::vector<int32_t>{1});
  for (int i = 0; i < kMaxArrayDepth; ++i) deep = Value::array_of_arrays({deep});
  fails({{"deep", deep, 0}}, {}, "nest more than");
}

TEST(Gguf, ModelLoaderConventions) {
  const std::string path = temp_path("model.gguf");
  ASSERT_TRUE(save(path, all_types_metadata(), sample_tensors()).is_ok());
  auto m = load_model(path);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->format, "gguf");
  EXPECT_EQ(m->metadata.at("gguf.version"), "3");
  EXPECT_EQ(m->metadata.at("general.architecture"), "llama");
  EXPECT_EQ(m->metadata.at("tokenizer.ggml.tokens"), "[1000 strings]");
  EXPECT_EQ(m->metadata.at("t.u64"), "18446744073709551615");
  EXPECT_EQ(m->metadata.at("rlx.tensor_format.blk.0.ffn_up.weight"), "q4_k");
  EXPECT_EQ(m->metadata.at("rlx.tensor_format.blk.0.attn_q.weight"), "q8_0");
  EXPECT_EQ(m->metadata.count("rlx.tensor_format.token_embd.weight"), 0u);
  const Tensor& q = m->graph.weights.at("blk.0.ffn_up.weight");
  EXPECT_EQ(q.dtype(), DType::u8);
  EXPECT_EQ(q.sizes(), (Sizes{2, 2 * 144}));
  const Tensor& e = m->graph.weights.at("token_embd.weight");
  EXPECT_EQ(e.dtype(), DType::f32);
  EXPECT_EQ(e.sizes(), (Sizes{4, 6}));
  EXPECT_EQ(e.data<float>()[5], 1.f + 0.25f * 5);
  // the f16 tensor as the raw rows the f16 qmatmul format takes
  auto f = load(path);
  ASSERT_TRUE(f.has_value());
  auto raw = f->tensor_blocks(*f->find_tensor("blk.0.attn_norm.weight"));
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->sizes(), (Sizes{3, 10}));
  std::remove(path.c_str());
}

// ---- the independent reader: @huggingface/gguf under node ----

std::string run(const std::string& cmd, int* status) {
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// The folder holding node_modules/@huggingface/gguf, or "" with the reason in `why`.
std::string npm_dir(std::string* why) { return test_peers::find_npm_package("@huggingface/gguf", why); }

std::string js_path() { return std::string(RLX_SOURCE_DIR) + "/tests/io/gguf_peer.cjs"; }

TEST(GgufPeer, HuggingFaceReaderReadsOurFiles) {
  std::string why;
  const std::string dir = npm_dir(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  for (uint32_t version : {2u, 3u}) {
    SCOPED_TRACE(cat("version ", version));
    const std::vector<KeyValue> md = all_types_metadata();
    const std::vector<TensorToWrite> ts = sample_tensors();
    const std::string path = temp_path(cat("peer_", version, ".gguf"));
    ASSERT_TRUE(save(path, md, ts, WriteOptions{version, 64}).is_ok());
    int status = 0;
    const std::string out = run(cat("NODE_PATH='", dir, "/node_modules' node '", js_path(), "' read '", path, "' 2>&1"), &status);
    ASSERT_EQ(status, 0) << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j["version"], version);
    ASSERT_EQ(j["tensors"].size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(j["tensors"][i]["name"], ts[i].name);
      EXPECT_EQ(j["tensors"][i]["type"], static_cast<uint32_t>(ts[i].type));
      std::vector<int64_t> shape;
      for (const auto& d : j["tensors"][i]["shape"]) shape.push_back(std::stoll(d.get<std::string>()));
      EXPECT_EQ(shape, ts[i].ne) << ts[i].name;
    }
    // every key with its type tag and value, as the peer saw them
    const auto& kv = j["metadata"];
    EXPECT_EQ(kv.size(), md.size() + 1);  // + general.alignment
    EXPECT_EQ(kv["general.alignment"]["value"], "64");
    for (const KeyValue& e : md) {
      SCOPED_TRACE(e.key);
      ASSERT_TRUE(kv.contains(e.key));
      EXPECT_EQ(kv[e.key]["type"], static_cast<uint32_t>(e.value.type()));
      const auto& v = kv[e.key]["value"];
      if (e.value.type() == ValueType::string) {
        EXPECT_EQ(v, *e.value.as_string());
      } else if (e.value.type() != ValueType::array) {
        if (e.value.type() == ValueType::f32 || e.value.type() == ValueType::f64) {
          EXPECT_EQ(std::stod(v.get<std::string>()), *e.value.as_float());
        } else if (e.value.type() == ValueType::boolean) {
          EXPECT_EQ(v, *e.value.as_bool() ? "true" : "false");
        } else {
          EXPECT_EQ(v, e.value.to_string());
        }
      } else {
        EXPECT_EQ(kv[e.key]["subType"], static_cast<uint32_t>(e.value.elem_type()));
        ASSERT_EQ(v.size(), e.value.size());
        if (e.value.elem_type() == ValueType::string) {
          for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], e.value.strings()[i]);
        } else if (is_integer(e.value.elem_type())) {
          for (size_t i = 0; i < v.size(); ++i) {
            if (e.value.elem_type() == ValueType::u64) continue;  // exceeds int64 in the text form
            EXPECT_EQ(std::stoll(v[i].get<std::string>()), *e.value.int_at(i));
          }
        } else if (e.value.elem_type() == ValueType::array) {
          EXPECT_EQ(v.dump().find("["), 0u);
        }
      }
    }
    std::remove(path.c_str());
  }
}

TEST(GgufPeer, OurReaderReadsHuggingFaceHeaders) {
  std::string why;
  const std::string dir = npm_dir(&why);
  if (dir.empty()) GTEST_SKIP() << why;
  // @huggingface/gguf writes headers (metadata, no tensor infos: serializeGgufMetadata), so this
  // direction covers metadata only; tensor infos and data have no writer in the package.
  const std::string path = temp_path("from_peer.gguf");
  int status = 0;
  const std::string out = run(cat("NODE_PATH='", dir, "/node_modules' node '", js_path(), "' write '", path, "' 2>&1"), &status);
  ASSERT_EQ(status, 0) << out;
  auto f = load(path);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(f->version, 3u);
  EXPECT_TRUE(f->tensors.empty());
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_uint("llama.context_length"), 4096u);
  EXPECT_EQ(*f->get_int("t.i8"), -7);
  EXPECT_EQ(*f->get_int("t.i64"), -1234567890123ll);
  EXPECT_EQ(*f->get_uint("t.u64"), 1234567890123ull);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("t.f32")), 0.25f);
  EXPECT_EQ(*f->get_float("t.f64"), 1.5);
  EXPECT_EQ(*f->get_bool("t.bool"), true);
  EXPECT_EQ(*f->get_array<std::string>("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "</s>", "hello"}));
  EXPECT_EQ(*f->get_array<float>("tokenizer.ggml.scores"), (std::vector<float>{0.f, -1.f, -2.5f}));
  EXPECT_EQ(*f->get_array<int32_t>("tokenizer.ggml.token_type"), (std::vector<int32_t>{3, 3, 1}));
  std::remove(path.c_str());
}

// `rlx convert` both ways (runs the program built next to the tests).
TEST(GgufConvert, SafetensorsToQuantizedGgufAndBack) {
  const std::string rlx = std::string(RLX_BINARY_DIR) + "/bin/rlx";
  if (!exists(rlx)) GTEST_SKIP() << "the rlx program is not built (" << rlx << ")";
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> g(0.f, 1.f);
  auto randn = [&](DType dt, Sizes s) {
    Tensor t = Tensor::zeros(dt, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, g(rng));
    return t;
  };
  Tensor ids = Tensor::zeros(DType::i32, {5});
  for (int i = 0; i < 5; ++i) ids.data<int32_t>()[i] = i;
  const std::vector<std::pair<std::string, Tensor>> src = {
      {"w1", randn(DType::f32, {64, 256})}, {"w2", randn(DType::f16, {32, 512})}, {"bias", randn(DType::f32, {64})},
      {"odd", randn(DType::f32, {8, 100})}, {"ids", ids}};
  const std::string st = temp_path("conv.safetensors"), gg = temp_path("conv.gguf"), back = temp_path("back.safetensors");
  ASSERT_TRUE(safetensors::save(st, src, {{"note", "hello"}}).is_ok());
  int status = 0;
  std::string out = run(cat("'", rlx, "' convert '", st, "' '", gg, "' --quant Q4_K 2>&1"), &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("2 quantized to q4_k, 3 kept"), std::string::npos) << out;
  EXPECT_NE(out.find("rows of 100 values are not a multiple of the q4_k block (256)"), std::string::npos) << out;
  auto f = load(gg);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(f->find_tensor("w1")->type, GgmlType::q4_k);
  EXPECT_EQ(f->find_tensor("w1")->ne, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(f->find_tensor("w2")->type, GgmlType::q4_k);
  EXPECT_EQ(f->find_tensor("bias")->type, GgmlType::f32);
  EXPECT_EQ(f->find_tensor("odd")->type, GgmlType::f32);
  EXPECT_EQ(f->find_tensor("ids")->type, GgmlType::i32);
  EXPECT_EQ(*f->get_string("note"), "hello");
  // back to safetensors: the q4_k tensors come back as f32 within q4_k's error
  out = run(cat("'", rlx, "' convert '", gg, "' '", back, "' 2>&1"), &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("2 dequantized to f32"), std::string::npos) << out;
  auto b = safetensors::load(back);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  for (const auto& [name, t] : src) {
    SCOPED_TRACE(name);
    const Tensor& r = b->tensors.at(name);
    ASSERT_EQ(r.sizes(), t.sizes());
    double se = 0, sx = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      se += (r.get_f64(i) - t.get_f64(i)) * (r.get_f64(i) - t.get_f64(i));
      sx += t.get_f64(i) * t.get_f64(i);
    }
    const bool quantized = name == "w1" || name == "w2";
    EXPECT_LT(std::sqrt(se / sx), quantized ? 0.09 : 1e-7);
    if (quantized) EXPECT_GT(std::sqrt(se / sx), 0.01);
  }
  // bad requests
  out = run(cat("'", rlx, "' convert '", gg, "' '", back, "' --quant q4_k 2>&1"), &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("safetensors has no block formats"), std::string::npos) << out;
  out = run(cat("'", rlx, "' convert '", st, "' '", gg, "' --quant iq4_xs 2>&1"), &status);
  EXPECT_NE(status, 0);
  for (const std::string& p : {st, gg, back}) std::remove(p.c_str());
}

}  // namespace
}  // namespace rlx::gguf

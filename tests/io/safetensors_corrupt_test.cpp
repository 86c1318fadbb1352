// Hand-made corrupt safetensors files and sharded indexes, each built as bytes here: every one
// must be refused with ErrorCode::format_error and a message that names the file and says what
// is wrong. Plus a quick deterministic mutation run (the libFuzzer target goes further).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "rlx/safetensors.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
  return s;
}
std::string st_bytes(std::string_view header, size_t data_len, char fill = '\0') {
  return le64(header.size()) + std::string(header) + std::string(data_len, fill);
}

Expected<safetensors::File> parse_bytes(const std::string& b) {
  auto st = allocate_storage(b.size());
  if (!b.empty()) std::memcpy(st->data(), b.data(), b.size());
  return safetensors::parse(st, "corrupt.safetensors");
}

struct Case {
  const char* what;
  std::string bytes;
  const char* phrase;
  ErrorCode code = ErrorCode::format_error;
};

std::string ones(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i ? ",1" : "1";
  return s;
}

// A header holding one tensor "t" with these fields.
std::string one(const std::string& fields) { return R"({"t":{)" + fields + "}}"; }

std::vector<Case> corrupt_files() {
  const std::string u8_4 = R"("dtype":"U8","shape":[4],"data_offsets":[0,4])";
  return {
      {"empty file", "", "shorter than the 8-byte header length"},
      {"five bytes", std::string("\x08\0\0\0\0", 5), "shorter than the 8-byte header length"},
      {"header past EOF", le64(100) + "{}", "runs past the end of the file"},
      {"header length 2^64-1", le64(~0ull) + "{}", "over the limit of 100000000 bytes"},
      {"header over 100 MB", le64(100'000'001) + "{}", "over the limit"},
      {"empty header", le64(0), "the header is empty"},
      {"spaces only", st_bytes("        ", 0), "the header is empty"},
      {"not JSON", st_bytes("{abc}", 0), "is not valid JSON"},
      {"truncated JSON", st_bytes(R"({"t":{"dtype":)", 0), "is not valid JSON"},
      {"JSON array", st_bytes("[]", 0), "not a JSON object"},
      {"JSON string", st_bytes("\"x\"", 0), "not a JSON object"},
      {"UTF-8 BOM", st_bytes("\xef\xbb\xbf{}", 0), "not a JSON object"},
      {"invalid UTF-8", st_bytes("{\"t\xff\":1}", 0), "not valid UTF-8"},
      {"overlong UTF-8", st_bytes("{\"t\xc0\xaf\":1}", 0), "not valid UTF-8"},
      {"UTF-16 surrogate in UTF-8", st_bytes("{\"\xed\xa0\x80\":1}", 0), "not valid UTF-8"},
      {"lone surrogate escape", st_bytes(R"({"\ud800":{}})", 0), "not valid JSON"},
      {"comment", st_bytes("{/* c */}", 0), "not valid JSON"},
      {"trailing garbage", st_bytes("{} x", 0), "not valid JSON"},
      {"two objects", st_bytes("{}{}", 0), "not valid JSON"},
      {"NUL padding", st_bytes(std::string("{}\0\0", 4), 0), "not valid JSON: a NUL byte at file offset 10"},
      {"NUL then garbage", st_bytes(std::string("{}\0{\"t\":1}", 10), 0), "a NUL byte"},
      {"duplicate tensor names",
       st_bytes(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"t":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4),
       "duplicate tensor name 't'"},
      {"duplicate field", st_bytes(one(u8_4 + R"(,"dtype":"I8")"), 4), "duplicate field \"dtype\""},
      {"duplicate key in an unknown field", st_bytes(one(u8_4 + R"(,"x":{"a":1,"a":2})"), 4), "duplicate key 'a'"},
      {"deeply nested unknown field",
       st_bytes(one(u8_4 + R"(,"x":)" + std::string(100, '[') + std::string(100, ']')), 4), "nests deeper than 64"},
      {"entry not an object", st_bytes(R"({"t":[1,2]})", 0), "entry is an array, not an object"},
      {"missing dtype", st_bytes(one(R"("shape":[4],"data_offsets":[0,4])"), 4), "missing \"dtype\""},
      {"missing shape", st_bytes(one(R"("dtype":"U8","data_offsets":[0,4])"), 4), "missing \"shape\""},
      {"missing data_offsets", st_bytes(one(R"("dtype":"U8","shape":[4])"), 4), "missing \"data_offsets\""},
      {"unknown dtype", st_bytes(one(R"("dtype":"F128","shape":[4],"data_offsets":[0,4])"), 4), "unknown dtype 'F128'"},
      {"lowercase dtype", st_bytes(one(R"("dtype":"f32","shape":[1],"data_offsets":[0,4])"), 4), "unknown dtype 'f32'"},
      {"dtype not a string", st_bytes(one(R"("dtype":4,"shape":[4],"data_offsets":[0,4])"), 4), "\"dtype\" is an integer"},
      {"defined but unsupported dtype", st_bytes(one(R"("dtype":"F4","shape":[2],"data_offsets":[0,1])"), 1),
       "rlx does not load it", ErrorCode::unsupported},
      {"negative dim", st_bytes(one(R"("dtype":"U8","shape":[-4],"data_offsets":[0,4])"), 4), "a negative integer"},
      {"float dim", st_bytes(one(R"("dtype":"U8","shape":[4.0],"data_offsets":[0,4])"), 4), "a non-integer number ('4.0')"},
      {"exponent dim", st_bytes(one(R"("dtype":"U8","shape":[4e0],"data_offsets":[0,4])"), 4), "a non-integer number"},
      {"string dim", st_bytes(one(R"("dtype":"U8","shape":["4"],"data_offsets":[0,4])"), 4), "element 0 is a string"},
      {"null dim", st_bytes(one(R"("dtype":"U8","shape":[null],"data_offsets":[0,4])"), 4), "is null"},
      {"shape not an array", st_bytes(one(R"("dtype":"U8","shape":4,"data_offsets":[0,4])"), 4), "\"shape\" is an integer, not an array"},
      {"dim beyond 2^64", st_bytes(one(R"("dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,4])"), 4), "non-integer"},
      {"dim 2^63", st_bytes(one(R"("dtype":"U8","shape":[9223372036854775808,0],"data_offsets":[0,0])"), 0), "overflows"},
      {"overflowing shape", st_bytes(one(R"("dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4])"), 4), "overflows"},
      {"overflow before a zero", st_bytes(one(R"("dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0])"), 0), "overflows"},
      {"overflowing bytes", st_bytes(one(R"("dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4])"), 4), "overflows"},
      {"rank 65", st_bytes(one(R"("dtype":"U8","shape":[)" + ones(65) + R"(],"data_offsets":[0,1])"), 1),
       "more than 64 dimensions"},
      {"data_offsets one element", st_bytes(one(R"("dtype":"U8","shape":[4],"data_offsets":[4])"), 4), "has 1 elements, expected 2"},
      {"data_offsets three elements", st_bytes(one(R"("dtype":"U8","shape":[4],"data_offsets":[0,4,4])"), 4), "more than 2 elements"},
      {"data_offsets negative", st_bytes(one(R"("dtype":"U8","shape":[4],"data_offsets":[-1,3])"), 4), "negative integer"},
      {"data_offsets not an array", st_bytes(one(R"("dtype":"U8","shape":[4],"data_offsets":"0,4")"), 4), "not an array"},
      {"offsets reversed", st_bytes(one(R"("dtype":"U8","shape":[0],"data_offsets":[4,0])"), 4), "reversed (begin > end)"},
      {"offsets past EOF", st_bytes(one(R"("dtype":"U8","shape":[8],"data_offsets":[0,8])"), 4), "past the end of the data section"},
      {"offsets 2^64-1", st_bytes(one(R"("dtype":"U8","shape":[4],"data_offsets":[18446744073709551611,18446744073709551615])"), 4),
       "past the end of the data section"},
      {"size mismatch", st_bytes(one(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"), 4), "size mismatch"},
      {"overlapping",
       st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6),
       "overlaps tensor 'a'"},
      {"same range twice",
       st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4),
       "overlaps"},
      {"gap between tensors",
       st_bytes(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", 6),
       "gap: 2 bytes between tensor 'a'"},
      {"gap at the start", st_bytes(one(R"("dtype":"U8","shape":[2],"data_offsets":[2,4])"), 4), "gap: the first 2 bytes"},
      {"trailing bytes", st_bytes(one(u8_4), 6), "2 trailing bytes after tensor 't'"},
      {"data but no tensors", st_bytes("{}", 3), "3 trailing bytes after the header"},
      {"metadata value a number", st_bytes(R"({"__metadata__":{"a":1}})", 0), "value for key 'a' is an integer, not a string"},
      {"metadata value an object", st_bytes(R"({"__metadata__":{"a":{}}})", 0), "not a string"},
      {"metadata not an object", st_bytes(R"({"__metadata__":"x"})", 0), "not an object of strings"},
      {"metadata duplicate key", st_bytes(R"({"__metadata__":{"a":"1","a":"2"}})", 0), "duplicate key 'a' in \"__metadata__\""},
      {"metadata twice", st_bytes(R"({"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}})", 0), "duplicate \"__metadata__\""},
      {"BOOL byte 2", st_bytes(one(R"("dtype":"BOOL","shape":[4],"data_offsets":[0,4])"), 4, '\x02'), "must be 0 or 1"},
  };
}

TEST(SafetensorsCorrupt, EveryHandMadeFileIsRefusedWithItsReason) {
  const auto cases = corrupt_files();
  EXPECT_GE(cases.size(), 20u);
  for (const Case& c : cases) {
    auto f = parse_bytes(c.bytes);
    ASSERT_FALSE(f.has_value()) << c.what << ": accepted";
    EXPECT_EQ(f.status().code(), c.code) << c.what << ": " << f.status().to_string();
    EXPECT_NE(f.status().message().find(c.phrase), std::string::npos)
        << c.what << ": expected \"" << c.phrase << "\" in: " << f.status().message();
    EXPECT_EQ(f.status().message().rfind("corrupt.safetensors", 0), 0u) << c.what << ": " << f.status().message();
  }
}

TEST(SafetensorsCorrupt, MessagesNameTheTensor) {
  auto f = parse_bytes(st_bytes(R"({"model.layers.3.weight":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.status().message().find("tensor 'model.layers.3.weight'"), std::string::npos) << f.status().message();
  // control bytes and long names are escaped and cut in messages
  f = parse_bytes(st_bytes("{\"a\\u0001" + std::string(500, 'x') + "\":{\"dtype\":\"Q\",\"shape\":[],\"data_offsets\":[0,0]}}", 0));
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.status().message().find("'a\\x01xxx"), std::string::npos) << f.status().message();
  EXPECT_LT(f.status().message().size(), 400u);
}

TEST(SafetensorsCorrupt, MissingFileIsAnIoError) {
  auto f = safetensors::load("/nonexistent/rlx/model.safetensors");
  EXPECT_EQ(f.status().code(), ErrorCode::io_error);
  EXPECT_NE(f.status().message().find("/nonexistent/rlx/model.safetensors"), std::string::npos);
}

// Every truncation and many random byte edits of a valid file: each must parse or be refused,
// never crash (run under ASan/UBSan in the sanitizer presets).
TEST(SafetensorsCorrupt, MutationsNeverCrash) {
  const std::string valid = st_bytes(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[16,19]},"c":{"dtype":"BOOL","shape":[1],"data_offsets":[19,20]}})",
      20, '\x01');
  ASSERT_TRUE(parse_bytes(valid).has_value()) << parse_bytes(valid).status().to_string();
  for (size_t n = 0; n < valid.size(); ++n) EXPECT_FALSE(parse_bytes(valid.substr(0, n)).has_value()) << n;
  std::mt19937 rng(42);
  const char alphabet[] = "{}[]\",:0123456789-.eE \\ux\xff\x80";
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string m = valid;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % m.size();
      if (rng() % 2) {
        m[at] = alphabet[rng() % (sizeof alphabet - 1)];
      } else {
        m[at] = static_cast<char>(rng());
      }
    }
    auto f = parse_bytes(m);
    if (f.has_value()) {
      ++accepted;
      for (const auto& [name, t] : f->tensors) (void)t.to_f64();  // touch every element
    } else {
      EXPECT_TRUE(f.status().code() == ErrorCode::format_error || f.status().code() == ErrorCode::unsupported)
          << f.status().to_string();
    }
  }
  RecordProperty("accepted_mutants", accepted);
}

// --- sharded checkpoints ---------------------------------------------------------------------

class ShardedCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(RLX_BINARY_DIR) / "test-tmp" / ("st-corrupt-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "ckpt");
    ASSERT_TRUE(safetensors::save(p("ckpt/s1.safetensors"), {{"a", Tensor::zeros(DType::f32, {2})},
                                                             {"b", Tensor::zeros(DType::f32, {3})}})
                    .is_ok());
    ASSERT_TRUE(safetensors::save(p("ckpt/s2.safetensors"), {{"c", Tensor::zeros(DType::i8, {5})}}).is_ok());
    ASSERT_TRUE(safetensors::save(p("outside.safetensors"), {{"c", Tensor::zeros(DType::i8, {5})}}).is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string p(const std::string& rel) const { return (dir_ / rel).string(); }
  // Writes the index and loads it; returns the error.
  Status load_index(const std::string& json) {
    std::ofstream(p("ckpt/model.safetensors.index.json"), std::ios::binary) << json;
    auto f = safetensors::load(p("ckpt/model.safetensors.index.json"));
    return f.has_value() ? Status::ok() : f.status();
  }
  void expect_refused(const std::string& json, const std::string& phrase) {
    Status s = load_index(json);
    ASSERT_FALSE(s.is_ok()) << json;
    EXPECT_EQ(s.code(), ErrorCode::format_error) << s.to_string();
    EXPECT_NE(s.message().find(phrase), std::string::npos) << "expected \"" << phrase << "\" in: " << s.message();
    EXPECT_NE(s.message().find("model.safetensors.index.json"), std::string::npos) << s.message();
  }
  fs::path dir_;
};

TEST_F(ShardedCorrupt, TheValidIndexLoads) {
  Status s = load_index(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})");
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST_F(ShardedCorrupt, DotDotPath) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"../outside.safetensors"}})",
                 "contains '..'");
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"sub/../../outside.safetensors"}})",
                 "contains '..'");
}

TEST_F(ShardedCorrupt, AbsolutePath) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":")" + p("outside.safetensors") + R"("}})",
                 "absolute path");
}

TEST_F(ShardedCorrupt, SymlinkLeavingTheFolder) {
  fs::create_symlink(p("outside.safetensors"), p("ckpt/link.safetensors"));
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"link.safetensors"}})",
                 "outside the index's folder");
  fs::create_directory_symlink(dir_, p("ckpt/up"));
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"up/outside.safetensors"}})",
                 "outside the index's folder");
}

TEST_F(ShardedCorrupt, MissingShard) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s3.safetensors"}})", "no such file");
}

TEST_F(ShardedCorrupt, EmptyOrNulShardName) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":""}})", "file name is empty");
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors\u0000x"}})", "NUL byte");
}

TEST_F(ShardedCorrupt, TensorListedButMissingFromItsShard) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors","d":"s2.safetensors"}})",
                 "tensor 'd' listed in the index is missing from shard 's2.safetensors'");
}

TEST_F(ShardedCorrupt, TensorInAShardButNotInTheIndex) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","c":"s2.safetensors"}})",
                 "holds tensor 'b', which the index does not list");
}

TEST_F(ShardedCorrupt, TensorInTheWrongShard) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors"}})",
                 "tensor 'b' is in shard 's1.safetensors' but the index lists it in shard 's2.safetensors'");
}

TEST_F(ShardedCorrupt, TensorInTwoShards) {
  ASSERT_TRUE(safetensors::save(p("ckpt/s3.safetensors"), {{"a", Tensor::zeros(DType::f32, {2})}}).is_ok());
  expect_refused(R"({"weight_map":{"a":"s3.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})",
                 "tensor 'a' appears in both shard 's1.safetensors' and shard 's3.safetensors'");
}

TEST_F(ShardedCorrupt, DuplicateInWeightMap) {
  expect_refused(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors","a":"s2.safetensors"}})",
                 "tensor 'a' is listed twice");
}

TEST_F(ShardedCorrupt, MalformedIndex) {
  expect_refused(R"({"metadata":{}})", "no \"weight_map\"");
  expect_refused(R"([])", "not a JSON object");
  expect_refused(R"({"weight_map":[]})", "\"weight_map\" is an array, not an object");
  expect_refused(R"({"weight_map":{"a":1}})", "is an integer, not a file name");
  expect_refused(R"({"weight_map":{"a":"s1.safetensors",})", "not valid JSON");
  expect_refused(R"({"weight_map":{},"weight_map":{}})", "duplicate key 'weight_map'");
  expect_refused("{\"weight_map\":{\"a\xff\":\"s1\"}}", "not valid UTF-8");
}

TEST_F(ShardedCorrupt, CorruptShardNamesTheShard) {
  std::ofstream(p("ckpt/s2.safetensors"), std::ios::binary) << st_bytes("{\"c\":1}", 0);
  Status s = load_index(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::format_error);
  EXPECT_NE(s.message().find("s2.safetensors: tensor 'c': entry is an integer"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace rlx

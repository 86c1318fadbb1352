// Hand-made corrupt GGUF files, in the manner of llama.cpp's test-gguf: each must fail with
// ErrorCode::format_error and a message that names the file, the offset and what is wrong.
// Set RLX_GGUF_WRITE_CORPUS=DIR to also write every case (and a few valid files) to DIR: that
// is how fuzz/corpus/gguf/ was made.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "rlx/gguf.h"
#include "rlx/mapped_file.h"

namespace rlx::gguf {
namespace {

struct Bytes {
  std::vector<uint8_t> b;
  Bytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
  Bytes& pad(size_t a) {
    b.resize((b.size() + a - 1) / a * a, 0);
    return *this;
  }
  // a key with a u32 value
  Bytes& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
};

Bytes header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  Bytes b;
  b.raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
  return b;
}

Expected<File> parse_bytes(const std::vector<uint8_t>& bytes) {
  auto s = allocate_storage(bytes.size());
  if (!bytes.empty()) std::memcpy(s->data(), bytes.data(), bytes.size());
  return parse(s, "corrupt.gguf");
}

void dump(const std::string& name, const std::vector<uint8_t>& bytes) {
  const char* dir = std::getenv("RLX_GGUF_WRITE_CORPUS");
  if (!dir) return;
  std::ofstream(std::string(dir) + "/" + name + ".gguf", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Expects a format_error naming the file and `offset` and containing `part`.
void expect_corrupt(const std::string& name, const Bytes& bytes, const std::string& part, int64_t offset) {
  SCOPED_TRACE(name);
  dump(name, bytes.b);
  auto f = parse_bytes(bytes.b);
  ASSERT_FALSE(f.has_value()) << "parsed a corrupt file";
  const Status& s = f.status();
  EXPECT_EQ(s.code(), ErrorCode::format_error) << s.to_string();
  EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(cat("corrupt.gguf: offset ", offset, ":")), std::string::npos) << s.message();
}

// A valid file with one f32 tensor [8] (checked to parse), to start corruptions from.
Bytes valid_base() {
  Bytes b = header(3, 1, 1);
  b.kv_u32("general.alignment", 32);
  b.tensor("w", {8}, 0, 0).pad(32).zeros(32);
  return b;
}

TEST(GgufCorrupt, ValidBaseParses) {
  auto f = parse_bytes(valid_base().b);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  dump("valid_f32", valid_base().b);
  Bytes q = header(2, 2, 2);
  q.str("general.architecture").u32(8).str("llama");
  q.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(2).str("a").str("bc");
  q.tensor("q", {32, 2}, 8, 0).tensor("k", {256}, 12, 96).pad(32).zeros(96 + 144);
  ASSERT_TRUE(parse_bytes(q.b).has_value()) << parse_bytes(q.b).status().to_string();
  dump("valid_quant_v2", q.b);
  dump("valid_empty", header(3, 0, 0).b);
  // every metadata type and one block of several formats (the fuzzer mutates from these)
  std::vector<KeyValue> md = {
      {"u8", Value::u8(1), 0}, {"i8", Value::i8(-1), 0}, {"u16", Value::u16(2), 0}, {"i16", Value::i16(-2), 0},
      {"u32", Value::u32(3), 0}, {"i32", Value::i32(-3), 0}, {"f32", Value::f32(0.5f), 0}, {"b", Value::boolean(true), 0},
      {"s", Value::string("str"), 0}, {"u64", Value::u64(4), 0}, {"i64", Value::i64(-4), 0}, {"f64", Value::f64(0.25), 0},
      {"as", Value::array(std::vector<std::string>{"a", "b"}), 0}, {"ai", Value::array(std::vector<int16_t>{1, 2}), 0},
      {"an", Value::array_of_arrays({Value::array(std::vector<bool>{true})}), 0}};
  std::vector<TensorToWrite> ts;
  uint32_t seed = 1;
  for (GgmlType t : {GgmlType::q4_0, GgmlType::q6_k, GgmlType::iq4_xs, GgmlType::q2_k, GgmlType::f16}) {
    auto info = *ggml_type_info(static_cast<uint32_t>(t));
    Tensor d = Tensor::zeros(DType::u8, {info.block_elems == 1 ? 64 : info.block_bytes});
    for (int64_t i = 0; i < d.numel(); ++i) d.bytes()[i] = static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 16);
    ts.push_back({std::string(info.name), t, {info.block_elems == 1 ? 32 : info.block_elems}, d});
  }
  auto all = serialize(md, ts, WriteOptions{3, 16});
  ASSERT_TRUE(all.has_value()) << all.status().to_string();
  ASSERT_TRUE(parse_bytes(*all).has_value());
  dump("valid_all_types", *all);
}

TEST(GgufCorrupt, Header) {
  expect_corrupt("empty", Bytes{}, "truncated header: the file has 0 bytes", 0);
  expect_corrupt("bad_magic", Bytes{}.raw("GGML", 4).u32(3).u64(0).u64(0), "bad magic 'GGML'", 0);
  expect_corrupt("truncated_header", Bytes{}.raw("GGUF", 4).u32(3).u32(0), "truncated header: the file has 12 bytes", 0);
  expect_corrupt("version_0", header(0, 0, 0), "bad version 0", 4);
  expect_corrupt("version_1", header(1, 0, 0), "version 1 is not supported", 4);
  expect_corrupt("version_4", header(4, 0, 0), "version 4 is newer than this reader", 4);
  expect_corrupt("version_big_endian", header(0x03000000, 0, 0), "byte-swapped", 4);
  expect_corrupt("kv_count_huge", header(3, 0, uint64_t{1} << 60), "metadata count 1152921504606846976 cannot fit", 16);
  expect_corrupt("tensor_count_huge", header(3, ~uint64_t{0}, 0), "tensor count 18446744073709551615 cannot fit", 8);
  // both counts fit alone, not together
  Bytes both = header(3, 2, 2);
  both.zeros(50);
  expect_corrupt("counts_together", both, "2 tensors and 2 metadata entries cannot fit", 8);
}

TEST(GgufCorrupt, Metadata) {
  Bytes s = header(3, 0, 1);
  s.str("general.name").u32(8).u64(1000).raw("abc", 3);
  expect_corrupt("string_past_eof", s, "key 'general.name': string length 1000 exceeds the 3 bytes left", 48);

  Bytes k = header(3, 0, 1);
  k.u64(uint64_t{1} << 62).zeros(16);
  expect_corrupt("key_length_past_eof", k, "key 0: string length 4611686018427387904 exceeds", 24);

  Bytes kl = header(3, 0, 1);
  kl.str(std::string(70000, 'k')).u32(0).u8(1);
  expect_corrupt("key_too_long", kl, "exceeds the limit of 65535", 24);

  Bytes a = header(3, 0, 1);
  a.str("arr").u32(9).u32(10).u64(uint64_t{1} << 61).zeros(64);
  expect_corrupt("array_length_overflow", a, "array of 2305843009213693952 u64 needs at least 8 bytes each", 39);

  Bytes sa = header(3, 0, 1);
  sa.str("tokens").u32(9).u32(8).u64(1000000).str("x");
  expect_corrupt("string_array_past_eof", sa, "array of 1000000 string needs at least 8 bytes each", 42);

  Bytes d = header(3, 0, 1);
  d.str("deep").u32(9);
  for (int i = 0; i < 5; ++i) d.u32(9).u64(1);
  d.zeros(32);
  expect_corrupt("nested_array_depth", d, "arrays nest more than 4 levels deep", 88);

  Bytes t = header(3, 0, 1);
  t.str("x").u32(13).u32(0);
  expect_corrupt("unknown_value_type", t, "key 'x' has unknown value type 13", 33);

  Bytes e = header(3, 0, 1);
  e.str("x").u32(9).u32(77).u64(1).zeros(8);
  expect_corrupt("unknown_array_element_type", e, "key 'x': unknown array element type 77", 37);

  Bytes dup = header(3, 0, 2);
  dup.kv_u32("a.b", 1).kv_u32("a.b", 2);
  expect_corrupt("duplicate_key", dup, "duplicate key 'a.b'", 43);

  Bytes empty = header(3, 0, 1);
  empty.str("").u32(4).u32(1).zeros(8);
  expect_corrupt("empty_key", empty, "key 0 is empty", 24);

  Bytes b = header(3, 0, 1);
  b.str("flag").u32(7).u8(2).zeros(8);
  expect_corrupt("bool_not_0_or_1", b, "key 'flag': bool value 2 is neither 0 nor 1", 40);

  Bytes cut = header(3, 0, 1);
  cut.str("n").u32(12).raw("\0\0\0\0\0\0", 6).zeros(8);
  cut.b.resize(cut.b.size() - 8);
  expect_corrupt("value_truncated", cut, "key 'n': a f64 value needs 8 bytes, 6 are left", 37);

  Bytes at = header(3, 0, 1);
  at.str("general.alignment").u32(10).u64(32);
  expect_corrupt("alignment_wrong_type", at, "key 'general.alignment' must be u32, got u64", 24);

  Bytes a48 = header(3, 0, 1);
  a48.kv_u32("general.alignment", 48);
  expect_corrupt("alignment_not_power_of_two", a48, "general.alignment' = 48 is not a power of two", 24);

  Bytes a0 = header(3, 0, 1);
  a0.kv_u32("general.alignment", 0);
  expect_corrupt("alignment_zero", a0, "general.alignment' = 0 is not a power of two", 24);
}

TEST(GgufCorrupt, TensorInfos) {
  // header (24) + alignment kv (33) = 57: the first tensor info starts there
  auto with = [](auto fill) {
    Bytes b = header(3, 1, 1);
    b.kv_u32("general.alignment", 32);
    fill(b);
    b.pad(32).zeros(256);
    return b;
  };
  expect_corrupt("dim_zero", with([](Bytes& b) { b.tensor("w", {8, 0}, 0, 0); }), "tensor 'w' dim 1 is 0", 78);
  expect_corrupt("dim_negative", with([](Bytes& b) { b.tensor("w", {uint64_t{1} << 63 | 5}, 0, 0); }),
                 "tensor 'w' dim 0 is -9223372036854775803 (negative", 70);
  expect_corrupt("dims_overflow", with([](Bytes& b) { b.tensor("w", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0); }),
                 "tensor 'w' has more than INT64_MAX elements", 78);
  expect_corrupt("too_many_dims", with([](Bytes& b) { b.tensor("w", {1, 1, 1, 1, 8}, 0, 0); }),
                 "tensor 'w' has 5 dims, at most 4", 66);
  expect_corrupt("unknown_type", with([](Bytes& b) { b.tensor("w", {8}, 99, 0); }), "tensor 'w' has unknown ggml type 99", 78);
  expect_corrupt("removed_type", with([](Bytes& b) { b.tensor("w", {32}, 4, 0); }), "unknown ggml type 4", 78);
  expect_corrupt("row_not_multiple_of_block", with([](Bytes& b) { b.tensor("w", {100, 2}, 12, 0); }),
                 "tensor 'w' of type q4_k has rows of 100 values, not a multiple of its block size 256", 86);
  expect_corrupt("bytes_overflow", with([](Bytes& b) { b.tensor("w", {(uint64_t{1} << 63) - 32}, 8, 0); }),
                 "tensor 'w' takes more than INT64_MAX bytes", 78);
  expect_corrupt("offset_unaligned", with([](Bytes& b) { b.tensor("w", {8}, 0, 8); }),
                 "tensor 'w' data offset 8 is not a multiple of the alignment 32", 82);
  expect_corrupt("offset_past_eof", with([](Bytes& b) { b.tensor("w", {8}, 0, 4096); }), "runs past the end of the", 57);
  expect_corrupt("offset_overflow", with([](Bytes& b) { b.tensor("w", {8}, 0, ~uint64_t{31}); }), "runs past the end", 57);
  expect_corrupt("empty_tensor_name", with([](Bytes& b) { b.tensor("", {8}, 0, 0); }), "tensor 0 has an empty name", 57);
  expect_corrupt("tensor_name_past_eof", with([](Bytes& b) { b.u64(1u << 30); }),
                 "tensor 0 name: string length 1073741824 exceeds", 57);

  Bytes two = header(3, 2, 0);
  two.tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad(32).zeros(128);
  expect_corrupt("overlapping_tensors", two, "tensor 'b' data at 32 overlaps tensor 'a' at 0 (64 bytes)", 57);

  Bytes dup = header(3, 2, 0);
  dup.tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad(32).zeros(64);
  expect_corrupt("duplicate_tensor", dup, "duplicate tensor name 'a'", 57);

  // the infos end right at the end of the file: no room for the aligned data section
  Bytes nodata = header(3, 1, 0);
  nodata.tensor("a", {8}, 0, 0);
  expect_corrupt("no_data_section", nodata, "the data section (aligned to 32) would start past the end of the 57-byte file", 57);

  // the offset field cut short
  Bytes t3 = header(3, 1, 0);
  t3.str("weight").u32(1).u64(8).u32(0).raw("\0\0\0\0", 4);
  expect_corrupt("tensor_info_truncated", t3, "tensor 'weight' offset needs 8 bytes but the file ends after 4", 54);
}

TEST(GgufCorrupt, LoadNamesThePath) {
  const std::string path = cat("/tmp/rlx_gguf_corrupt_", ::getpid(), ".gguf");
  Bytes b = header(3, 0, 1);
  b.str("x").u32(13).u32(0);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.b.data()), static_cast<std::streamsize>(b.b.size()));
  auto f = load(path);
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.status().code(), ErrorCode::format_error);
  EXPECT_NE(f.status().message().find(path + ": offset 33: key 'x' has unknown value type 13"), std::string::npos)
      << f.status().message();
  std::remove(path.c_str());
  auto missing = load(path);
  EXPECT_EQ(missing.status().code(), ErrorCode::io_error);
}

}  // namespace
}  // namespace rlx::gguf

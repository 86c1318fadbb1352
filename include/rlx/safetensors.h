// rlx/safetensors.h: the safetensors format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length, a JSON header, then the tensor bytes.
//
// Security promise (what the loader guarantees on untrusted input)
// -----------------------------------------------------------------
// load() and parse() treat every byte of a .safetensors file, and of a sharded checkpoint's
// model.safetensors.index.json, as untrusted. On any input they:
//  - never crash, abort, assert, throw, hang or read outside the file: every failure is an
//    rlx::Status, ErrorCode::format_error for a malformed file (io_error when the file system
//    fails, unsupported for a dtype the format defines but rlx does not load: F4, F6_E2M3,
//    F6_E3M2), with a message naming the file, the tensor and what was expected;
//  - allocate nothing in proportion to a size field the file declares: memory is bounded by
//    the bytes actually present (the header is at most 100,000,000 bytes, as in the reference
//    library; parsed header state is a small multiple of the header's size; an F8 tensor
//    converted to f32 takes 4 bytes per byte it holds in the file);
//  - accept a header only if it is valid UTF-8, strict JSON (RFC 8259, no comments, no
//    trailing garbage other than spaces), an object, with no duplicate key at any level;
//    each tensor entry an object with a known "dtype" string, a "shape" of at most 64
//    non-negative integers below 2^63, and "data_offsets" of exactly two non-negative
//    integers begin <= end; "__metadata__" (if present) an object of string to string;
//  - compute element counts and byte sizes with checked arithmetic (overflow is an error),
//    and require end - begin == element count x element size exactly;
//  - require the tensors' byte ranges, sorted by begin, to tile the data section exactly:
//    the first begins at 0, each begins where the previous ends (no overlap, no gap), and the
//    last ends at the end of the file (no trailing bytes); so no two tensors alias memory;
//  - require BOOL elements to be 0 or 1, so reading one as a C++ bool is defined;
//  - for a sharded checkpoint: shard names must be relative paths without ".." components
//    or NUL bytes, and must resolve (after following symlinks) to regular files inside the
//    index's folder; each shard is mapped once and validated as above; every tensor the
//    index names must be in the shard it names, every tensor of a shard must be named by the
//    index for that shard, and no tensor may appear twice (in the index or across shards).
// What it does not promise: the tensor values themselves are arbitrary (NaN, inf, huge
// integers); tensors are views into a copy-on-write private mapping, so a file truncated by
// another process while mapped raises SIGBUS on access, as with any mmap reader; data need
// not be aligned to its element size (the header is padded to 8 bytes, so the data section
// starts aligned, and the reference library orders tensors by decreasing alignment; save()
// keeps the caller's order, and a hand-made file may put a tensor anywhere): rlx reads
// tensor elements with memcpy-style loads on x86-64, where misaligned access is defined;
// code that dereferences Tensor::data<T>() directly on a strict-alignment target must check
// alignment first.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/tensor.h"

namespace rlx::safetensors {

struct File {
  std::vector<std::string> names;         // in data-offset order (shard by shard, shards in name order)
  std::map<std::string, Tensor> tensors;  // views into the mapped file where the dtype allows
  std::map<std::string, std::string> metadata;  // the "__metadata__" entries
};

// The largest header load() and parse() accept, in bytes (the reference library's limit).
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// The largest tensor rank accepted (the format sets none; rlx refuses absurd ranks).
inline constexpr size_t kMaxRank = 64;

// Loads a .safetensors file (memory-mapped, zero-copy), or a sharded checkpoint given its
// model.safetensors.index.json (any path ending in ".json"; every shard mapped once, names
// checked against the index), or a folder holding model.safetensors.index.json or
// model.safetensors. F8_E4M3 / F8_E5M2 / F8_E8M0 are converted to f32 on load; every other
// dtype is a view into the mapping. For a sharded checkpoint, `metadata` merges the index's
// "metadata" (non-string scalars written as JSON text) and each shard's "__metadata__"; the
// first value seen for a key wins. Errors name the file and tensor.
Expected<File> load(const std::string& path);

// Parses safetensors bytes held by `bytes` (tensors view into it); `name` is for messages.
Expected<File> parse(std::shared_ptr<Storage> bytes, const std::string& name);

// Writes tensors (in the given order) and metadata to `path`, as the reference library
// does: compact JSON header ("__metadata__" first, then the tensors in order) padded with
// spaces to a multiple of 8 bytes, then the tensors' bytes back to back. The file is written
// beside `path` and renamed over it, so overwriting a file that is currently loaded (mapped)
// is safe. i4/u4 tensors cannot be saved (the format has no packed integer type); names must
// be unique, valid UTF-8 and not "__metadata__". Errors: invalid_argument, io_error.
Status save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
            const std::map<std::string, std::string>& metadata = {});

// The safetensors dtype name of an rlx dtype ("F32", "BOOL", "C64", ...); nullopt for i4/u4.
std::optional<std::string_view> dtype_to_safetensors(DType t);
// The rlx dtype a safetensors dtype name loads as (F8_* load as f32); nullopt if rlx does not
// load it (unknown to the format, or defined but unsupported such as "F4").
std::optional<DType> dtype_from_safetensors(std::string_view name);

// Float8 decoding (exact, every code point):
// E4M3 (OCP FP8 "E4M3FN"): bias 7, no infinities, NaN = S.1111.111, max normal 448,
//   smallest subnormal 2^-9.
float f8_e4m3_to_f32(uint8_t v);
// E5M2 (IEEE-like): bias 15, inf = S.11111.00, NaN = S.11111.{01,10,11}, max normal 57344,
//   smallest subnormal 2^-16.
float f8_e5m2_to_f32(uint8_t v);
// E8M0 (OCP MX scale): 2^(v-127), no sign, no zero; 0xFF is NaN.
float f8_e8m0_to_f32(uint8_t v);

}  // namespace rlx::safetensors

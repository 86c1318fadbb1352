// rlx/rten.h: reading and writing rten model files (.rten, the rten project's format: a 32-byte
// header, a FlatBuffers model and 64-byte aligned tensor data in version 2; the FlatBuffers
// buffer alone in version 1). docs/rten.md says what maps and what is refused.
//
// Reading translates the rten graph into an ONNX ModelProto (rten's operators are ONNX's, with
// the same attributes) and imports that with rlx::onnx::parse, so both formats share one op
// mapping and the ONNX importer's promises (rlx/onnx.h). rten has one integer type where ONNX
// has int32 and int64 (its converter narrows int64 to int32): rlx reads rten's Int32 as int64,
// ONNX's type for shapes, axes and indices, and so gives int64 inputs and outputs.
//
// Security promise: every byte of a .rten file is untrusted. The header's offsets and lengths
// are checked against the file size, the model buffer passes FlatBuffers' verifier (every
// offset inside it), every tensor's element count and byte size are computed with checked
// arithmetic and checked against the inline data or the tensor data segment before anything
// is allocated, every node index is checked against the node list, and every failure is a
// Status naming the file and the node or tensor at fault; never a crash.
#pragma once

#include <string>
#include <string_view>

#include "rlx/model_io.h"
#include "rlx/onnx.h"

namespace rlx::rten {

// Loads a .rten file (version 1 or 2) into the graph level. Graph inputs and outputs keep their
// rten names; constants become weights named as in the file. The file is mapped, and the f32,
// i8 and u8 tensors of a version 2 file's tensor data segment reach the importer as ONNX
// external data in the file itself (so the translated ModelProto, which protobuf limits to
// 2 GiB, does not carry the weights).
Expected<LoadedModel> load(const std::string& path, const onnx::LoadOptions& options = {});
// The same for a file held in memory; `name` is used in messages. The translation then carries
// every tensor's bytes, so it is limited to protobuf's 2 GiB.
Expected<LoadedModel> parse(std::string_view bytes, const std::string& name, const onnx::LoadOptions& options = {});

// The rten file translated into a serialized ONNX ModelProto (opset 17), as parse imports it.
Expected<std::string> to_onnx(std::string_view bytes, const std::string& name);

// Writes a version 2 .rten file from a serialized ONNX ModelProto (its nodes, initializers,
// inputs and outputs). int64 tensors narrow to rten's Int32 (values beyond ±2^62, the "to the end"
// bounds such as Slice's INT64_MAX, clamp to the int32 range; other values that do not fit are
// refused); ops rten has no code for,
// subgraphs and dtypes other than f32, i32, i64, i8, u8 and bool are refused. `name` is used
// in messages.
Expected<std::string> from_onnx(std::string_view onnx_bytes, const std::string& name);
// rlx convert IN.onnx OUT.rten: reads the ONNX file, writes the rten file.
Status convert_onnx_file(const std::string& onnx_path, const std::string& rten_path);
// rlx convert IN.rten OUT.onnx: the translation `to_onnx` makes, written as an ONNX file (its
// weights inside it, so the .rten file must be under 2 GiB).
Status convert_rten_file(const std::string& rten_path, const std::string& onnx_path);

}  // namespace rlx::rten

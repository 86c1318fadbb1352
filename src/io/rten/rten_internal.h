// rten reader and writer internals: the file layout constants, the FlatBuffers classes flatc
// generates from rten.fbs, and the operator attribute mappings in both directions.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "rlx/status.h"
#include "rten_generated.h"

namespace rlx::rten_io {

namespace fb = ::rlx::rtenfb;

constexpr uint64_t kHeaderSize = 32;    // "RTEN", version, model offset, model length, tensor data offset
constexpr uint64_t kTensorAlign = 64;   // where version 2 puts the tensor data segment and each tensor
constexpr int kMaxRank = 64;            // as the ONNX importer
constexpr uint64_t kMaxElements = uint64_t{1} << 40;
constexpr int kOpset = 17;              // the ONNX opset whose attribute forms the translation uses

// Sets the ONNX attributes of `n` from rten operator `op`'s attribute table, whose union type
// must be the one rten writes for the op (or absent, where every attribute has a default).
// `where` names the file and node in messages.
Status attrs_to_onnx(const fb::OperatorNode& op, ::onnx::NodeProto& n, const std::string& where);

// The rten attribute table for ONNX node `n` (of rten operator type `type`), built in `b`;
// type NONE where rten keeps no attributes for the op. Refuses attributes rten cannot express.
struct FbAttrs {
  fb::OperatorAttrs type = fb::OperatorAttrs::NONE;
  flatbuffers::Offset<void> table;
};
Expected<FbAttrs> attrs_from_onnx(const ::onnx::NodeProto& n, fb::OperatorType type, flatbuffers::FlatBufferBuilder& b,
                                  const std::string& where);

// rten's value dtype for an ONNX element type (int32 and int64 both Int32); others refused.
Expected<fb::DataType> rten_dtype(int64_t onnx_t, const std::string& where);

// rten operator type for an ONNX op_type, or nullopt when rten has none (or rlx never writes it).
std::optional<fb::OperatorType> operator_type(const std::string& onnx_op);

}  // namespace rlx::rten_io

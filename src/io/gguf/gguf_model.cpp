// rlx::load_model for GGUF files: the metadata as strings and every tensor as a weight (views
// of the mapped file; nothing is copied or decoded).
//
// Conventions of the LoadedModel (also documented in rlx/gguf.h):
//   metadata["gguf.version"]           the file's GGUF version
//   metadata[<key>]                    each GGUF key, its value as text; arrays of more than 16
//                                      numbers and all string arrays are summarized
//                                      ("[32000 strings]", "[151936 i32]")
//   metadata["rlx.tensor_format.<t>"]  for each block-quantized tensor <t>, its format as the
//                                      dequantize / qmatmul ops name it ("q4_k", "iq4_xs", ...)
//   graph.weights[<t>]                 typed tensors for f32/f16/bf16/f64/i8..i64; u8
//                                      [rows..., row_bytes] for block formats
#include "io/loaders.h"
#include "rlx/gguf.h"

namespace rlx::io {

Expected<LoadedModel> load_gguf_model(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::load(path));
  LoadedModel m;
  m.format = "gguf";
  m.metadata["gguf.version"] = std::to_string(f.version);
  for (const gguf::KeyValue& kv : f.metadata) m.metadata[kv.key] = kv.value.to_string();
  for (const gguf::TensorInfo& t : f.tensors) {
    RLX_ASSIGN_OR_RETURN(Tensor x, f.tensor(t));
    auto info = gguf::ggml_type_info(static_cast<uint32_t>(t.type));
    if (info && !info->dtype) m.metadata["rlx.tensor_format." + t.name] = std::string(info->name);
    m.graph.weights[t.name] = std::move(x);
  }
  return m;
}

}  // namespace rlx::io

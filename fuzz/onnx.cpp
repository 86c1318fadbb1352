// libFuzzer target: rlx::onnx::parse (ModelProto import), rlx::onnx::parse_tensor (TensorProto
// files) and rlx::onnx::parse_value (string TensorProto, SequenceProto and OptionalProto files)
// on arbitrary bytes. Beyond "no crash, no sanitizer report", an accepted
// model must have a non-empty error-free graph that passes the verifier (parse runs it), and
// every error must carry a message. Models are read from memory, so external data is refused.
#include <cstdint>
#include <string_view>

#include "rlx/onnx.h"
#include "rlx/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto m = rlx::onnx::parse(bytes, "fuzz.onnx", "");
  if (!m) {
    if (m.status().message().empty()) __builtin_trap();
  } else {
    if (m->graph.outputs.empty()) __builtin_trap();
    if (!rlx::verify_graph(m->graph).is_ok()) __builtin_trap();
  }
  auto t = rlx::onnx::parse_tensor(bytes, "fuzz.pb");
  if (!t) {
    if (t.status().message().empty()) __builtin_trap();
  } else {
    if (t->nbytes() > size + 64 && t->numel() > 0 && t->nbytes() > 8 * size + 64) __builtin_trap();
    volatile double sink = 0;
    for (int64_t i = 0; i < t->numel(); ++i) sink = sink + t->get_f64(i);
  }
  for (auto kind : {rlx::onnx::ValueKind::tensor, rlx::onnx::ValueKind::sequence, rlx::onnx::ValueKind::optional_tensor,
                    rlx::onnx::ValueKind::optional_sequence}) {
    auto v = rlx::onnx::parse_value(bytes, "fuzz.pb", kind);
    if (!v) {
      if (v.status().message().empty()) __builtin_trap();
      continue;
    }
    size_t total = 0;
    for (const rlx::Tensor& e : v->elements) total += e.numel() > 0 ? e.nbytes() : 0;
    for (const std::string& e : v->strings) total += e.size();
    if (total > 8 * size + 64) __builtin_trap();
  }
  return 0;
}

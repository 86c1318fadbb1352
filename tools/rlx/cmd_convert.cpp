// rlx convert IN OUT [--quant FORMAT]: between safetensors and GGUF, either way (and GGUF to
// GGUF to requantize), and ONNX to rten and back (IN.onnx OUT.rten: the graph and its
// weights, rten's version 2 format; IN.rten OUT.onnx: docs/rten.md). The output format follows
// OUT's extension.
//
//   safetensors -> GGUF   tensors keep their dtype (f32, f16, bf16, f64, i8..i64); with --quant,
//                         2-D float weights whose rows fit the format's block are quantized with
//                         llama.cpp's reference encoders, the rest are kept (and listed, with why).
//                         __metadata__ entries become GGUF string keys.
//   GGUF -> safetensors   typed tensors are copied, block-quantized ones are dequantized to f32
//                         (said so in the output); metadata is written as text (arrays as JSON).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "kernels/ggml_quants.h"
#include "rlx/gguf.h"
#include "rlx/mapped_file.h"
#include "rlx/rten.h"
#include "rlx/safetensors.h"

namespace rlx::cli {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// By its magic or its name; a path that is not a regular file is left to the loader to refuse.
bool is_gguf_file(const std::string& path) {
  if (ends_with(path, ".gguf")) return true;
  auto fd = open_regular_file(path);
  if (!fd) return false;
  char m[4] = {};
  const bool magic = ::read(*fd, m, 4) == 4 && std::memcmp(m, "GGUF", 4) == 0;
  ::close(*fd);
  return magic;
}

// One tensor of the input: a typed tensor, or the raw rows of a GGUF block format.
struct Src {
  std::string name;
  Tensor data;                          // typed, or u8 rows of blocks
  std::optional<gguf::GgmlType> block;  // set for block formats
  std::vector<int64_t> ne;              // GGUF order
};

std::optional<gguf::GgmlType> ggml_type_of(DType t) {
  switch (t) {
    case DType::f32: return gguf::GgmlType::f32;
    case DType::f16: return gguf::GgmlType::f16;
    case DType::bf16: return gguf::GgmlType::bf16;
    case DType::f64: return gguf::GgmlType::f64;
    case DType::i8: return gguf::GgmlType::i8;
    case DType::i16: return gguf::GgmlType::i16;
    case DType::i32: return gguf::GgmlType::i32;
    case DType::i64: return gguf::GgmlType::i64;
    default: return std::nullopt;
  }
}

// The values of a float tensor (typed f32/f16/bf16, or any block format rlx decodes) as f32.
Expected<Tensor> to_f32(const Src& s) {
  if (!s.block) {
    if (s.data.dtype() == DType::f32) return s.data;
    const quant::QType q = s.data.dtype() == DType::f16 ? quant::QType::f16 : quant::QType::bf16;
    if (s.data.dtype() != DType::f16 && s.data.dtype() != DType::bf16)
      return error(ErrorCode::unsupported, "tensor '", s.name, "' is ", dtype_name(s.data.dtype()), ", not a float type");
    Tensor out = Tensor::zeros(DType::f32, s.data.sizes());
    quant::dequantize_row(q, s.data.bytes(), out.data<float>(), out.numel());
    return out;
  }
  auto info = gguf::ggml_type_info(static_cast<uint32_t>(*s.block));
  auto q = quant::qtype_from_name(info->name);
  if (!q) return error(ErrorCode::unsupported, "tensor '", s.name, "' is ", info->name, ", which rlx cannot decode");
  Sizes shape(s.ne.rbegin(), s.ne.rend());
  Tensor out = Tensor::zeros(DType::f32, shape);
  const int64_t cols = s.ne.empty() ? 1 : s.ne[0];
  const int64_t rows = cols ? out.numel() / cols : 0;
  const int64_t rb = cols / info->block_elems * info->block_bytes;
  for (int64_t r = 0; r < rows; ++r) quant::dequantize_row(*q, s.data.bytes() + r * rb, out.data<float>() + r * cols, cols);
  return out;
}

Expected<std::vector<Src>> read_input(const std::string& path, std::vector<gguf::KeyValue>& gguf_md,
                                      std::map<std::string, std::string>& st_md, bool& from_gguf) {
  std::vector<Src> out;
  from_gguf = is_gguf_file(path);
  if (from_gguf) {
    RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::load(path));
    gguf_md = f.metadata;
    for (const gguf::TensorInfo& ti : f.tensors) {
      auto info = gguf::ggml_type_info(static_cast<uint32_t>(ti.type));
      Src s;
      s.name = ti.name;
      s.ne = ti.ne;
      if (!info->dtype) s.block = ti.type;
      RLX_ASSIGN_OR_RETURN(s.data, f.tensor(ti));
      out.push_back(std::move(s));
    }
    return out;
  }
  RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(path));
  st_md = f.metadata;
  for (const std::string& n : f.names) {
    Src s;
    s.name = n;
    s.data = f.tensors.at(n);
    s.ne.assign(s.data.sizes().rbegin(), s.data.sizes().rend());
    out.push_back(std::move(s));
  }
  return out;
}

std::string json_of(const gguf::Value& v) {
  if (v.type() == gguf::ValueType::string) return *v.as_string();
  if (v.type() != gguf::ValueType::array) return v.to_string();
  nlohmann::json j = nlohmann::json::array();
  for (uint64_t i = 0; i < v.size(); ++i) {
    if (v.elem_type() == gguf::ValueType::string) {
      j.push_back(v.strings()[i]);
    } else if (v.elem_type() == gguf::ValueType::array) {
      j.push_back(nlohmann::json::parse(json_of(v.arrays()[i])));
    } else if (v.elem_type() == gguf::ValueType::boolean) {
      j.push_back(v.raw()[i] != 0);
    } else if (v.elem_type() == gguf::ValueType::f32 || v.elem_type() == gguf::ValueType::f64) {
      j.push_back(*v.float_at(i));
    } else if (auto x = v.int_at(i)) {
      j.push_back(*x);
    } else {
      uint64_t u;
      std::memcpy(&u, v.raw().data() + 8 * i, 8);  // u64 above INT64_MAX
      j.push_back(u);
    }
  }
  return j.dump();
}

int write_gguf(const std::string& out_path, const std::vector<Src>& in, const std::vector<gguf::KeyValue>& gguf_md,
               const std::map<std::string, std::string>& st_md, std::optional<quant::QType> q) {
  std::vector<gguf::KeyValue> md = gguf_md;
  auto has = [&](const std::string& k) {
    for (const gguf::KeyValue& kv : md)
      if (kv.key == k) return true;
    return false;
  };
  for (const auto& [k, v] : st_md)
    if (!has(k)) md.push_back({k, gguf::Value::string(v), 0});
  if (q && !has("general.quantization_version")) md.push_back({"general.quantization_version", gguf::Value::u32(2), 0});
  std::vector<gguf::TensorToWrite> ts;
  int quantized = 0, kept = 0;
  for (const Src& s : in) {
    gguf::TensorToWrite t;
    t.name = s.name;
    t.ne = s.ne;
    std::string why_kept;
    const bool float_values = s.block || is_float(s.data.dtype());
    if (q && float_values) {
      const int64_t be = quant::qtype_info(*q).block_elems;
      if (s.ne.size() != 2) {
        why_kept = cat(s.ne.size(), "-D, only 2-D weights are quantized");
      } else if (s.ne[0] % be != 0) {
        why_kept = cat("rows of ", s.ne[0], " values are not a multiple of the ", quant::qtype_name(*q), " block (", be, ")");
      } else {
        auto f = to_f32(s);
        if (!f) return report_error(f.status());
        const int64_t rows = s.ne[1], cols = s.ne[0], rb = *quant::row_bytes(*q, cols);
        Tensor data = Tensor::zeros(DType::u8, {rows, rb});
        for (int64_t r = 0; r < rows; ++r) {
          Status st = quant::quantize_row(*q, f->data<float>() + r * cols, data.bytes() + r * rb, cols);
          if (!st.is_ok()) return report_error(st);
        }
        t.type = static_cast<gguf::GgmlType>(quant::qtype_info(*q).ggml_type);
        t.data = data;
        ts.push_back(std::move(t));
        ++quantized;
        continue;
      }
    }
    if (s.block) {
      t.type = *s.block;
      t.data = s.data;
    } else {
      auto gt = ggml_type_of(s.data.dtype());
      if (!gt)
        return report_error(error(ErrorCode::unsupported, "tensor '", s.name, "' is ", dtype_name(s.data.dtype()),
                                  ", which GGUF cannot store"));
      t.type = *gt;
      t.data = s.data;
    }
    if (q) {
      ++kept;
      std::printf("kept %-40s %s %s (%s)\n", s.name.c_str(),
                  std::string(gguf::ggml_type_info(static_cast<uint32_t>(t.type))->name).c_str(),
                  sizes_to_string(Sizes(s.ne.rbegin(), s.ne.rend())).c_str(),
                  why_kept.empty() ? "not a float tensor" : why_kept.c_str());
    }
    ts.push_back(std::move(t));
  }
  Status st = gguf::save(out_path, md, ts);
  if (!st.is_ok()) return report_error(st);
  if (q) {
    std::printf("wrote %s: %zu tensors, %d quantized to %s, %d kept in their type; %zu metadata keys\n", out_path.c_str(),
                ts.size(), quantized, std::string(quant::qtype_name(*q)).c_str(), kept, md.size());
  } else {
    std::printf("wrote %s: %zu tensors, %zu metadata keys\n", out_path.c_str(), ts.size(), md.size());
  }
  return kOk;
}

int write_safetensors(const std::string& out_path, const std::vector<Src>& in, const std::vector<gguf::KeyValue>& gguf_md,
                      const std::map<std::string, std::string>& st_md) {
  std::map<std::string, std::string> md = st_md;
  for (const gguf::KeyValue& kv : gguf_md) md[kv.key] = json_of(kv.value);
  std::vector<std::pair<std::string, Tensor>> ts;
  int dequantized = 0;
  for (const Src& s : in) {
    if (s.block) {
      auto f = to_f32(s);
      if (!f) return report_error(f.status());
      std::printf("dequantized %-40s %s -> f32 %s\n", s.name.c_str(),
                  std::string(gguf::ggml_type_info(static_cast<uint32_t>(*s.block))->name).c_str(),
                  sizes_to_string(f->sizes()).c_str());
      ts.push_back({s.name, *f});
      ++dequantized;
    } else {
      ts.push_back({s.name, s.data});
    }
  }
  Status st = safetensors::save(out_path, ts, md);
  if (!st.is_ok()) return report_error(st);
  std::printf("wrote %s: %zu tensors (%d dequantized to f32: safetensors has no block formats), %zu metadata keys\n",
              out_path.c_str(), ts.size(), dequantized, md.size());
  return kOk;
}

}  // namespace

int cmd_convert(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {}, {"quant"});
  if (!args) return report_error(args.status());
  if (args->positional.size() != 2)
    return report_error(error(ErrorCode::invalid_argument, "usage: rlx convert IN OUT [--quant Q8_0|Q4_0|Q4_K|Q6_K]"));
  const std::string& in_path = args->positional[0];
  const std::string& out_path = args->positional[1];
  std::optional<quant::QType> q;
  if (auto name = args->get("quant")) {
    q = quant::qtype_from_name(*name);
    if (!q || quant::qtype_info(*q).block_elems == 1 || !quant::has_quantizer(*q))
      return report_error(error(ErrorCode::invalid_argument, "--quant ", *name,
                                ": rlx quantizes to q8_0, q4_0, q4_k, q6_k (and q4_1, q5_0, q5_1, q5_k, q8_k)"));
  }
  // ONNX and rten, either way: the graph and its weights (docs/rten.md)
  const bool to_rten = ends_with(out_path, ".rten");
  if (to_rten || ends_with(out_path, ".onnx")) {
    const char* from = to_rten ? ".onnx" : ".rten";
    if (!ends_with(in_path, from) || q)
      return report_error(error(ErrorCode::invalid_argument, "an ", to_rten ? ".rten" : ".onnx", " output is written from an ",
                                from, " input, without --quant"));
    std::error_code ec;
    if (std::filesystem::equivalent(in_path, out_path, ec))
      return report_error(error(ErrorCode::invalid_argument, in_path, ": input and output are the same file"));
    Status s = to_rten ? rten::convert_onnx_file(in_path, out_path) : rten::convert_rten_file(in_path, out_path);
    if (!s) return report_error(s);
    std::printf("wrote %s (%s)\n", out_path.c_str(), to_rten ? "rten version 2" : "ONNX, opset 17");
    return kOk;
  }
  const bool to_gguf = ends_with(out_path, ".gguf");
  if (!to_gguf && !ends_with(out_path, ".safetensors"))
    return report_error(error(ErrorCode::invalid_argument, out_path,
                              ": the output must end in .gguf, .safetensors, .rten or .onnx"));
  if (!to_gguf && q)
    return report_error(error(ErrorCode::invalid_argument, "--quant needs a .gguf output: safetensors has no block formats"));
  std::vector<gguf::KeyValue> gguf_md;
  std::map<std::string, std::string> st_md;
  bool from_gguf = false;
  auto in = read_input(in_path, gguf_md, st_md, from_gguf);
  if (!in) return report_error(in.status());
  return to_gguf ? write_gguf(out_path, *in, gguf_md, st_md, q) : write_safetensors(out_path, *in, gguf_md, st_md);
}

}  // namespace rlx::cli

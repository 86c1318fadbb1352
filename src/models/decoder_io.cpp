// Loading decoder weights from Hugging Face folders and GGUF files, and writing random-weight
// models in both forms (decoder.h).
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "decoder_internal.h"
#include "kernels/ggml_quants.h"
#include "models/text/bpe.h"
#include "models/text/chat_template.h"
#include "rlx/safetensors.h"
#include "support/json_fields.h"

namespace rlx::models {
namespace {

// The chat template of the random models: ChatML, as Qwen's templates write it without tools.
constexpr const char* kChatMlTemplate =
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A Phi-3 fused matrix (Hugging Face's qkv_proj / gate_up_proj, llama.cpp's attn_qkv / ffn_up)
// split by rows into `parts` (name, rows) of w.tensors, which it replaces.
Status split_fused(DecoderWeights& w, const std::string& fused, const std::vector<std::pair<std::string, int64_t>>& parts) {
  auto it = w.tensors.find(fused);
  if (it == w.tensors.end()) return error(ErrorCode::format_error, w.source, ": no tensor '", fused, "'");
  const DecoderWeight src = it->second;
  int64_t rows = 0;
  for (const auto& [name, n] : parts) rows += n;
  if (src.data.rank() != 2 || src.data.sizes()[0] != rows)
    return error(ErrorCode::shape_error, w.source, ": tensor '", fused, "' is ", src.data.type().to_string(), ", expected ", rows,
                 " rows");
  int64_t begin = 0;
  for (const auto& [name, n] : parts) {
    RLX_ASSIGN_OR_RETURN(Tensor part, slice_rows(src.data, begin, n, name));
    w.tensors[name] = DecoderWeight{part, src.format};
    begin += n;
  }
  w.tensors.erase(fused);
  return Status::ok();
}

// Phi-3's fused q/k/v and gate/up matrices of every layer, split under the separate names.
Status split_phi3(DecoderWeights& w, bool gguf_names) {
  const DecoderConfig& c = w.config;
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = layer_prefix(l);
    const std::string qkv = gguf_names ? p + "self_attn.attn_qkv.weight" : p + "self_attn.qkv_proj.weight";
    const std::string gate_up = gguf_names ? p + "mlp.ffn_up.weight" : p + "mlp.gate_up_proj.weight";
    RLX_TRY(split_fused(w, qkv, {{p + "self_attn.q_proj.weight", c.heads * c.head_dim},
                                 {p + "self_attn.k_proj.weight", c.kv_heads * c.head_dim},
                                 {p + "self_attn.v_proj.weight", c.kv_heads * c.head_dim}}));
    RLX_TRY(split_fused(w, gate_up, {{p + "mlp.gate_proj.weight", c.intermediate}, {p + "mlp.up_proj.weight", c.intermediate}}));
  }
  return Status::ok();
}

}  // namespace

std::vector<LayerTensorName> layer_tensor_names(const DecoderConfig& c) {
  std::vector<LayerTensorName> v = {{"attn_norm.weight", "input_layernorm.weight", true},
                                    {"attn_q.weight", "self_attn.q_proj.weight"},
                                    {"attn_k.weight", "self_attn.k_proj.weight"},
                                    {"attn_v.weight", "self_attn.v_proj.weight"},
                                    {"attn_output.weight", "self_attn.o_proj.weight"}};
  if (c.attention_bias)
    for (const char* x : {"q", "k", "v"})
      v.push_back({cat("attn_", x, ".bias"), cat("self_attn.", x, "_proj.bias"), true});
  if (c.qk_norm) {
    v.push_back({"attn_q_norm.weight", "self_attn.q_norm.weight", true});
    v.push_back({"attn_k_norm.weight", "self_attn.k_norm.weight", true});
  }
  if (c.post_norms) {
    v.push_back({"post_attention_norm.weight", "post_attention_layernorm.weight", true});
    v.push_back({"ffn_norm.weight", "pre_feedforward_layernorm.weight", true});
    v.push_back({"post_ffw_norm.weight", "post_feedforward_layernorm.weight", true});
  } else {
    v.push_back({"ffn_norm.weight", "post_attention_layernorm.weight", true});
  }
  v.push_back({"ffn_gate.weight", "mlp.gate_proj.weight"});
  v.push_back({"ffn_up.weight", "mlp.up_proj.weight"});
  v.push_back({"ffn_down.weight", "mlp.down_proj.weight"});
  return v;
}

bool is_decoder_arch(const gguf::File& f) {
  auto arch = f.get_string("general.architecture");
  return arch && family_from_name(*arch).has_value();
}

bool is_decoder_model(const std::string& path) {
  if (!is_dir(path)) {
    auto f = gguf::load(path);
    return f && is_decoder_arch(*f);
  }
  auto j = json::read_object_file(path + "/config.json");
  if (!j) return false;
  if (j->contains("model_type") && (*j)["model_type"].is_string())
    return family_from_name((*j)["model_type"].get<std::string>()).has_value() || (*j)["model_type"] == "gemma3";
  return false;
}

Expected<DecoderWeights> load_decoder_folder(const std::string& dir) {
  DecoderWeights w;
  RLX_ASSIGN_OR_RETURN(w.config, DecoderConfig::from_json_file(dir + "/config.json"));
  std::string file = dir + "/model.safetensors";
  struct stat st;
  if (stat(file.c_str(), &st) != 0) file = dir + "/model.safetensors.index.json";
  RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(file));
  w.source = file;
  for (auto& [name, t] : f.tensors) w.tensors[name] = DecoderWeight{t, ""};
  if (w.config.tie_embeddings) w.tensors.erase("lm_head.weight");
  if (w.config.family == DecoderFamily::phi3) RLX_TRY(split_phi3(w, false));
  return w;
}

Expected<DecoderWeights> load_decoder_gguf(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::load(path));
  return decoder_from_gguf(f, path);
}

Expected<DecoderWeights> decoder_from_gguf(const gguf::File& f, const std::string& path) {
  DecoderWeights w;
  w.source = path;
  DecoderConfig& c = w.config;
  RLX_TRY(read_gguf_config(f, path, c));
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) return error(ErrorCode::format_error, path, ": no tensor 'token_embd.weight'");
  if (emb->ne.size() != 2) return error(ErrorCode::format_error, path, ": 'token_embd.weight' must be 2-D");
  c.vocab_size = emb->ne[1];
  c.tie_embeddings = f.find_tensor("output.weight") == nullptr;
  RLX_TRY(c.validate(path));

  // A matrix: typed f32 stays dense; everything else (f16, block formats) is qmatmul rows.
  auto matrix = [&](const gguf::TensorInfo& info) -> Expected<DecoderWeight> {
    if (info.type == gguf::GgmlType::f32) {
      RLX_ASSIGN_OR_RETURN(Tensor t, f.tensor(info));
      return DecoderWeight{t, ""};
    }
    auto ti = gguf::ggml_type_info(static_cast<uint32_t>(info.type));
    if (!ti || !quant_format(ti->name))
      return error(ErrorCode::unsupported, path, ": tensor '", info.name, "' has type ",
                   ti ? std::string(ti->name) : std::string("?"), ", which qmatmul does not take");
    RLX_ASSIGN_OR_RETURN(Tensor t, f.tensor_blocks(info));
    return DecoderWeight{t, std::string(ti->name)};
  };
  // A vector (norm scales) or the embedding table: decoded to f32.
  auto decoded = [&](const gguf::TensorInfo& info) -> Expected<DecoderWeight> {
    if (info.type == gguf::GgmlType::f32 || info.type == gguf::GgmlType::f16 || info.type == gguf::GgmlType::bf16) {
      RLX_ASSIGN_OR_RETURN(Tensor t, f.tensor(info));
      return DecoderWeight{t, ""};
    }
    auto qt = quant::qtype_from_ggml(static_cast<uint32_t>(info.type));
    if (!qt) return error(ErrorCode::unsupported, path, ": tensor '", info.name, "' has a type rlx cannot decode");
    RLX_ASSIGN_OR_RETURN(Tensor blocks, f.tensor_blocks(info));
    const int64_t cols = info.ne[0];
    const int64_t rows = info.numel() / cols;
    Tensor out = Tensor::zeros(DType::f32, {rows, cols});
    Status s = quant::dequantize(*qt, std::span<const uint8_t>(blocks.data<uint8_t>(), blocks.nbytes()), cols,
                                 std::span<float>(out.data<float>(), static_cast<size_t>(out.numel())));
    if (!s.is_ok()) return error(ErrorCode::format_error, path, ": tensor '", info.name, "': ", s.message());
    return DecoderWeight{out, ""};
  };
  auto need = [&](const std::string& name) -> Expected<const gguf::TensorInfo*> {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (!t) return error(ErrorCode::format_error, path, ": no tensor '", name, "'");
    return t;
  };
  RLX_ASSIGN_OR_RETURN(w.tensors["model.embed_tokens.weight"], decoded(*emb));
  if (c.tie_embeddings) {
    // the output projection reads the table in its stored format (quantized stays quantized)
    RLX_ASSIGN_OR_RETURN(w.tensors["lm_head.weight"], matrix(*emb));
    c.tie_embeddings = false;  // lm_head now exists under its own name
  } else {
    RLX_ASSIGN_OR_RETURN(const gguf::TensorInfo* out, need("output.weight"));
    RLX_ASSIGN_OR_RETURN(w.tensors["lm_head.weight"], matrix(*out));
  }
  RLX_ASSIGN_OR_RETURN(const gguf::TensorInfo* norm, need("output_norm.weight"));
  RLX_ASSIGN_OR_RETURN(w.tensors["model.norm.weight"], decoded(*norm));
  // Phi-3's files fuse q/k/v (attn_qkv) and gate/up (ffn_up): read them whole, split below
  const bool fused = c.family == DecoderFamily::phi3;
  std::vector<LayerTensorName> names;
  for (const LayerTensorName& n : layer_tensor_names(c)) {
    if (fused && (n.gguf == "attn_q.weight" || n.gguf == "ffn_gate.weight")) continue;
    if (fused && n.gguf == "attn_k.weight") {
      names.push_back({"attn_qkv.weight", "self_attn.attn_qkv.weight"});
    } else if (fused && n.gguf == "ffn_up.weight") {
      names.push_back({"ffn_up.weight", "mlp.ffn_up.weight"});
    } else if (!fused || n.gguf != "attn_v.weight") {
      names.push_back(n);
    }
  }
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    for (const LayerTensorName& n : names) {
      RLX_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, need(blk + n.gguf));
      if ((t->ne.size() == 1) != n.vector)
        return error(ErrorCode::format_error, path, ": tensor '", blk, n.gguf, "' must be ", n.vector ? "1-D" : "2-D");
      RLX_ASSIGN_OR_RETURN(w.tensors[layer_prefix(l) + n.hf], n.vector ? decoded(*t) : matrix(*t));
    }
  }
  if (fused) RLX_TRY(split_phi3(w, true));
  // Llama 3's rope scaling, as per-frequency divisors
  if (const gguf::TensorInfo* rf = f.find_tensor("rope_freqs.weight")) {
    RLX_ASSIGN_OR_RETURN(DecoderWeight factors, decoded(*rf));
    if (factors.data.numel() != c.head_dim / 2)
      return error(ErrorCode::format_error, path, ": 'rope_freqs.weight' has ", factors.data.numel(), " values, expected ", c.head_dim / 2);
    for (int64_t i = 0; i < factors.data.numel(); ++i) c.rope_freq_factors.push_back(factors.data.get_f64(i));
    RLX_TRY(c.validate(path));
  }
  // Phi-3's LongRoPE: both factor lists as tensors
  const gguf::TensorInfo* lf = f.find_tensor("rope_factors_long.weight");
  const gguf::TensorInfo* sf = f.find_tensor("rope_factors_short.weight");
  if (lf || sf) {
    if (!lf || !sf || c.rope_scaling.kind != RopeScaling::Kind::none || c.family != DecoderFamily::phi3)
      return error(ErrorCode::format_error, path, ": rope_factors_long / rope_factors_short need each other, a phi3 "
                   "architecture and no other rope scaling");
    RopeScaling& s = c.rope_scaling;
    s.kind = RopeScaling::Kind::longrope;
    for (auto [t, out] : {std::pair{lf, &s.long_factor}, {sf, &s.short_factor}}) {
      RLX_ASSIGN_OR_RETURN(DecoderWeight v, decoded(*t));
      if (v.data.numel() != c.head_dim / 2)
        return error(ErrorCode::format_error, path, ": '", t->name, "' has ", v.data.numel(), " values, expected ", c.head_dim / 2);
      for (int64_t i = 0; i < v.data.numel(); ++i) out->push_back(v.data.get_f64(i));
    }
    s.factor = static_cast<double>(c.max_positions) / static_cast<double>(std::max<int64_t>(1, s.original_max_positions));
    RLX_TRY(c.validate(path));
  }
  return w;
}

Expected<DecoderWeights> load_decoder(const std::string& path) {
  if (is_dir(path)) return load_decoder_folder(path);
  return load_decoder_gguf(path);
}

// ---------------------------------------------------------------------------------------
// Random models

namespace {

std::vector<std::pair<std::string, Tensor>> random_tensors(const DecoderConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::string, Tensor>> out;
  // values rounded to f16 so that f16 copies hold exactly the same numbers
  auto add = [&](const std::string& name, Sizes shape, float mean, float stddev) {
    std::normal_distribution<float> normal(mean, stddev);
    Tensor t = Tensor::zeros(DType::f32, std::move(shape));
    float* d = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = f16_to_f32(f32_to_f16(normal(rng)));
    out.emplace_back(name, std::move(t));
  };
  // projections scaled by fan-in (0.5 / sqrt(fan_in): 0.022 at hidden 512, as usual
  // initializations) so that tiny test models mix tokens instead of echoing the embedding
  auto proj = [&](const std::string& name, int64_t out_f, int64_t in_f) {
    add(name, {out_f, in_f}, 0.f, 0.5f / std::sqrt(static_cast<float>(in_f)));
  };
  // norm scales near 1 (Gemma's checkpoints hold scale - 1)
  const float norm_mean = c.norm_plus_one ? 0.f : 1.f;
  add("model.embed_tokens.weight", {c.vocab_size, c.hidden}, 0.f, c.embedding_multiplier() > 1 ? 0.05f / std::sqrt(static_cast<float>(c.hidden)) : 0.05f);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = layer_prefix(l);
    for (const LayerTensorName& n : layer_tensor_names(c)) {
      const std::string name = p + n.hf;
      const auto ends = [&](std::string_view suffix) { return n.hf.ends_with(suffix); };
      if (ends("q_proj.weight")) proj(name, c.heads * c.head_dim, c.hidden);
      else if (ends("k_proj.weight") || ends("v_proj.weight")) proj(name, c.kv_heads * c.head_dim, c.hidden);
      else if (ends("o_proj.weight")) proj(name, c.hidden, c.heads * c.head_dim);
      else if (ends("q_proj.bias")) add(name, {c.heads * c.head_dim}, 0.f, 0.1f);
      else if (ends("k_proj.bias") || ends("v_proj.bias")) add(name, {c.kv_heads * c.head_dim}, 0.f, 0.1f);
      else if (ends("q_norm.weight") || ends("k_norm.weight")) add(name, {c.head_dim}, norm_mean, 0.1f);
      else if (n.vector) add(name, {c.hidden}, norm_mean, 0.1f);
      else if (ends("down_proj.weight")) proj(name, c.hidden, c.intermediate);
      else proj(name, c.intermediate, c.hidden);  // gate and up
    }
  }
  add("model.norm.weight", {c.hidden}, norm_mean, 0.1f);
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, c.hidden}, 0.f, 0.05f);
  return out;
}

// Rows of `parts` stacked: Phi-3's fused matrices.
Tensor stack_rows(const std::vector<const Tensor*>& parts) {
  int64_t rows = 0;
  for (const Tensor* t : parts) rows += t->sizes()[0];
  Tensor out = Tensor::zeros(DType::f32, {rows, parts[0]->sizes()[1]});
  float* d = out.data<float>();
  for (const Tensor* t : parts) {
    std::copy(t->data<float>(), t->data<float>() + t->numel(), d);
    d += t->numel();
  }
  return out;
}

// llama.cpp's row order of a Llama q or k projection [heads * D, in]: within each head the
// rows of the two rotary halves interleave (row i * D/2 + j goes to 2j + i), so that its
// rotation of adjacent pairs computes Hugging Face's rotation of halves.
Tensor permute_for_interleaved_rope(const Tensor& t, int64_t heads) {
  const int64_t rows = t.sizes()[0], cols = t.sizes()[1], d = rows / heads, half = d / 2;
  Tensor out = Tensor::zeros(DType::f32, {rows, cols});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < half; ++j) {
        const float* src = t.data<float>() + (h * d + i * half + j) * cols;
        std::copy(src, src + cols, out.data<float>() + (h * d + 2 * j + i) * cols);
      }
  return out;
}

}  // namespace

Status write_decoder_gguf(const std::string& path, const DecoderWeights& w, const std::string& gguf_type,
                          const std::string& tokenizer_json_path, std::vector<std::string>* fallbacks) {
  const DecoderConfig& c = w.config;
  auto tt = gguf::ggml_type_from_name(gguf_type);
  auto qt = quant::qtype_from_name(gguf_type);
  if (!tt || !qt || !quant::has_quantizer(*qt))
    return error(ErrorCode::invalid_argument, "cannot write GGUF tensors as '", gguf_type, "'");
  if (c.family == DecoderFamily::mistral && c.sliding_window > 0)
    return error(ErrorCode::unsupported, "a Mistral model with a sliding window has no GGUF form (llama.cpp reads it as Llama, "
                 "without the window)");
  if (c.family == DecoderFamily::phi3 && c.sliding_window > 0 && c.sliding_window < c.max_positions)
    return error(ErrorCode::unsupported, "rlx writes Phi-3 GGUF files without a sliding window (", c.sliding_window, ")");
  std::vector<gguf::KeyValue> md;
  auto kv = [&](const std::string& k, gguf::Value v) { md.push_back({k, std::move(v), 0}); };
  write_gguf_config(c, md);
  kv("general.file_type", gguf::Value::u32(static_cast<uint32_t>(tt->type == gguf::GgmlType::f32 ? 0 : 1)));
  const bool rlx_g128 = *qt == quant::QType::int4_g128 || *qt == quant::QType::int4_g128_asym;
  // rlx's own block types (rlx/gguf.h) are announced by a key too, for tools listing metadata
  if (rlx_g128) kv("rlx.quantization", gguf::Value::string(*qt == quant::QType::int4_g128 ? "int4-g128" : "int4-g128-asym"));
  if (!tokenizer_json_path.empty()) {
    RLX_ASSIGN_OR_RETURN(text::BpeTokenizer tok, text::BpeTokenizer::from_json_file(tokenizer_json_path));
    for (auto& [k, v] : tok.to_gguf_metadata()) kv(k, std::move(v));
    // the folder's chat template travels with its tokenizer, as llama.cpp's converter does
    const std::string folder = std::filesystem::path(tokenizer_json_path).parent_path().string();
    if (auto t = text::load_chat_template(folder.empty() ? "." : folder)) kv("tokenizer.chat_template", gguf::Value::string(t->source()));
  }
  // the f32 values of Hugging Face tensor `hname`
  auto values = [&](const std::string& hname) -> Expected<Tensor> {
    auto it = w.tensors.find(hname);
    if (it == w.tensors.end()) return error(ErrorCode::invalid_argument, "no tensor '", hname, "' to write");
    if (!it->second.format.empty()) return error(ErrorCode::unsupported, "tensor '", hname, "' is already quantized");
    const Tensor& t = it->second.data;
    if (t.dtype() == DType::f32) return t;
    Tensor f = Tensor::zeros(DType::f32, t.sizes());
    for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.get_f64(i));
    return f;
  };
  std::vector<gguf::TensorToWrite> tensors;
  auto put = [&](const std::string& gname, const Tensor& f, const std::string& hname) -> Status {
    gguf::TensorToWrite tw;
    tw.name = gname;
    if (f.rank() == 1) {  // norms and biases stay f32, as llama.cpp keeps them
      tw.type = gguf::GgmlType::f32;
      tw.ne = {f.sizes()[0]};
      tw.data = f;
    } else {
      const int64_t rows = f.sizes()[0], cols = f.sizes()[1];
      quant::QType q = *qt;
      auto rb = quant::row_bytes(q, cols);
      if (!rb && (quant::qtype_info(q).block_elems == 256 || rlx_g128)) {
        // rows that 256-value k-quant blocks do not tile fall back to q8_0 (llama.cpp too
        // falls back to a 32-value format for such tensors); rows that groups of 128 do not
        // tile to the same 4-bit scheme in groups of 32 (q4_0 / q4_1)
        q = *qt == quant::QType::int4_g128 ? quant::QType::q4_0 : *qt == quant::QType::int4_g128_asym ? quant::QType::q4_1 : quant::QType::q8_0;
        rb = quant::row_bytes(q, cols);
        if (fallbacks && rb) fallbacks->push_back(cat(hname, " (", cols, " columns) as ", quant::qtype_name(q)));
      }
      if (!rb) return error(ErrorCode::invalid_argument, "tensor '", hname, "' rows of ", cols, " do not fit ", gguf_type, " blocks");
      tw.type = static_cast<gguf::GgmlType>(quant::qtype_info(q).ggml_type);
      tw.ne = {cols, rows};
      tw.data = Tensor::zeros(DType::u8, {rows * *rb});
      for (int64_t r = 0; r < rows; ++r)
        RLX_TRY(quant::quantize_row(q, f.data<float>() + r * cols, tw.data.data<uint8_t>() + r * *rb, cols));
    }
    tensors.push_back(std::move(tw));
    return Status::ok();
  };
  // a norm scale as llama.cpp's conversion stores it (1 + w for Gemma's checkpoints)
  auto norm = [&](const std::string& gname, const std::string& hname) -> Status {
    RLX_ASSIGN_OR_RETURN(Tensor f, values(hname));
    if (c.norm_plus_one) {
      Tensor g = Tensor::zeros(DType::f32, f.sizes());
      for (int64_t i = 0; i < f.numel(); ++i) g.data<float>()[i] = 1.f + f.data<float>()[i];
      f = g;
    }
    return put(gname, f, hname);
  };
  RLX_ASSIGN_OR_RETURN(Tensor emb, values("model.embed_tokens.weight"));
  RLX_TRY(put("token_embd.weight", emb, "model.embed_tokens.weight"));
  RLX_TRY(norm("output_norm.weight", "model.norm.weight"));
  if (!c.tie_embeddings) {
    RLX_ASSIGN_OR_RETURN(Tensor head, values("lm_head.weight"));
    RLX_TRY(put("output.weight", head, "lm_head.weight"));
  }
  auto factors = [](const std::vector<double>& fs) {
    Tensor t = Tensor::zeros(DType::f32, {static_cast<int64_t>(fs.size())});
    for (size_t i = 0; i < fs.size(); ++i) t.data<float>()[i] = static_cast<float>(fs[i]);
    return t;
  };
  if (c.rope_scaling.kind == RopeScaling::Kind::llama3 || !c.rope_freq_factors.empty())
    RLX_TRY(put("rope_freqs.weight", factors(c.rope_freq_factors.empty() ? llama3_rope_factors(c) : c.rope_freq_factors),
                "rope_freqs"));
  if (c.rope_scaling.kind == RopeScaling::Kind::longrope) {
    RLX_TRY(put("rope_factors_long.weight", factors(c.rope_scaling.long_factor), "rope_factors_long"));
    RLX_TRY(put("rope_factors_short.weight", factors(c.rope_scaling.short_factor), "rope_factors_short"));
  }
  // llama.cpp rotates adjacent pairs for "llama" files: their q/k rows are permuted (unless
  // these weights came from such a file)
  const bool permute = gguf_arch(c.family) == "llama" && !c.rope_interleaved;
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".", p = layer_prefix(l);
    for (const LayerTensorName& n : layer_tensor_names(c)) {
      const std::string hname = p + n.hf;
      if (n.vector && n.hf.ends_with("norm.weight")) {
        RLX_TRY(norm(blk + n.gguf, hname));
        continue;
      }
      if (c.family == DecoderFamily::phi3 && (n.gguf == "attn_q.weight" || n.gguf == "ffn_gate.weight")) {
        // Phi-3's files fuse q/k/v and gate/up, as its checkpoints do
        const bool attn = n.gguf == "attn_q.weight";
        std::vector<std::string> names = attn ? std::vector<std::string>{"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                                                         "self_attn.v_proj.weight"}
                                              : std::vector<std::string>{"mlp.gate_proj.weight", "mlp.up_proj.weight"};
        std::vector<Tensor> parts;
        for (const std::string& x : names) {
          RLX_ASSIGN_OR_RETURN(Tensor t, values(p + x));
          parts.push_back(t);
        }
        std::vector<const Tensor*> ptrs;
        for (const Tensor& t : parts) ptrs.push_back(&t);
        RLX_TRY(put(blk + (attn ? "attn_qkv.weight" : "ffn_up.weight"), stack_rows(ptrs), hname));
        continue;
      }
      if (c.family == DecoderFamily::phi3 && (n.gguf == "attn_k.weight" || n.gguf == "attn_v.weight" || n.gguf == "ffn_up.weight"))
        continue;  // (in the fused matrices above)
      RLX_ASSIGN_OR_RETURN(Tensor f, values(hname));
      if (permute && (n.gguf == "attn_q.weight" || n.gguf == "attn_k.weight"))
        f = permute_for_interleaved_rope(f, n.gguf == "attn_q.weight" ? c.heads : c.kv_heads);
      RLX_TRY(put(blk + n.gguf, f, hname));
    }
  }
  return gguf::save(path, md, tensors);
}

Status write_random_decoder(const std::string& dir, const DecoderConfig& c, uint64_t seed, const std::string& gguf_path,
                            const std::string& gguf_type) {
  RLX_TRY(c.validate(cat(family_name(c.family), " config")));
  mkdir(dir.c_str(), 0755);
  auto tensors = random_tensors(c, seed);
  DecoderConfig cj = c;
  if (cj.eos_token_id < 0) cj.eos_token_id = text::synthetic_bpe_eos_id(c.vocab_size);
  if (c.family == DecoderFamily::phi3) {
    // Phi-3's checkpoints hold fused qkv_proj and gate_up_proj
    std::map<std::string, Tensor> by_name(tensors.begin(), tensors.end());
    std::vector<std::pair<std::string, Tensor>> fused;
    for (auto& [name, t] : tensors) {
      const auto dot = name.rfind("self_attn.");
      const auto mlp = name.rfind("mlp.");
      if (name.ends_with("self_attn.q_proj.weight")) {
        const std::string p = name.substr(0, dot);
        fused.emplace_back(p + "self_attn.qkv_proj.weight",
                           stack_rows({&t, &by_name[p + "self_attn.k_proj.weight"], &by_name[p + "self_attn.v_proj.weight"]}));
      } else if (name.ends_with("mlp.gate_proj.weight")) {
        const std::string p = name.substr(0, mlp);
        fused.emplace_back(p + "mlp.gate_up_proj.weight", stack_rows({&t, &by_name[p + "mlp.up_proj.weight"]}));
      } else if (!name.ends_with("k_proj.weight") && !name.ends_with("v_proj.weight") && !name.ends_with("up_proj.weight")) {
        fused.emplace_back(name, t);
      }
    }
    RLX_TRY(safetensors::save(dir + "/model.safetensors", fused, {{"format", "pt"}}));
  } else {
    RLX_TRY(safetensors::save(dir + "/model.safetensors", tensors, {{"format", "pt"}}));
  }
  {
    std::ofstream f(dir + "/config.json");
    f << cj.to_json() << "\n";
    if (!f) return error(ErrorCode::io_error, "cannot write ", dir, "/config.json");
  }
  RLX_TRY(text::write_synthetic_bpe_tokenizer(dir + "/tokenizer.json", c.vocab_size, seed + 1));
  {
    std::ofstream f(dir + "/tokenizer_config.json");
    // ChatML, which the synthetic tokenizer's special tokens spell (rlx generate --chat)
    const nlohmann::json tc = {{"tokenizer_class", "Qwen2Tokenizer"}, {"eos_token", "<|endoftext|>"}, {"pad_token", "<|endoftext|>"},
                               {"add_bos_token", false}, {"chat_template", kChatMlTemplate}};
    f << tc.dump(2) << "\n";
    if (!f) return error(ErrorCode::io_error, "cannot write ", dir, "/tokenizer_config.json");
  }
  if (!gguf_path.empty()) {
    DecoderWeights w;
    w.config = cj;
    w.source = dir;
    for (auto& [name, t] : tensors) w.tensors[name] = DecoderWeight{t, ""};
    RLX_TRY(write_decoder_gguf(gguf_path, w, gguf_type, dir + "/tokenizer.json"));
  }
  return Status::ok();
}

}  // namespace rlx::models

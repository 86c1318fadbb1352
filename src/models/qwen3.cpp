#include "qwen3.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/pipeline.h"
#include "models/text/bpe.h"
#include "passes/weight_of.h"
#include "kernels/ggml_quants.h"
#include "rlx/gguf.h"
#include "rlx/mapped_file.h"
#include "support/json_fields.h"
#include "rlx/op_builder.h"
#include "rlx/safetensors.h"

namespace rlx::models {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string layer_prefix(int64_t l) { return "model.layers." + std::to_string(l) + "."; }

// llama.cpp's per-layer tensor names and their Hugging Face counterparts.
const std::vector<std::pair<std::string, std::string>>& gguf_layer_names() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  return m;
}

// Builds the step graph; weights are checked for shape as they are used.
class StepBuilder {
 public:
  StepBuilder(Graph& g, const Qwen3Weights& w) : g_(g), gb_(g), o_(gb_), w_(w) {}
  OpBuilder& o() { return o_; }
  Status status() const { return st_.is_ok() ? o_.status() : st_; }

  const Qwen3Weight* find(const std::string& name) {
    auto it = w_.tensors.find(name);
    if (it == w_.tensors.end()) {
      if (st_.is_ok()) st_ = error(ErrorCode::format_error, w_.source, ": the checkpoint has no tensor '", name, "'");
      return nullptr;
    }
    return &it->second;
  }

  // A dense weight [shape] as an f32 param.
  ValueId dense(const std::string& name, const Sizes& shape) {
    if (!status().is_ok()) return kNoValue;
    const Qwen3Weight* w = find(name);
    if (!w) return kNoValue;
    if (!w->format.empty()) {
      st_ = error(ErrorCode::unsupported, w_.source, ": tensor '", name, "' is ", w->format, ", expected a float tensor");
      return kNoValue;
    }
    if (w->data.sizes() != shape) {
      st_ = error(ErrorCode::shape_error, w_.source, ": tensor '", name, "' is ", sizes_to_string(w->data.sizes()),
                  ", expected ", sizes_to_string(shape));
      return kNoValue;
    }
    auto cached = params_.find(name);
    if (cached != params_.end()) return cached->second;
    Tensor v = w->data;
    if (v.dtype() != DType::f32) {
      if (!is_float(v.dtype())) {
        st_ = error(ErrorCode::dtype_error, w_.source, ": tensor '", name, "' is ", dtype_name(v.dtype()), ", expected floats");
        return kNoValue;
      }
      Tensor c = Tensor::zeros(DType::f32, v.sizes());
      float* d = c.data<float>();
      for (int64_t i = 0; i < v.numel(); ++i) d[i] = static_cast<float>(v.get_f64(i));
      v = c;
    }
    g_.weights[name] = v;
    ValueId p = o_.param(name, v.type());
    params_[name] = p;
    return p;
  }

  // x [..., in] times the Linear weight [out, in] (dense or quantized) -> [..., out].
  ValueId linear(ValueId x, const std::string& name, int64_t in, int64_t out) {
    if (!status().is_ok()) return kNoValue;
    const Qwen3Weight* w = find(name);
    if (!w) return kNoValue;
    if (w->format.empty() && w->data.dtype() == DType::f16 && w->data.sizes() == Sizes{out, in}) {
      // f16 checkpoints (Hugging Face folders) run like f16 GGUF: half the bytes per step
      // (its own weight name: a tied embedding is also used as f32 for the lookup)
      const std::string rows_name = name + ".f16_rows";
      auto cached = params_.find(rows_name);
      ValueId p;
      if (cached != params_.end()) {
        p = cached->second;
      } else {
        Tensor rows(DType::u8, {out, 2 * in}, w->data.storage(), w->data.byte_offset());
        g_.weights[rows_name] = rows;
        p = o_.param(rows_name, rows.type());
        params_[rows_name] = p;
      }
      return o_.op(Op::QMatMul, {x, p}, Attrs{{"format", std::string("f16")}});
    }
    if (w->format.empty() && w_.tensors.count(name + "_scale")) return int8_linear(x, name, *w, in, out);
    if (w->format.empty()) {
      ValueId p = dense(name, {out, in});
      return o_.dot(x, p, {}, {}, {o_.rank(x) - 1}, {1});
    }
    auto qf = quant_format(w->format);
    if (!qf) {
      st_ = error(ErrorCode::unsupported, w_.source, ": tensor '", name, "' has unknown format ", w->format);
      return kNoValue;
    }
    if (in % qf->block_elems != 0 || w->data.dtype() != DType::u8 ||
        w->data.sizes() != Sizes{out, in / qf->block_elems * qf->block_bytes}) {
      st_ = error(ErrorCode::shape_error, w_.source, ": tensor '", name, "' (", w->format, ") is ",
                  w->data.type().to_string(), ", expected ", out, " rows of ", in, " values");
      return kNoValue;
    }
    auto cached = params_.find(name);
    ValueId p;
    if (cached != params_.end()) {
      p = cached->second;
    } else {
      g_.weights[name] = w->data;
      p = o_.param(name, w->data.type());
      params_[name] = p;
    }
    return o_.op(Op::QMatMul, {x, p}, Attrs{{"format", w->format}});
  }

  // A Linear quantized by `rlx quantize --scheme int8` (quant/int8_weights.h): i8 weight and
  // f32 per-row "<name>_scale", run as int8_matmul with activations quantized per token.
  ValueId int8_linear(ValueId x, const std::string& name, const Qwen3Weight& w, int64_t in, int64_t out) {
    const Qwen3Weight& s = w_.tensors.at(name + "_scale");
    if (w.data.dtype() != DType::i8 || w.data.sizes() != Sizes{out, in} || !s.format.empty() ||
        s.data.dtype() != DType::f32 || s.data.sizes() != Sizes{out}) {
      st_ = error(ErrorCode::format_error, w_.source, ": tensor '", name, "' must be i8 [", out, ", ", in,
                  "] beside its f32 ", name, "_scale [", out, "]");
      return kNoValue;
    }
    auto param = [&](const std::string& n, const Tensor& t) {
      auto cached = params_.find(n);
      if (cached != params_.end()) return cached->second;
      g_.weights[n] = t;
      ValueId p = o_.param(n, t.type());
      params_[n] = p;
      return p;
    };
    return o_.op(Op::Int8MatMul, {x, param(name, w.data), param(name + "_scale", s.data)});
  }

  ValueId rms_norm(ValueId x, const std::string& name, int64_t n, double eps) {
    return o_.rms_norm(x, dense(name, {n}), -1, eps);
  }

 private:
  Graph& g_;
  GraphBuilder gb_;
  OpBuilder o_;
  const Qwen3Weights& w_;
  Status st_;
  std::map<std::string, ValueId> params_;
};

}  // namespace

Status Qwen3Config::validate(const std::string& where) const {
  for (auto [name, v] : {std::pair{"vocab_size", vocab_size}, {"hidden_size", hidden}, {"num_hidden_layers", layers},
                         {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads}, {"head_dim", head_dim},
                         {"intermediate_size", intermediate}, {"max_position_embeddings", max_positions}})
    if (v <= 0 || v > (int64_t{1} << 24)) return error(ErrorCode::format_error, where, ": ", name, " = ", v, " is out of range (1 to 2^24)");
  if (layers > 4096) return error(ErrorCode::format_error, where, ": num_hidden_layers = ", layers, " is out of range (1 to 4096)");
  if (heads % kv_heads != 0)
    return error(ErrorCode::format_error, where, ": num_attention_heads ", heads, " is not a multiple of num_key_value_heads ",
                 kv_heads);
  if (head_dim % 2 != 0) return error(ErrorCode::format_error, where, ": head_dim ", head_dim, " is odd");
  if (!(rms_eps > 0) || !(rope_theta > 0)) return error(ErrorCode::format_error, where, ": rms_norm_eps and rope_theta must be positive");
  return Status::ok();
}

Expected<Qwen3Config> Qwen3Config::from_json_file(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, uint64_t{1} << 24));
  return from_json(text, path);
}

Expected<Qwen3Config> Qwen3Config::from_json(std::string_view text, const std::string& path) {
  RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::parse_object(text, path));
  const json::Fields f(j, path);
  Qwen3Config c;
  RLX_TRY(json::require_string(f, "model_type"));
  RLX_TRY(f.read("vocab_size", c.vocab_size));
  RLX_TRY(f.read("hidden_size", c.hidden));
  RLX_TRY(f.read("num_hidden_layers", c.layers));
  RLX_TRY(f.read("num_attention_heads", c.heads));
  c.kv_heads = c.heads;
  RLX_TRY(f.read("num_key_value_heads", c.kv_heads));
  c.head_dim = c.hidden / std::max<int64_t>(1, c.heads);
  RLX_TRY(f.read("head_dim", c.head_dim));
  RLX_TRY(f.read("intermediate_size", c.intermediate));
  RLX_TRY(f.read("max_position_embeddings", c.max_positions));
  RLX_TRY(f.read("rms_norm_eps", c.rms_eps));
  RLX_TRY(f.read("rope_theta", c.rope_theta));
  RLX_TRY(f.read("tie_word_embeddings", c.tie_embeddings));
  std::string act = "silu";
  RLX_TRY(f.read("hidden_act", act));
  if (act != "silu") return error(ErrorCode::unsupported, path, ": hidden_act '", act.substr(0, 40), "' is not supported (Qwen3 uses silu)");
  if (f.has("rope_scaling")) return error(ErrorCode::unsupported, path, ": rope_scaling is not supported");
  bool sliding = false, bias = false;
  RLX_TRY(f.read("use_sliding_window", sliding));
  if (sliding) return error(ErrorCode::unsupported, path, ": use_sliding_window is not supported");
  RLX_TRY(f.read("attention_bias", bias));
  if (bias) return error(ErrorCode::unsupported, path, ": attention_bias is not supported (Qwen3 has none)");
  RLX_TRY(f.read("bos_token_id", c.bos_token_id, 0, INT64_MAX));
  // eos_token_id: one id, or a list whose first is taken
  if (f.has("eos_token_id") && j["eos_token_id"].is_array()) {
    const nlohmann::json& e = j["eos_token_id"];
    if (!e.empty() && !e[0].is_number_integer())
      return error(ErrorCode::format_error, path, ": 'eos_token_id' must be an integer or a list of integers");
    if (!e.empty()) c.eos_token_id = e[0].get<int64_t>();
  } else {
    RLX_TRY(f.read("eos_token_id", c.eos_token_id, 0, INT64_MAX));
  }
  RLX_TRY(c.validate(path));
  return c;
}

std::string Qwen3Config::to_json() const {
  nlohmann::json j = {{"architectures", {"Qwen3ForCausalLM"}},
                      {"model_type", "qwen3"},
                      {"vocab_size", vocab_size},
                      {"hidden_size", hidden},
                      {"num_hidden_layers", layers},
                      {"num_attention_heads", heads},
                      {"num_key_value_heads", kv_heads},
                      {"head_dim", head_dim},
                      {"intermediate_size", intermediate},
                      {"max_position_embeddings", max_positions},
                      {"rms_norm_eps", rms_eps},
                      {"rope_theta", rope_theta},
                      {"rope_scaling", nullptr},
                      {"hidden_act", "silu"},
                      {"attention_bias", false},
                      {"tie_word_embeddings", tie_embeddings},
                      {"torch_dtype", "float32"}};
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  if (eos_token_id >= 0) j["eos_token_id"] = eos_token_id;
  return j.dump(2);
}

bool is_qwen3_model(const std::string& path) {
  if (!is_dir(path)) {
    auto f = gguf::load(path);
    if (!f) return false;
    auto arch = f->get_string("general.architecture");
    return arch && *arch == "qwen3";
  }
  auto j = json::read_object_file(path + "/config.json");
  if (!j) return false;
  if (j->contains("model_type") && (*j)["model_type"].is_string() && (*j)["model_type"].get<std::string>() == "qwen3")
    return true;
  if (j->contains("architectures") && (*j)["architectures"].is_array())
    for (const auto& a : (*j)["architectures"])
      if (a.is_string() && a.get<std::string>().rfind("Qwen3", 0) == 0) return true;
  return false;
}

Expected<Qwen3Weights> load_qwen3_folder(const std::string& dir) {
  Qwen3Weights w;
  RLX_ASSIGN_OR_RETURN(w.config, Qwen3Config::from_json_file(dir + "/config.json"));
  std::string file = dir + "/model.safetensors";
  struct stat st;
  if (stat(file.c_str(), &st) != 0) file = dir + "/model.safetensors.index.json";
  RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(file));
  w.source = file;
  for (auto& [name, t] : f.tensors) w.tensors[name] = Qwen3Weight{t, ""};
  if (w.config.tie_embeddings) w.tensors.erase("lm_head.weight");
  return w;
}

Expected<Qwen3Weights> load_qwen3_gguf(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::load(path));
  RLX_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  if (arch != "qwen3")
    return error(ErrorCode::unsupported, path, ": general.architecture is '", arch, "', expected 'qwen3'");
  Qwen3Weights w;
  w.source = path;
  Qwen3Config& c = w.config;
  RLX_ASSIGN_OR_RETURN(c.hidden, f.get_int("qwen3.embedding_length"));
  RLX_ASSIGN_OR_RETURN(c.layers, f.get_int("qwen3.block_count"));
  RLX_ASSIGN_OR_RETURN(c.heads, f.get_int("qwen3.attention.head_count"));
  c.kv_heads = c.heads;
  if (f.find("qwen3.attention.head_count_kv")) {
    RLX_ASSIGN_OR_RETURN(c.kv_heads, f.get_int("qwen3.attention.head_count_kv"));
  }
  RLX_ASSIGN_OR_RETURN(c.intermediate, f.get_int("qwen3.feed_forward_length"));
  c.head_dim = c.hidden / std::max<int64_t>(1, c.heads);
  if (f.find("qwen3.attention.key_length")) {
    RLX_ASSIGN_OR_RETURN(c.head_dim, f.get_int("qwen3.attention.key_length"));
  }
  if (f.find("qwen3.context_length")) {
    RLX_ASSIGN_OR_RETURN(c.max_positions, f.get_int("qwen3.context_length"));
  }
  if (f.find("qwen3.rope.freq_base")) {
    RLX_ASSIGN_OR_RETURN(c.rope_theta, f.get_float("qwen3.rope.freq_base"));
  }
  if (f.find("qwen3.attention.layer_norm_rms_epsilon")) {
    RLX_ASSIGN_OR_RETURN(c.rms_eps, f.get_float("qwen3.attention.layer_norm_rms_epsilon"));
  }
  if (f.find("tokenizer.ggml.eos_token_id")) {
    RLX_ASSIGN_OR_RETURN(c.eos_token_id, f.get_int("tokenizer.ggml.eos_token_id"));
  }
  if (f.find("tokenizer.ggml.bos_token_id")) {
    RLX_ASSIGN_OR_RETURN(c.bos_token_id, f.get_int("tokenizer.ggml.bos_token_id"));
  }
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) return error(ErrorCode::format_error, path, ": no tensor 'token_embd.weight'");
  if (emb->ne.size() != 2) return error(ErrorCode::format_error, path, ": 'token_embd.weight' must be 2-D");
  c.vocab_size = emb->ne[1];
  c.tie_embeddings = f.find_tensor("output.weight") == nullptr;
  RLX_TRY(c.validate(path));

  // A matrix: typed f32 stays dense; everything else (f16, block formats) is qmatmul rows.
  auto matrix = [&](const gguf::TensorInfo& info) -> Expected<Qwen3Weight> {
    if (info.type == gguf::GgmlType::f32) {
      RLX_ASSIGN_OR_RETURN(Tensor t, f.tensor(info));
      return Qwen3Weight{t, ""};
    }
    auto ti = gguf::ggml_type_info(static_cast<uint32_t>(info.type));
    if (!ti || !quant_format(ti->name))
      return error(ErrorCode::unsupported, path, ": tensor '", info.name, "' has type ",
                   ti ? std::string(ti->name) : std::string("?"), ", which qmatmul does not take");
    RLX_ASSIGN_OR_RETURN(Tensor t, f.tensor_blocks(info));
    return Qwen3Weight{t, std::string(ti->name)};
  };
  // A vector (norm scales) or the embedding table: decoded to f32.
  auto decoded = [&](const gguf::TensorInfo& info) -> Expected<Qwen3Weight> {
    if (info.type == gguf::GgmlType::f32 || info.type == gguf::GgmlType::f16 || info.type == gguf::GgmlType::bf16) {
      RLX_ASSIGN_OR_RETURN(Tensor t, f.tensor(info));
      return Qwen3Weight{t, ""};
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
    return Qwen3Weight{out, ""};
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
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    for (const auto& [gname, hname] : gguf_layer_names()) {
      RLX_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, need(blk + gname));
      const bool vec = t->ne.size() == 1;
      RLX_ASSIGN_OR_RETURN(w.tensors[layer_prefix(l) + hname], vec ? decoded(*t) : matrix(*t));
    }
  }
  return w;
}

Expected<Qwen3Weights> load_qwen3(const std::string& path) {
  if (is_dir(path)) return load_qwen3_folder(path);
  return load_qwen3_gguf(path);
}

Expected<Graph> build_qwen3(const Qwen3Weights& w, const Qwen3GraphOptions& opt) {
  const Qwen3Config& c = w.config;
  RLX_TRY(c.validate(w.source));
  if (opt.context <= 0) return error(ErrorCode::invalid_argument, "the KV cache needs at least one slot");
  Graph g;
  g.name = opt.decode ? "qwen3_decode" : "qwen3_prefill";
  const Dim B = Dim::symbol("batch");
  const Dim S = opt.decode ? Dim(1) : Dim::symbol("seq");
  const int64_t H = c.hidden, Hq = c.heads, Hkv = c.kv_heads, D = c.head_dim, ctx = opt.context;
  ValueId ids = g.add_input("input_ids", TensorType{DType::i64, {B, S}});
  ValueId pos = g.add_input("positions", TensorType{DType::i64, {B, S}});
  ValueId slots = g.add_input("slots", TensorType{DType::i64, {S}});
  ValueId mask = g.add_input("mask", TensorType{DType::boolean, {B, Dim(1), S, Dim(ctx)}});
  std::vector<ValueId> kc(c.layers), vc(c.layers);
  for (int64_t l = 0; l < c.layers; ++l) {
    kc[l] = g.add_input("k_cache." + std::to_string(l), TensorType{DType::f32, {B, Dim(Hkv), Dim(ctx), Dim(D)}});
    vc[l] = g.add_input("v_cache." + std::to_string(l), TensorType{DType::f32, {B, Dim(Hkv), Dim(ctx), Dim(D)}});
  }
  StepBuilder b(g, w);
  OpBuilder& o = b.o();
  // tensor parallelism (models/tensor_parallel.h): c counts this rank's heads and MLP
  // features; the vocabulary is split into tp.vocab_rows(V) rows per rank
  const TensorParallel& tp = w.tp;
  const int64_t V = c.vocab_size, Vl = tp.active() ? tp.vocab_rows(V) : V;
  ValueId x = vocab_parallel_embedding(o, tp, b.dense("model.embed_tokens.weight", {Vl, H}), ids,
                                       tp.vocab_begin(V), Vl);  // [B, S, H]
  std::vector<ValueId> new_caches;
  const Attrs rope_attrs{{"theta", c.rope_theta}, {"layout", std::string("bshd")}};
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = layer_prefix(l);
    ValueId h = b.rms_norm(x, p + "input_layernorm.weight", H, c.rms_eps);
    ValueId q = o.reshape(b.linear(h, p + "self_attn.q_proj.weight", H, Hq * D), {0, 0, Hq, D});
    ValueId k = o.reshape(b.linear(h, p + "self_attn.k_proj.weight", H, Hkv * D), {0, 0, Hkv, D});
    ValueId v = o.reshape(b.linear(h, p + "self_attn.v_proj.weight", H, Hkv * D), {0, 0, Hkv, D});
    q = o.op(Op::Rope, {b.rms_norm(q, p + "self_attn.q_norm.weight", D, c.rms_eps), pos}, rope_attrs);
    k = o.op(Op::Rope, {b.rms_norm(k, p + "self_attn.k_norm.weight", D, c.rms_eps), pos}, rope_attrs);
    // the cache is [B, Hkv, ctx, D]: this step's keys and values land at their slots
    ValueId k2 = o.op(Op::Scatter, {kc[l], slots, o.transpose(k, {0, 2, 1, 3})}, Attrs{{"axis", int64_t{2}}});
    ValueId v2 = o.op(Op::Scatter, {vc[l], slots, o.transpose(v, {0, 2, 1, 3})}, Attrs{{"axis", int64_t{2}}});
    new_caches.push_back(k2);
    new_caches.push_back(v2);
    ValueId att = o.op(Op::Attention, {o.transpose(q, {0, 2, 1, 3}), k2, v2, mask}, Attrs{{"causal", int64_t{0}}});
    att = o.reshape(o.transpose(att, {0, 2, 1, 3}), {0, 0, Hq * D});
    x = o.add(x, tp_all_reduce(o, tp, b.linear(att, p + "self_attn.o_proj.weight", Hq * D, H)));
    h = b.rms_norm(x, p + "post_attention_layernorm.weight", H, c.rms_eps);
    ValueId gate = b.linear(h, p + "mlp.gate_proj.weight", H, c.intermediate);
    ValueId up = b.linear(h, p + "mlp.up_proj.weight", H, c.intermediate);
    x = o.add(x, tp_all_reduce(o, tp, b.linear(o.mul(o.silu(gate), up), p + "mlp.down_proj.weight",
                                                 c.intermediate, H)));
    // where pipeline parallelism may cut the model (src/runtime/pipeline.h)
    if (l + 1 < c.layers && x != kNoValue) g.values[x].name = "layer." + std::to_string(l) + ".out";
  }
  if (!opt.all_logits && !opt.decode)
    x = o.slice(x, {-1}, {std::numeric_limits<int64_t>::max()}, {1});
  x = b.rms_norm(x, "model.norm.weight", H, c.rms_eps);
  const std::string head = c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  ValueId logits = gather_vocab_logits(o, tp, b.linear(x, head, H, Vl), V);
  RLX_TRY(b.status());
  g.values[logits].name = "logits";
  g.outputs = {logits};
  for (int64_t l = 0; l < c.layers; ++l) {
    g.values[new_caches[2 * l]].name = "k_cache_out." + std::to_string(l);
    g.values[new_caches[2 * l + 1]].name = "v_cache_out." + std::to_string(l);
    g.outputs.push_back(new_caches[2 * l]);
    g.outputs.push_back(new_caches[2 * l + 1]);
  }
  return g;
}

std::vector<std::pair<int, int>> qwen3_cache_donations(const Qwen3Config& c) {
  std::vector<std::pair<int, int>> d;
  for (int l = 0; l < static_cast<int>(c.layers); ++l) {
    d.emplace_back(1 + 2 * l, 4 + 2 * l);
    d.emplace_back(2 + 2 * l, 5 + 2 * l);
  }
  return d;
}

// ---------------------------------------------------------------------------------------
// Session

Expected<std::unique_ptr<Qwen3Session>> Qwen3Session::create(const Qwen3Weights& w, int64_t batch, int64_t context,
                                                             const std::string& device, bool all_logits,
                                                             Qwen3Parallel par, passes::Precision precision) {
  if ((w.tp.active() || par.pipeline) && !par.comm)
    return error(ErrorCode::invalid_argument, "a tensor- or pipeline-parallel session needs a communicator");
  if (w.tp.active() && par.pipeline && (!par.stage_comm || par.stage_comm->size() != w.tp.size))
    return error(ErrorCode::invalid_argument, "tensor and pipeline parallelism together need the stage's group of ",
                 w.tp.size, " tensor-parallel ranks (Qwen3Parallel::stage_comm)");
  if (batch <= 0) return error(ErrorCode::invalid_argument, "batch must be positive");
  std::unique_ptr<Qwen3Session> s(new Qwen3Session());
  s->config_ = w.config;
  s->batch_ = batch;
  s->context_ = context;
  CompileOptions co;
  co.device = device;
  co.donate = qwen3_cache_donations(w.config);
  // collectives inside the graph: the tensor-parallel group (of the stage, with a pipeline)
  co.comm = par.pipeline ? (w.tp.active() ? par.stage_comm : nullptr) : par.comm;
  s->all_logits_ = all_logits;
  RLX_ASSIGN_OR_RETURN(Graph pg, build_qwen3(w, {.context = context, .all_logits = all_logits, .decode = false}));
  RLX_ASSIGN_OR_RETURN(Graph dg, build_qwen3(w, {.context = context, .all_logits = false, .decode = true}));
  for (const auto& [name, t] : dg.weights)
    if (name != "model.embed_tokens.weight" || w.config.tie_embeddings) s->weight_bytes_ += static_cast<int64_t>(t.nbytes());
  // (after counting the weights: the widened form's rounded copies replace the originals, same
  // size; the narrow form's products read 16-bit copies, half, counted below)
  if (precision != passes::Precision::f32) {
    // mixed precision (passes/autocast.h): each graph gets its own rounded copy of the matrices,
    // in the form that is fastest on the device (native narrow products where it has fast ones)
    RLX_ASSIGN_OR_RETURN(auto dev, get_device(device));
    const DType narrow = passes::precision_dtype(precision);
    const passes::AutocastOptions ao{.narrow = narrow, .compute = passes::inference_compute(dev->info(), narrow)};
    RLX_TRY(passes::autocast(pg, ao).status());
    RLX_TRY(passes::autocast(dg, ao).status());
    if (ao.compute == passes::AutocastOptions::Compute::narrow) {
      // each matrix a product reads through a cast (folded into a 16-bit constant) streams half
      // its f32 bytes per step (the tied embedding's f32 rows are gathered, a few per step)
      for (const Node& n : dg.nodes) {
        if (n.op != Op::Cast || passes::weight_of(dg, n.inputs[0]) == nullptr) continue;
        const Tensor& t = *passes::weight_of(dg, n.inputs[0]);
        if (t.rank() >= 2) s->weight_bytes_ -= static_cast<int64_t>(t.nbytes()) / 2;
      }
    }
  }
  if (par.pipeline) {
    // logits (output 0) go to every rank; each stage keeps its layers' caches
    const dist::PipelineRunOptions run{par.micro_batches, {0}};
    RLX_ASSIGN_OR_RETURN(std::vector<ValueId> pcuts, dist::even_cuts(pg, par.comm->size()));
    RLX_ASSIGN_OR_RETURN(std::vector<ValueId> dcuts, dist::even_cuts(dg, par.comm->size()));
    RLX_ASSIGN_OR_RETURN(s->prefill_pp_, dist::PipelineRunner::create(pg, pcuts, par.comm, co, run));
    RLX_ASSIGN_OR_RETURN(s->decode_pp_, dist::PipelineRunner::create(dg, dcuts, par.comm, co, run));
  } else {
    RLX_ASSIGN_OR_RETURN(s->prefill_, Model::compile(std::move(pg), co));
    RLX_ASSIGN_OR_RETURN(s->decode_, Model::compile(std::move(dg), co));
  }
  const Qwen3Config& c = w.config;
  for (int64_t l = 0; l < 2 * c.layers; ++l)
    s->caches_.push_back(Tensor::zeros(DType::f32, {batch, c.kv_heads, context, c.head_dim}));
  s->pad_.assign(batch, 0);
  s->length_.assign(batch, 0);
  return s;
}

Qwen3Session::~Qwen3Session() = default;

Status Qwen3Session::prepare(int64_t prompt_len) {
  if (prefill_pp_) return Status::ok();  // each stage compiles its variants on first use
  RLX_TRY(prefill_->prepare({{"batch", batch_}, {"seq", prompt_len}}).status());
  RLX_TRY(decode_->prepare({{"batch", batch_}}).status());
  return Status::ok();
}

Expected<Tensor> Qwen3Session::step(const std::vector<int64_t>& ids, int64_t seq, bool prefill) {
  if (used_ + seq > context_)
    return error(ErrorCode::out_of_range, "the KV cache holds ", context_, " tokens; this step needs ", used_ + seq);
  Tensor tid = Tensor::zeros(DType::i64, {batch_, seq});
  Tensor tpos = Tensor::zeros(DType::i64, {batch_, seq});
  Tensor tslots = Tensor::zeros(DType::i64, {seq});
  Tensor tmask = Tensor::zeros(DType::boolean, {batch_, 1, seq, context_});
  for (int64_t i = 0; i < seq; ++i) tslots.data<int64_t>()[i] = used_ + i;
  for (int64_t b = 0; b < batch_; ++b) {
    for (int64_t i = 0; i < seq; ++i) {
      const int64_t slot = used_ + i;
      tid.data<int64_t>()[b * seq + i] = ids[b * seq + i];
      tpos.data<int64_t>()[b * seq + i] = std::max<int64_t>(0, slot - pad_[b]);
      bool* m = tmask.data<bool>() + (b * seq + i) * context_;
      if (slot < pad_[b]) {
        m[slot] = true;  // a pad query sees only itself (no empty softmax)
      } else {
        for (int64_t j = pad_[b]; j <= slot; ++j) m[j] = true;
      }
    }
  }
  std::vector<Tensor> inputs{tid, tpos, tslots, tmask};
  for (const Tensor& t : caches_) inputs.push_back(t);
  if (prefill_pp_) {
    const Sizes lsizes{batch_, prefill && all_logits_ ? seq : 1, config_.vocab_size};
    Tensor& logits = logits_[lsizes];
    if (!logits.defined() || logits.sizes() != lsizes) logits = Tensor::zeros(DType::f32, lsizes);
    std::vector<Tensor> outputs{logits};
    for (const Tensor& t : caches_) outputs.push_back(t);
    RLX_TRY((prefill ? *prefill_pp_ : *decode_pp_).run_into(inputs, outputs));
    used_ += seq;
    return outputs[0];
  }
  Model& m = prefill ? *prefill_ : *decode_;
  RLX_ASSIGN_OR_RETURN(CompiledVariant * v, m.variant_for(inputs));
  const Shape& ls = v->primitive_graph.type(v->primitive_graph.outputs[0]).shape;
  RLX_ASSIGN_OR_RETURN(Sizes lsizes, static_sizes(ls, "logits"));
  // one logits buffer per shape, reused: a fresh 128 KB+ tensor per token costs page faults
  Tensor& logits = logits_[lsizes];
  if (!logits.defined() || logits.sizes() != lsizes) logits = Tensor::zeros(DType::f32, lsizes);
  std::vector<Tensor> outputs{logits};
  for (const Tensor& t : caches_) outputs.push_back(t);
  RLX_TRY(v->executable->run_into(inputs, outputs));
  used_ += seq;
  return outputs[0];
}

Expected<Tensor> Qwen3Session::prefill(const std::vector<std::vector<int64_t>>& prompts) {
  if (prompts.empty() || static_cast<int64_t>(prompts.size()) > batch_)
    return error(ErrorCode::invalid_argument, "prefill takes 1 to ", batch_, " prompts, got ", prompts.size());
  int64_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return error(ErrorCode::invalid_argument, "an empty prompt");
    for (int64_t t : p)
      if (t < 0 || t >= config_.vocab_size)
        return error(ErrorCode::invalid_argument, "token id ", t, " is outside the vocabulary of ", config_.vocab_size);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  used_ = 0;
  std::vector<int64_t> ids(batch_ * longest, 0);
  for (int64_t b = 0; b < batch_; ++b) {
    // missing sequences repeat the first prompt (their results are ignored)
    const auto& p = b < static_cast<int64_t>(prompts.size()) ? prompts[b] : prompts[0];
    pad_[b] = longest - static_cast<int64_t>(p.size());
    length_[b] = static_cast<int64_t>(p.size());
    for (size_t i = 0; i < p.size(); ++i) ids[b * longest + pad_[b] + static_cast<int64_t>(i)] = p[i];
  }
  return step(ids, longest, true);
}

Expected<Tensor> Qwen3Session::decode(const std::vector<int64_t>& tokens) {
  if (used_ == 0) return error(ErrorCode::invalid_argument, "decode before prefill");
  std::vector<int64_t> ids(batch_, tokens.empty() ? 0 : tokens[0]);
  for (size_t b = 0; b < tokens.size() && static_cast<int64_t>(b) < batch_; ++b) {
    if (tokens[b] < 0 || tokens[b] >= config_.vocab_size)
      return error(ErrorCode::invalid_argument, "token id ", tokens[b], " is outside the vocabulary of ", config_.vocab_size);
    ids[b] = tokens[b];
  }
  auto r = step(ids, 1, false);
  if (r)
    for (int64_t b = 0; b < batch_; ++b) ++length_[b];
  return r;
}

// ---------------------------------------------------------------------------------------
// Random models

namespace {

std::vector<std::pair<std::string, Tensor>> random_tensors(const Qwen3Config& c, uint64_t seed) {
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
  add("model.embed_tokens.weight", {c.vocab_size, c.hidden}, 0.f, 0.05f);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = layer_prefix(l);
    add(p + "input_layernorm.weight", {c.hidden}, 1.f, 0.1f);
    proj(p + "self_attn.q_proj.weight", c.heads * c.head_dim, c.hidden);
    proj(p + "self_attn.k_proj.weight", c.kv_heads * c.head_dim, c.hidden);
    proj(p + "self_attn.v_proj.weight", c.kv_heads * c.head_dim, c.hidden);
    proj(p + "self_attn.o_proj.weight", c.hidden, c.heads * c.head_dim);
    add(p + "self_attn.q_norm.weight", {c.head_dim}, 1.f, 0.1f);
    add(p + "self_attn.k_norm.weight", {c.head_dim}, 1.f, 0.1f);
    add(p + "post_attention_layernorm.weight", {c.hidden}, 1.f, 0.1f);
    proj(p + "mlp.gate_proj.weight", c.intermediate, c.hidden);
    proj(p + "mlp.up_proj.weight", c.intermediate, c.hidden);
    proj(p + "mlp.down_proj.weight", c.hidden, c.intermediate);
  }
  add("model.norm.weight", {c.hidden}, 1.f, 0.1f);
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, c.hidden}, 0.f, 0.05f);
  return out;
}

}  // namespace

Status write_qwen3_gguf(const std::string& path, const Qwen3Weights& w, const std::string& gguf_type,
                        const std::string& tokenizer_json_path, std::vector<std::string>* fallbacks) {
  const Qwen3Config& c = w.config;
  auto tt = gguf::ggml_type_from_name(gguf_type);
  auto qt = quant::qtype_from_name(gguf_type);
  if (!tt || !qt || !quant::has_quantizer(*qt))
    return error(ErrorCode::invalid_argument, "cannot write GGUF tensors as '", gguf_type, "'");
  std::vector<gguf::KeyValue> md;
  auto kv = [&](const std::string& k, gguf::Value v) { md.push_back({k, std::move(v), 0}); };
  kv("general.architecture", gguf::Value::string("qwen3"));
  kv("general.name", gguf::Value::string("rlx random qwen3"));
  kv("qwen3.context_length", gguf::Value::u32(static_cast<uint32_t>(c.max_positions)));
  kv("qwen3.embedding_length", gguf::Value::u32(static_cast<uint32_t>(c.hidden)));
  kv("qwen3.block_count", gguf::Value::u32(static_cast<uint32_t>(c.layers)));
  kv("qwen3.feed_forward_length", gguf::Value::u32(static_cast<uint32_t>(c.intermediate)));
  kv("qwen3.attention.head_count", gguf::Value::u32(static_cast<uint32_t>(c.heads)));
  kv("qwen3.attention.head_count_kv", gguf::Value::u32(static_cast<uint32_t>(c.kv_heads)));
  kv("qwen3.attention.key_length", gguf::Value::u32(static_cast<uint32_t>(c.head_dim)));
  kv("qwen3.attention.value_length", gguf::Value::u32(static_cast<uint32_t>(c.head_dim)));
  kv("qwen3.rope.freq_base", gguf::Value::f32(static_cast<float>(c.rope_theta)));
  kv("qwen3.attention.layer_norm_rms_epsilon", gguf::Value::f32(static_cast<float>(c.rms_eps)));
  kv("general.file_type", gguf::Value::u32(static_cast<uint32_t>(tt->type == gguf::GgmlType::f32 ? 0 : 1)));
  const bool rlx_g128 = *qt == quant::QType::int4_g128 || *qt == quant::QType::int4_g128_asym;
  // rlx's own block types (rlx/gguf.h) are announced by a key too, for tools listing metadata
  if (rlx_g128) kv("rlx.quantization", gguf::Value::string(*qt == quant::QType::int4_g128 ? "int4-g128" : "int4-g128-asym"));
  if (!tokenizer_json_path.empty()) {
    RLX_ASSIGN_OR_RETURN(text::BpeTokenizer tok, text::BpeTokenizer::from_json_file(tokenizer_json_path));
    for (auto& [k, v] : tok.to_gguf_metadata()) kv(k, std::move(v));
  }
  std::vector<gguf::TensorToWrite> tensors;
  auto put = [&](const std::string& gname, const std::string& hname) -> Status {
    auto it = w.tensors.find(hname);
    if (it == w.tensors.end()) return error(ErrorCode::invalid_argument, "no tensor '", hname, "' to write");
    if (!it->second.format.empty()) return error(ErrorCode::unsupported, "tensor '", hname, "' is already quantized");
    const Tensor& t = it->second.data;
    Tensor f = t;
    if (t.dtype() != DType::f32) {
      f = Tensor::zeros(DType::f32, t.sizes());
      for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.get_f64(i));
    }
    gguf::TensorToWrite tw;
    tw.name = gname;
    if (t.rank() == 1) {  // norms stay f32, as llama.cpp keeps them
      tw.type = gguf::GgmlType::f32;
      tw.ne = {t.sizes()[0]};
      tw.data = f;
    } else {
      const int64_t rows = t.sizes()[0], cols = t.sizes()[1];
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
  RLX_TRY(put("token_embd.weight", "model.embed_tokens.weight"));
  RLX_TRY(put("output_norm.weight", "model.norm.weight"));
  if (!c.tie_embeddings) RLX_TRY(put("output.weight", "lm_head.weight"));
  for (int64_t l = 0; l < c.layers; ++l)
    for (const auto& [gname, hname] : gguf_layer_names())
      RLX_TRY(put("blk." + std::to_string(l) + "." + gname, layer_prefix(l) + hname));
  return gguf::save(path, md, tensors);
}

Status write_random_qwen3(const std::string& dir, const Qwen3Config& c, uint64_t seed, const std::string& gguf_path,
                          const std::string& gguf_type) {
  RLX_TRY(c.validate("qwen3 config"));
  mkdir(dir.c_str(), 0755);
  auto tensors = random_tensors(c, seed);
  RLX_TRY(safetensors::save(dir + "/model.safetensors", tensors, {{"format", "pt"}}));
  Qwen3Config cj = c;
  if (cj.eos_token_id < 0) cj.eos_token_id = text::synthetic_bpe_eos_id(c.vocab_size);
  {
    std::ofstream f(dir + "/config.json");
    f << cj.to_json() << "\n";
    if (!f) return error(ErrorCode::io_error, "cannot write ", dir, "/config.json");
  }
  RLX_TRY(text::write_synthetic_bpe_tokenizer(dir + "/tokenizer.json", c.vocab_size, seed + 1));
  {
    std::ofstream f(dir + "/tokenizer_config.json");
    f << R"({"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "add_bos_token": false})"
      << "\n";
    if (!f) return error(ErrorCode::io_error, "cannot write ", dir, "/tokenizer_config.json");
  }
  if (!gguf_path.empty()) {
    Qwen3Weights w;
    w.config = cj;
    w.source = dir;
    for (auto& [name, t] : tensors) w.tensors[name] = Qwen3Weight{t, ""};
    RLX_TRY(write_qwen3_gguf(gguf_path, w, gguf_type, dir + "/tokenizer.json"));
  }
  return Status::ok();
}

}  // namespace rlx::models

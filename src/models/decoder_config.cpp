// What each decoder family is (DecoderConfig::for_family) and how its configuration is read from
// a Hugging Face config.json or a GGUF file's ARCH.* keys, and written back to both.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "decoder_internal.h"
#include "rlx/mapped_file.h"
#include "support/json_fields.h"

namespace rlx::models {
namespace {

struct FamilyName {
  DecoderFamily family;
  std::string_view model_type;  // config.json's model_type
  std::string_view gguf_arch;   // general.architecture of llama.cpp's conversion
  std::string_view hf_class;    // architectures[0]
};

constexpr FamilyName kFamilies[] = {
    {DecoderFamily::llama, "llama", "llama", "LlamaForCausalLM"},
    {DecoderFamily::mistral, "mistral", "llama", "MistralForCausalLM"},
    {DecoderFamily::qwen2, "qwen2", "qwen2", "Qwen2ForCausalLM"},
    {DecoderFamily::qwen3, "qwen3", "qwen3", "Qwen3ForCausalLM"},
    {DecoderFamily::gemma2, "gemma2", "gemma2", "Gemma2ForCausalLM"},
    {DecoderFamily::gemma3, "gemma3_text", "gemma3", "Gemma3ForCausalLM"},
    {DecoderFamily::phi3, "phi3", "phi3", "Phi3ForCausalLM"},
};

const FamilyName& entry(DecoderFamily f) {
  for (const FamilyName& e : kFamilies)
    if (e.family == f) return e;
  return kFamilies[0];
}

bool is_gemma(DecoderFamily f) { return f == DecoderFamily::gemma2 || f == DecoderFamily::gemma3; }

// Gemma's attention scale as llama.cpp derives it from GGUF files (which do not store
// query_pre_attn_scalar): hidden / heads for the 27B models (recognized by their layer count,
// 46 for Gemma 2 and 62 for Gemma 3), head_dim otherwise; the Hugging Face configurations say
// the same numbers explicitly.
double gemma_gguf_query_scalar(const DecoderConfig& c) {
  const bool big = (c.family == DecoderFamily::gemma2 && c.layers == 46) || (c.family == DecoderFamily::gemma3 && c.layers == 62);
  return big ? static_cast<double>(c.hidden) / static_cast<double>(c.heads) : static_cast<double>(c.head_dim);
}

}  // namespace

std::string_view family_name(DecoderFamily f) { return entry(f).model_type; }

std::optional<DecoderFamily> family_from_name(std::string_view name) {
  for (const FamilyName& e : kFamilies)
    if (e.model_type == name) return e.family;
  if (name == "gemma3") return DecoderFamily::gemma3;  // GGUF's name
  return std::nullopt;
}

std::string family_names() {
  std::string s;
  for (const FamilyName& e : kFamilies) s += (s.empty() ? "" : ", ") + std::string(e.model_type);
  return s;
}

std::string_view gguf_arch(DecoderFamily f) { return entry(f).gguf_arch; }

DecoderConfig DecoderConfig::for_family(DecoderFamily f) {
  DecoderConfig c;  // Qwen3's
  c.family = f;
  c.rope_theta = 10000.0;
  c.tie_embeddings = false;
  c.qk_norm = false;
  switch (f) {
    case DecoderFamily::llama:
    case DecoderFamily::mistral:
    case DecoderFamily::phi3:
      c.rms_eps = 1e-5;
      break;
    case DecoderFamily::qwen2:
      c.attention_bias = true;
      break;
    case DecoderFamily::qwen3:
      c.qk_norm = true;
      c.rope_theta = 1000000.0;
      c.tie_embeddings = true;
      break;
    case DecoderFamily::gemma2:
    case DecoderFamily::gemma3:
      c.post_norms = c.norm_plus_one = c.gelu_mlp = true;
      c.tie_embeddings = true;
      c.sliding_window = 4096;
      if (f == DecoderFamily::gemma2) {
        c.attn_softcap = 50.0;
        c.final_softcap = 30.0;
        c.sliding_pattern = 2;
      } else {
        c.qk_norm = true;
        c.sliding_pattern = 6;
        c.rope_theta = 1000000.0;
        c.rope_local_theta = 10000.0;
      }
      break;
  }
  return c;
}

bool DecoderConfig::has_sliding_layers() const {
  for (int64_t l = 0; l < layers; ++l)
    if (is_sliding(l)) return true;
  return false;
}

double DecoderConfig::embedding_multiplier() const {
  return is_gemma(family) ? std::sqrt(static_cast<double>(hidden)) : 1.0;
}

std::vector<double> DecoderConfig::rope_inv_freq(int64_t l, int64_t context) const {
  const int64_t half = head_dim / 2;
  const bool local = is_sliding(l) && rope_local_theta > 0;
  const double theta = local ? rope_local_theta : rope_theta;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  if (local) return inv;  // sliding layers are never scaled (Gemma 3)
  if (!rope_freq_factors.empty()) {
    for (int64_t i = 0; i < half; ++i) inv[i] /= rope_freq_factors[i];
    return inv;
  }
  const RopeScaling& r = rope_scaling;
  if (r.kind == RopeScaling::Kind::longrope) {
    const std::vector<double>& ext = context > r.original_max_positions ? r.long_factor : r.short_factor;
    for (int64_t i = 0; i < half && i < static_cast<int64_t>(ext.size()); ++i) inv[i] /= ext[i];
  } else if (r.kind == RopeScaling::Kind::linear) {
    for (double& f : inv) f /= r.factor;
  } else if (r.kind == RopeScaling::Kind::yarn) {
    // dimension pair i keeps its frequency (extrapolates) if it turns more than beta_fast times
    // over the original context, is divided by `factor` (interpolates) if fewer than
    // beta_slow times, and mixes linearly between (bounds floored / ceiled, as both
    // Hugging Face and llama.cpp compute them)
    const double d = static_cast<double>(head_dim), orig = static_cast<double>(r.original_max_positions);
    auto corr_dim = [&](double rotations) {
      return d * std::log(orig / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
    };
    const double low = std::max(0.0, std::floor(corr_dim(r.beta_fast)));
    const double high = std::min(d - 1.0, std::ceil(corr_dim(r.beta_slow)));
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / std::max(0.001, high - low), 0.0, 1.0);
      const double extrapolate = 1.0 - ramp;
      inv[i] = inv[i] / r.factor * (1.0 - extrapolate) + inv[i] * extrapolate;
    }
  } else if (r.kind == RopeScaling::Kind::llama3) {
    // long wavelengths slow down by `factor`, short ones stay, those between are interpolated
    const double low_wavelen = static_cast<double>(r.original_max_positions) / r.low_freq_factor;
    const double high_wavelen = static_cast<double>(r.original_max_positions) / r.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f /= r.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (static_cast<double>(r.original_max_positions) / wavelen - r.low_freq_factor) /
                              (r.high_freq_factor - r.low_freq_factor);
        f = (1.0 - smooth) * f / r.factor + smooth * f;
      }
    }
  }
  return inv;
}

bool DecoderConfig::rope_scaled(int64_t l) const {
  if (is_sliding(l) && rope_local_theta > 0) return false;
  return rope_scaling.kind != RopeScaling::Kind::none || !rope_freq_factors.empty();
}

double DecoderConfig::rope_attention_factor(int64_t l) const {
  const RopeScaling& r = rope_scaling;
  if (!rope_scaled(l)) return 1.0;
  if (r.kind == RopeScaling::Kind::longrope) {
    if (r.attention_factor > 0) return r.attention_factor;
    if (r.factor <= 1.0) return 1.0;
    return std::sqrt(1.0 + std::log(r.factor) / std::log(static_cast<double>(r.original_max_positions)));
  }
  if (r.kind != RopeScaling::Kind::yarn) return 1.0;
  return r.attention_factor > 0 ? r.attention_factor : 1.0 + 0.1 * std::log(r.factor);
}

std::vector<double> llama3_rope_factors(const DecoderConfig& c) {
  DecoderConfig plain = c;
  plain.rope_scaling = {};
  plain.rope_freq_factors.clear();
  plain.sliding_window = 0;
  const std::vector<double> base = plain.rope_inv_freq(0);
  DecoderConfig scaled = plain;
  scaled.rope_scaling = c.rope_scaling;
  const std::vector<double> s = scaled.rope_inv_freq(0);
  std::vector<double> f(base.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = base[i] / s[i];
  return f;
}

Status DecoderConfig::validate(const std::string& where) const {
  for (auto [name, v] : {std::pair{"vocab_size", vocab_size}, {"hidden_size", hidden}, {"num_hidden_layers", layers},
                         {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads}, {"head_dim", head_dim},
                         {"intermediate_size", intermediate}, {"max_position_embeddings", max_positions}})
    if (v <= 0 || v > (int64_t{1} << 24)) return error(ErrorCode::format_error, where, ": ", name, " = ", v, " is out of range (1 to 2^24)");
  if (layers > 4096) return error(ErrorCode::format_error, where, ": num_hidden_layers = ", layers, " is out of range (1 to 4096)");
  if (heads % kv_heads != 0)
    return error(ErrorCode::format_error, where, ": num_attention_heads ", heads, " is not a multiple of num_key_value_heads ",
                 kv_heads);
  if (head_dim % 2 != 0) return error(ErrorCode::format_error, where, ": head_dim ", head_dim, " is odd");
  if (!(rms_eps > 0) || !(rope_theta > 0) || !(rope_local_theta >= 0))
    return error(ErrorCode::format_error, where, ": rms_norm_eps and rope_theta must be positive");
  if (sliding_window < 0 || sliding_pattern < 0 || sliding_pattern > 4096)
    return error(ErrorCode::format_error, where, ": sliding_window ", sliding_window, " / pattern ", sliding_pattern, " out of range");
  for (auto [name, v] : {std::pair{"attention scale", attention_scale}, {"attn_logit_softcapping", attn_softcap},
                         {"final_logit_softcapping", final_softcap}})
    if (!(v >= 0) || !std::isfinite(v)) return error(ErrorCode::format_error, where, ": ", name, " = ", v, " must be finite and >= 0");
  const RopeScaling& r = rope_scaling;
  if (r.kind != RopeScaling::Kind::none && r.kind != RopeScaling::Kind::longrope && !(r.factor >= 1.0 && r.factor <= 1e6))
    return error(ErrorCode::format_error, where, ": rope_scaling factor ", r.factor, " is out of range (1 to 1e6)");
  if (r.kind == RopeScaling::Kind::longrope) {
    if (static_cast<int64_t>(r.long_factor.size()) != head_dim / 2 || static_cast<int64_t>(r.short_factor.size()) != head_dim / 2)
      return error(ErrorCode::format_error, where, ": longrope rope_scaling has ", r.long_factor.size(), " long and ",
                   r.short_factor.size(), " short factors, expected head_dim / 2 = ", head_dim / 2, " of each");
    for (const auto* v : {&r.long_factor, &r.short_factor})
      for (double x : *v)
        if (!(x > 0) || !std::isfinite(x))
          return error(ErrorCode::format_error, where, ": longrope factor ", x, " must be finite and > 0");
    if (!(r.original_max_positions > 1) || !(r.factor > 0) || !std::isfinite(r.factor) || !(r.attention_factor >= 0) ||
        !(r.attention_factor <= 100))
      return error(ErrorCode::format_error, where, ": longrope needs original_max_position_embeddings > 1 and attention_factor "
                   "in [0, 100]");
  }
  if (r.kind == RopeScaling::Kind::yarn &&
      !(r.original_max_positions > 0 && r.beta_fast > 0 && r.beta_slow > 0 && std::isfinite(r.beta_fast) &&
        std::isfinite(r.beta_slow) && r.attention_factor >= 0 && r.attention_factor <= 100))
    return error(ErrorCode::format_error, where, ": yarn rope_scaling needs original_max_position_embeddings, beta_fast and "
                 "beta_slow > 0 and attention_factor in [0, 100]");
  if (r.kind == RopeScaling::Kind::llama3 &&
      !(r.high_freq_factor > r.low_freq_factor && r.low_freq_factor > 0 && r.original_max_positions > 0))
    return error(ErrorCode::format_error, where, ": llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor and "
                 "original_max_position_embeddings > 0");
  if (!rope_freq_factors.empty()) {
    if (static_cast<int64_t>(rope_freq_factors.size()) != head_dim / 2)
      return error(ErrorCode::format_error, where, ": rope_freqs has ", rope_freq_factors.size(), " factors, expected head_dim / 2 = ",
                   head_dim / 2);
    for (double f : rope_freq_factors)
      if (!(f > 0) || !std::isfinite(f)) return error(ErrorCode::format_error, where, ": rope_freqs holds ", f, " (factors must be positive)");
  }
  return Status::ok();
}

Expected<DecoderConfig> DecoderConfig::from_json_file(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, uint64_t{1} << 24));
  return from_json(text, path);
}

Expected<DecoderConfig> DecoderConfig::from_json(std::string_view text, const std::string& path) {
  RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::parse_object(text, path));
  const json::Fields f(j, path);
  RLX_TRY(json::require_string(f, "model_type"));
  std::string type;
  RLX_TRY(f.read("model_type", type));
  if (type == "gemma3" && f.has("text_config"))
    return error(ErrorCode::unsupported, path, ": model_type 'gemma3' with a text_config is Gemma 3's multimodal model; "
                 "rlx runs its text model (model_type 'gemma3_text')");
  auto fam = family_from_name(type);
  if (!fam)
    return error(ErrorCode::unsupported, path, ": model_type '", type.substr(0, 60), "' is not a decoder family rlx runs (",
                 family_names(), ")");
  DecoderConfig c = for_family(*fam);
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
  // the activation of the gate: SiLU, or tanh-approximated GELU for Gemma
  const char* act_key = f.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  std::string act = c.gelu_mlp ? "gelu_pytorch_tanh" : "silu";
  RLX_TRY(f.read(act_key, act));
  if (act == "silu" || act == "swish") {
    c.gelu_mlp = false;
  } else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || (is_gemma(c.family) && act == "gelu")) {
    c.gelu_mlp = true;  // (Gemma's "gelu" means the tanh approximation: transformers maps it so)
  } else {
    return error(ErrorCode::unsupported, path, ": ", act_key, " '", act.substr(0, 40), "' is not supported (silu or gelu_pytorch_tanh)");
  }
  if (c.family != DecoderFamily::qwen2) {
    bool bias = false;
    RLX_TRY(f.read("attention_bias", bias));
    if (bias) return error(ErrorCode::unsupported, path, ": attention_bias true is not supported for ", type);
  }
  bool mlp_bias = false;
  RLX_TRY(f.read("mlp_bias", mlp_bias));
  if (mlp_bias) return error(ErrorCode::unsupported, path, ": mlp_bias true is not supported");
  double partial = 1.0;
  RLX_TRY(f.read("partial_rotary_factor", partial));
  if (partial != 1.0) return error(ErrorCode::unsupported, path, ": partial_rotary_factor ", partial, " is not supported (1.0 only)");
  // sliding windows: Qwen2 only with use_sliding_window; null means none
  c.sliding_window = 0;
  if (f.has("sliding_window") && !j["sliding_window"].is_null()) {
    bool use = true;
    if (c.family == DecoderFamily::qwen2 || c.family == DecoderFamily::qwen3) {
      use = false;
      RLX_TRY(f.read("use_sliding_window", use));
      // (Qwen's windows apply from max_window_layers on, a pattern rlx does not describe yet)
      if (use) return error(ErrorCode::unsupported, path, ": use_sliding_window true is not supported for ", type);
    }
    if (use) RLX_TRY(f.read("sliding_window", c.sliding_window, 1, int64_t{1} << 30));
  }
  if (c.family == DecoderFamily::gemma3) RLX_TRY(f.read("sliding_window_pattern", c.sliding_pattern, 1, 4096));
  if (c.family == DecoderFamily::gemma3) RLX_TRY(f.read("rope_local_base_freq", c.rope_local_theta));
  if (f.has("layer_types") && c.sliding_window > 0) {
    // transformers' newer form of the pattern: it must be one rlx's rule describes
    std::vector<std::string> types;
    RLX_TRY(f.read("layer_types", types));
    if (static_cast<int64_t>(types.size()) != c.layers)
      return error(ErrorCode::format_error, path, ": layer_types has ", types.size(), " entries for ", c.layers, " layers");
    for (int64_t l = 0; l < c.layers; ++l) {
      const bool sliding = types[l] == "sliding_attention";
      if (!sliding && types[l] != "full_attention")
        return error(ErrorCode::unsupported, path, ": layer_types[", l, "] '", types[l].substr(0, 40), "' is not supported");
      if (sliding != c.is_sliding(l))
        return error(ErrorCode::unsupported, path, ": layer_types does not follow the family's pattern of sliding layers (layer ", l,
                     " is ", types[l], ")");
    }
  }
  if (is_gemma(c.family)) {
    double scalar = static_cast<double>(c.head_dim);
    RLX_TRY(f.read("query_pre_attn_scalar", scalar));
    if (!(scalar > 0)) return error(ErrorCode::format_error, path, ": query_pre_attn_scalar must be positive");
    c.attention_scale = 1.0 / std::sqrt(scalar);
    if (c.family == DecoderFamily::gemma2) {
      RLX_TRY(f.read("attn_logit_softcapping", c.attn_softcap));
      RLX_TRY(f.read("final_logit_softcapping", c.final_softcap));
      if (f.has("attn_logit_softcapping") && j["attn_logit_softcapping"].is_null()) c.attn_softcap = 0;
      if (f.has("final_logit_softcapping") && j["final_logit_softcapping"].is_null()) c.final_softcap = 0;
    } else {
      for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping"}) {
        double v = 0;
        RLX_TRY(f.read(k, v));
        if (v != 0) return error(ErrorCode::unsupported, path, ": ", k, " is not supported for gemma3");
      }
    }
  }
  if (f.has("rope_scaling") && !j["rope_scaling"].is_null()) {
    if (!j["rope_scaling"].is_object()) return error(ErrorCode::format_error, path, ": 'rope_scaling' must be an object or null");
    const json::Fields r(j["rope_scaling"], path + ": rope_scaling");
    std::string kind;
    RLX_TRY(r.read("type", kind));
    RLX_TRY(r.read("rope_type", kind));
    RopeScaling& s = c.rope_scaling;
    if (kind == "linear") {
      s.kind = RopeScaling::Kind::linear;
    } else if (kind == "llama3") {
      s.kind = RopeScaling::Kind::llama3;
      RLX_TRY(r.read("low_freq_factor", s.low_freq_factor));
      RLX_TRY(r.read("high_freq_factor", s.high_freq_factor));
      RLX_TRY(r.read("original_max_position_embeddings", s.original_max_positions, 1, int64_t{1} << 30));
    } else if (kind == "yarn") {
      s.kind = RopeScaling::Kind::yarn;
      s.original_max_positions = c.max_positions;  // Hugging Face's default
      RLX_TRY(r.read("original_max_position_embeddings", s.original_max_positions, 1, int64_t{1} << 30));
      RLX_TRY(r.read("beta_fast", s.beta_fast));
      RLX_TRY(r.read("beta_slow", s.beta_slow));
      RLX_TRY(r.read("attention_factor", s.attention_factor));
      bool truncate = true;
      RLX_TRY(r.read("truncate", truncate));
      if (!truncate)
        return error(ErrorCode::unsupported, path, ": rope_scaling truncate = false is not supported (YaRN's bounds are rounded)");
    } else if (kind == "longrope" || kind == "su") {
      // (Phi-3 puts original_max_position_embeddings beside max_position_embeddings)
      s.kind = RopeScaling::Kind::longrope;
      s.original_max_positions = c.max_positions;
      RLX_TRY(f.read("original_max_position_embeddings", s.original_max_positions, 1, int64_t{1} << 30));
      RLX_TRY(r.read("original_max_position_embeddings", s.original_max_positions, 1, int64_t{1} << 30));
      RLX_TRY(r.read("attention_factor", s.attention_factor));
      for (auto [name, out] : {std::pair{"long_factor", &s.long_factor}, {"short_factor", &s.short_factor}}) {
        const nlohmann::json& v = j["rope_scaling"].contains(name) ? j["rope_scaling"][name] : nlohmann::json();
        if (!v.is_array() || v.size() > 65536)
          return error(ErrorCode::format_error, path, ": rope_scaling ", name, " must be a list of numbers (longrope)");
        for (const nlohmann::json& x : v) {
          if (!x.is_number()) return error(ErrorCode::format_error, path, ": rope_scaling ", name, " must be a list of numbers");
          out->push_back(x.get<double>());
        }
      }
      // Hugging Face: the factor is max over original positions when the config has both
      s.factor = static_cast<double>(c.max_positions) / static_cast<double>(s.original_max_positions);
    } else if (kind != "default") {
      return error(ErrorCode::unsupported, path, ": rope_scaling type '", kind.substr(0, 40),
                   "' is not supported (linear, llama3, yarn and longrope are; dynamic is not yet)");
    }
    if (s.kind != RopeScaling::Kind::none && s.kind != RopeScaling::Kind::longrope) RLX_TRY(r.read("factor", s.factor));
    if (s.kind == RopeScaling::Kind::yarn && s.attention_factor == 0) {
      // DeepSeek-style mscale / mscale_all_dim (Hugging Face: both set and nonzero)
      double mscale = 0, mscale_all = 0;
      RLX_TRY(r.read("mscale", mscale));
      RLX_TRY(r.read("mscale_all_dim", mscale_all));
      auto get = [&](double m) { return s.factor <= 1 ? 1.0 : 0.1 * m * std::log(s.factor) + 1.0; };
      if (mscale != 0 && mscale_all != 0) s.attention_factor = get(mscale) / get(mscale_all);
    }
  }
  RLX_TRY(f.read("bos_token_id", c.bos_token_id, 0, INT64_MAX));
  // eos_token_id: one id, or a list (all of them end generation; the first is eos_token_id)
  if (f.has("eos_token_id") && j["eos_token_id"].is_array()) {
    for (const nlohmann::json& e : j["eos_token_id"]) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0)
        return error(ErrorCode::format_error, path, ": 'eos_token_id' must be a non-negative integer or a list of them");
      c.eos_token_ids.push_back(e.get<int64_t>());
    }
    if (!c.eos_token_ids.empty()) c.eos_token_id = c.eos_token_ids[0];
  } else {
    RLX_TRY(f.read("eos_token_id", c.eos_token_id, 0, INT64_MAX));
    if (c.eos_token_id >= 0) c.eos_token_ids = {c.eos_token_id};
  }
  RLX_TRY(c.validate(path));
  return c;
}

std::string DecoderConfig::to_json() const {
  const FamilyName& e = entry(family);
  nlohmann::json j = {{"architectures", {std::string(e.hf_class)}},
                      {"model_type", std::string(e.model_type)},
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
                      {"tie_word_embeddings", tie_embeddings},
                      {"torch_dtype", "float32"}};
  j[is_gemma(family) ? "hidden_activation" : "hidden_act"] = gelu_mlp ? "gelu_pytorch_tanh" : "silu";
  if (family != DecoderFamily::phi3 && !is_gemma(family)) j["attention_bias"] = attention_bias;
  if (sliding_window > 0) j["sliding_window"] = sliding_window;
  else if (family == DecoderFamily::mistral || family == DecoderFamily::phi3) j["sliding_window"] = nullptr;
  if (family == DecoderFamily::qwen2 || family == DecoderFamily::qwen3) j["use_sliding_window"] = sliding_window > 0;
  if (is_gemma(family)) {
    j["query_pre_attn_scalar"] = attention_scale > 0 ? 1.0 / (attention_scale * attention_scale) : static_cast<double>(head_dim);
    if (family == DecoderFamily::gemma2) {
      j["attn_logit_softcapping"] = attn_softcap > 0 ? nlohmann::json(attn_softcap) : nlohmann::json(nullptr);
      j["final_logit_softcapping"] = final_softcap > 0 ? nlohmann::json(final_softcap) : nlohmann::json(nullptr);
    } else {
      j["sliding_window_pattern"] = sliding_pattern;
      j["rope_local_base_freq"] = rope_local_theta;
    }
  }
  if (rope_scaling.kind == RopeScaling::Kind::linear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope_scaling.factor}};
  } else if (rope_scaling.kind == RopeScaling::Kind::yarn) {
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", rope_scaling.factor},
                         {"original_max_position_embeddings", rope_scaling.original_max_positions},
                         {"beta_fast", rope_scaling.beta_fast},
                         {"beta_slow", rope_scaling.beta_slow}};
    if (rope_scaling.attention_factor > 0) j["rope_scaling"]["attention_factor"] = rope_scaling.attention_factor;
  } else if (rope_scaling.kind == RopeScaling::Kind::longrope) {
    j["rope_scaling"] = {{"rope_type", "longrope"}, {"long_factor", rope_scaling.long_factor},
                         {"short_factor", rope_scaling.short_factor}};
    if (rope_scaling.attention_factor > 0) j["rope_scaling"]["attention_factor"] = rope_scaling.attention_factor;
    j["original_max_position_embeddings"] = rope_scaling.original_max_positions;
  } else if (rope_scaling.kind == RopeScaling::Kind::llama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", rope_scaling.factor},
                         {"low_freq_factor", rope_scaling.low_freq_factor},
                         {"high_freq_factor", rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", rope_scaling.original_max_positions}};
  }
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
  else if (eos_token_id >= 0) j["eos_token_id"] = eos_token_id;
  return j.dump(2);
}

// ---------------------------------------------------------------------------------------
// GGUF keys

Status read_gguf_config(const gguf::File& f, const std::string& path, DecoderConfig& c) {
  RLX_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  auto fam = family_from_name(arch);
  if (!fam || *fam == DecoderFamily::mistral)  // (no converter writes "mistral" for these models)
    return error(ErrorCode::unsupported, path, ": general.architecture '", arch.substr(0, 60),
                 "' is not a decoder family rlx runs (llama, qwen2, qwen3, gemma2, gemma3, phi3)");
  c = DecoderConfig::for_family(*fam);
  const std::string a = arch + ".";
  auto get_int = [&](const std::string& k, int64_t& out, bool required) -> Status {
    if (!f.find(a + k)) return required ? error(ErrorCode::format_error, path, ": no key '", a, k, "'") : Status::ok();
    RLX_ASSIGN_OR_RETURN(out, f.get_int(a + k));
    return Status::ok();
  };
  auto get_float = [&](const std::string& k, double& out) -> Status {
    if (!f.find(a + k)) return Status::ok();
    RLX_ASSIGN_OR_RETURN(out, f.get_float(a + k));
    return Status::ok();
  };
  RLX_TRY(get_int("embedding_length", c.hidden, true));
  RLX_TRY(get_int("block_count", c.layers, true));
  RLX_TRY(get_int("attention.head_count", c.heads, true));
  c.kv_heads = c.heads;
  RLX_TRY(get_int("attention.head_count_kv", c.kv_heads, false));
  RLX_TRY(get_int("feed_forward_length", c.intermediate, true));
  c.head_dim = c.hidden / std::max<int64_t>(1, c.heads);
  RLX_TRY(get_int("attention.key_length", c.head_dim, false));
  if (f.find(a + "attention.value_length")) {
    int64_t v = 0;
    RLX_TRY(get_int("attention.value_length", v, true));
    if (v != c.head_dim)
      return error(ErrorCode::unsupported, path, ": ", a, "attention.value_length ", v, " differs from key_length ", c.head_dim);
  }
  if (f.find(a + "rope.dimension_count")) {
    int64_t n = 0;
    RLX_TRY(get_int("rope.dimension_count", n, true));
    if (n != c.head_dim)
      return error(ErrorCode::unsupported, path, ": ", a, "rope.dimension_count ", n, " is not head_dim ", c.head_dim,
                   " (partial rotary embeddings are not supported)");
  }
  RLX_TRY(get_int("context_length", c.max_positions, false));
  RLX_TRY(get_float("rope.freq_base", c.rope_theta));
  RLX_TRY(get_float("attention.layer_norm_rms_epsilon", c.rms_eps));
  c.sliding_window = 0;
  if (is_gemma(c.family) || c.family == DecoderFamily::phi3) RLX_TRY(get_int("attention.sliding_window", c.sliding_window, false));
  if (c.family == DecoderFamily::gemma2) {
    RLX_TRY(get_float("attn_logit_softcapping", c.attn_softcap));
    RLX_TRY(get_float("final_logit_softcapping", c.final_softcap));
  }
  if (f.find(a + "rope.scaling.type")) {
    RLX_ASSIGN_OR_RETURN(std::string kind, f.get_string(a + "rope.scaling.type"));
    if (kind == "linear") {
      c.rope_scaling.kind = RopeScaling::Kind::linear;
      RLX_TRY(get_float("rope.scaling.factor", c.rope_scaling.factor));
    } else if (kind == "yarn") {
      // llama.cpp's keys; its attention factor is 1 + 0.1 ln(factor), or with
      // yarn_log_multiplier m (DeepSeek's mscale_all_dim, mscale taken as 1)
      // (1 + 0.1 ln f) / (1 + 0.1 m ln f)
      RopeScaling& s = c.rope_scaling;
      s.kind = RopeScaling::Kind::yarn;
      RLX_TRY(get_float("rope.scaling.factor", s.factor));
      s.original_max_positions = c.max_positions;
      RLX_TRY(get_int("rope.scaling.original_context_length", s.original_max_positions, false));
      RLX_TRY(get_float("rope.scaling.yarn_beta_fast", s.beta_fast));
      RLX_TRY(get_float("rope.scaling.yarn_beta_slow", s.beta_slow));
      double log_mul = 0;
      RLX_TRY(get_float("rope.scaling.yarn_log_multiplier", log_mul));
      if (log_mul != 0 && s.factor > 1)
        s.attention_factor = (1.0 + 0.1 * std::log(s.factor)) / (1.0 + 0.1 * log_mul * std::log(s.factor));
      double ext = 1.0;
      RLX_TRY(get_float("rope.scaling.yarn_ext_factor", ext));
      if (ext != 1.0)
        return error(ErrorCode::unsupported, path, ": ", a, "rope.scaling.yarn_ext_factor = ", ext, " is not supported (1 is)");
    } else if (kind != "none") {
      return error(ErrorCode::unsupported, path, ": ", a, "rope.scaling.type '", kind.substr(0, 40),
                   "' is not supported (linear and yarn are)");
    }
  }
  if (c.family == DecoderFamily::phi3 && !f.find(a + "rope.scaling.type")) {
    // LongRoPE's keys as llama.cpp's converter writes them for Phi-3 (no scaling type; the
    // factors are the tensors rope_factors_long / rope_factors_short, which the loader reads)
    c.rope_scaling.original_max_positions = c.max_positions;
    RLX_TRY(get_int("rope.scaling.original_context_length", c.rope_scaling.original_max_positions, false));
    RLX_TRY(get_float("rope.scaling.attn_factor", c.rope_scaling.attention_factor));
  }
  if (is_gemma(c.family)) {
    // llama.cpp's conversion stores 1 + w for Gemma's norms
    c.norm_plus_one = false;
    c.attention_scale = 1.0 / std::sqrt(gemma_gguf_query_scalar(c));
  }
  // llama.cpp's conversion permutes Llama's q/k rows for its interleaved rotary embedding
  c.rope_interleaved = c.family == DecoderFamily::llama;
  if (f.find("tokenizer.ggml.eos_token_id")) {
    RLX_ASSIGN_OR_RETURN(c.eos_token_id, f.get_int("tokenizer.ggml.eos_token_id"));
    c.eos_token_ids = {c.eos_token_id};
  }
  if (f.find("tokenizer.ggml.eot_token_id")) {  // the end of a chat turn (llama.cpp's EOT)
    RLX_ASSIGN_OR_RETURN(int64_t eot, f.get_int("tokenizer.ggml.eot_token_id"));
    if (eot != c.eos_token_id) c.eos_token_ids.push_back(eot);
  }
  if (f.find("tokenizer.ggml.bos_token_id")) {
    RLX_ASSIGN_OR_RETURN(c.bos_token_id, f.get_int("tokenizer.ggml.bos_token_id"));
  }
  return Status::ok();
}

void write_gguf_config(const DecoderConfig& c, std::vector<gguf::KeyValue>& md) {
  const std::string arch(gguf_arch(c.family));
  const std::string a = arch + ".";
  auto kv = [&](const std::string& k, gguf::Value v) { md.push_back({k, std::move(v), 0}); };
  auto u32 = [](int64_t v) { return gguf::Value::u32(static_cast<uint32_t>(v)); };
  kv("general.architecture", gguf::Value::string(arch));
  // (not the family's name: llama.cpp sets token attributes by general.name, and for "phi3"
  // expects SentencePiece's <s> and </s>, which a byte-level tokenizer does not have)
  kv("general.name", gguf::Value::string("rlx random-weight decoder"));
  kv(a + "context_length", u32(c.max_positions));
  kv(a + "embedding_length", u32(c.hidden));
  kv(a + "block_count", u32(c.layers));
  kv(a + "feed_forward_length", u32(c.intermediate));
  kv(a + "attention.head_count", u32(c.heads));
  kv(a + "attention.head_count_kv", u32(c.kv_heads));
  kv(a + "attention.key_length", u32(c.head_dim));
  kv(a + "attention.value_length", u32(c.head_dim));
  kv(a + "rope.dimension_count", u32(c.head_dim));
  kv(a + "rope.freq_base", gguf::Value::f32(static_cast<float>(c.rope_theta)));
  kv(a + "attention.layer_norm_rms_epsilon", gguf::Value::f32(static_cast<float>(c.rms_eps)));
  if (c.sliding_window > 0) kv(a + "attention.sliding_window", u32(c.sliding_window));
  if (c.family == DecoderFamily::gemma2) {
    kv(a + "attn_logit_softcapping", gguf::Value::f32(static_cast<float>(c.attn_softcap)));
    kv(a + "final_logit_softcapping", gguf::Value::f32(static_cast<float>(c.final_softcap)));
  }
  if (c.rope_scaling.kind == RopeScaling::Kind::linear) {
    kv(a + "rope.scaling.type", gguf::Value::string("linear"));
    kv(a + "rope.scaling.factor", gguf::Value::f32(static_cast<float>(c.rope_scaling.factor)));
  } else if (c.rope_scaling.kind == RopeScaling::Kind::yarn) {
    // what llama.cpp's converter writes (its beta keys only where they differ from 32 / 1)
    kv(a + "rope.scaling.type", gguf::Value::string("yarn"));
    kv(a + "rope.scaling.factor", gguf::Value::f32(static_cast<float>(c.rope_scaling.factor)));
    kv(a + "rope.scaling.original_context_length", u32(c.rope_scaling.original_max_positions));
    if (c.rope_scaling.beta_fast != 32.0)
      kv(a + "rope.scaling.yarn_beta_fast", gguf::Value::f32(static_cast<float>(c.rope_scaling.beta_fast)));
    if (c.rope_scaling.beta_slow != 1.0)
      kv(a + "rope.scaling.yarn_beta_slow", gguf::Value::f32(static_cast<float>(c.rope_scaling.beta_slow)));
  } else if (c.rope_scaling.kind == RopeScaling::Kind::longrope) {
    // as llama.cpp's converter writes Phi-3's (the factors are tensors)
    kv(a + "rope.scaling.original_context_length", u32(c.rope_scaling.original_max_positions));
    kv(a + "rope.scaling.attn_factor", gguf::Value::f32(static_cast<float>(c.rope_attention_factor(0))));
  }
}

}  // namespace rlx::models

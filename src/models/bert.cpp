#include "bert.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <filesystem>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "rlx/mapped_file.h"
#include "support/json_fields.h"
#include "models/tensor_parallel.h"
#include "rlx/op_builder.h"
#include "rlx/ops.h"
#include "rlx/safetensors.h"

namespace rlx::models {

const Tensor* find_bert_weight(const std::map<std::string, Tensor>& w, const std::string& name) {
  for (const char* prefix : {"", "bert.", "0.auto_model.", "model."}) {
    auto it = w.find(prefix + name);
    if (it != w.end()) return &it->second;
  }
  return nullptr;
}

namespace {

const Tensor* find_weight(const std::map<std::string, Tensor>& w, const std::string& name) {
  return find_bert_weight(w, name);
}

class Builder {
 public:
  Builder(Graph& g, const std::map<std::string, Tensor>& w, const std::string& weight_format)
      : g_(g), gb_(g), o_(gb_), w_(w), weight_format_(weight_format) {}
  OpBuilder& o() { return o_; }
  Status status() const { return st_.is_ok() ? o_.status() : st_; }

  // A weight of the expected shape, converted to f32, as a param of the graph.
  ValueId weight(const std::string& name, const Sizes& shape) {
    if (!st_.is_ok()) return kNoValue;
    const Tensor* t = find_weight(w_, name);
    if (!t) {
      st_ = error(ErrorCode::format_error, "the checkpoint has no tensor '", name, "'");
      return kNoValue;
    }
    if (t->sizes() != shape) {
      st_ = error(ErrorCode::shape_error, "tensor '", name, "' is ", sizes_to_string(t->sizes()), ", expected ",
                  sizes_to_string(shape));
      return kNoValue;
    }
    Tensor v = *t;
    if (v.dtype() != DType::f32) {
      Tensor c = Tensor::zeros(DType::f32, v.sizes());
      for (int64_t i = 0; i < v.numel(); ++i) c.data<float>()[i] = static_cast<float>(v.get_f64(i));
      v = c;
    }
    g_.weights[name] = v;
    return o_.param(name, v.type());
  }

  // x [..., in] @ W^T + b for a Hugging Face Linear (weight [out, in]).
  ValueId linear(ValueId x, const std::string& name, int64_t in, int64_t out) {
    if (find_weight(w_, name + ".weight_scale")) return int8_linear(x, name, in, out);
    const Tensor* wt = find_weight(w_, name + ".weight");
    if (!weight_format_.empty() && wt && wt->dtype() == DType::u8) return block_linear(x, name, *wt, in, out);
    ValueId w = weight(name + ".weight", {out, in});
    ValueId b = weight(name + ".bias", {out});
    if (!status().is_ok()) return kNoValue;
    const int64_t r = o_.rank(x);
    return o_.add(o_.dot(x, w, {}, {}, {r - 1}, {1}), b);
  }

  // A Linear quantized by `rlx quantize --scheme int8` (quant/int8_weights.h): i8 weight,
  // f32 per-row scale; runs as int8_matmul with activations quantized per token, or per tensor
  // with the static scale "<name>.input_scale" (f32 []) that `--calib` stores (quant/calibrate.h).
  ValueId int8_linear(ValueId x, const std::string& name, int64_t in, int64_t out, bool with_bias = true) {
    const Tensor* q = find_weight(w_, name + ".weight");
    const Tensor* s = find_weight(w_, name + ".weight_scale");
    if (!q || q->dtype() != DType::i8 || q->sizes() != Sizes{out, in} || s->dtype() != DType::f32 ||
        s->sizes() != Sizes{out}) {
      st_ = error(ErrorCode::format_error, "tensor '", name, ".weight' must be i8 [", out, ", ", in,
                  "] beside its f32 weight_scale [", out, "]");
      return kNoValue;
    }
    g_.weights[name + ".weight"] = *q;
    g_.weights[name + ".weight_scale"] = *s;
    Attrs attrs;
    if (const Tensor* xs = find_weight(w_, name + ".input_scale")) {
      const double v = xs->numel() == 1 && is_float(xs->dtype()) ? xs->get_f64(0) : 0.0;
      if (!(v > 0) || !std::isfinite(v)) {
        st_ = error(ErrorCode::format_error, "tensor '", name, ".input_scale' must be one positive finite float, got ",
                    xs->type().to_string(), xs->numel() == 1 ? cat(" = ", v) : std::string());
        return kNoValue;
      }
      attrs = Attrs{{"x_scale", v}};
    }
    std::vector<ValueId> args{x, o_.param(name + ".weight", q->type()), o_.param(name + ".weight_scale", s->type())};
    if (with_bias) args.push_back(weight(name + ".bias", {out}));
    if (!status().is_ok()) return kNoValue;
    return o_.op(Op::Int8MatMul, args, attrs);
  }

  // A Linear stored weight-only in a block format (`rlx quantize --scheme int4-*`,
  // quant/ptq.h): U8 rows [out, row_bytes(in)] run as qmatmul (the same formats and kernels as
  // Qwen3's GGUF matrices), then the f32 bias.
  ValueId block_linear(ValueId x, const std::string& name, const Tensor& q, int64_t in, int64_t out) {
    auto qf = quant_format(weight_format_);
    if (!qf) {
      st_ = error(ErrorCode::format_error, "the checkpoint's ", kBlockWeightFormatKey, " '", weight_format_,
                  "' is not a qmatmul format");
      return kNoValue;
    }
    if (in % qf->block_elems != 0 || q.sizes() != Sizes{out, in / qf->block_elems * qf->block_bytes}) {
      st_ = error(ErrorCode::shape_error, "tensor '", name, ".weight' (", weight_format_, ") is ", q.type().to_string(),
                  ", expected ", out, " rows of ", in, " values");
      return kNoValue;
    }
    g_.weights[name + ".weight"] = q;
    ValueId p = o_.param(name + ".weight", q.type());
    ValueId b = weight(name + ".bias", {out});
    if (!status().is_ok()) return kNoValue;
    return o_.add(o_.op(Op::QMatMul, {x, p}, Attrs{{"format", weight_format_}}), b);
  }

  // A Linear split by input features over the tensor-parallel group (models/tensor_parallel.h):
  // the ranks' partial products are summed by an all_reduce, then the bias is added once.
  ValueId linear_partial(ValueId x, const std::string& name, int64_t in, int64_t out, const TensorParallel& tp) {
    if (!tp.active()) return linear(x, name, in, out);
    ValueId y;
    if (find_weight(w_, name + ".weight_scale")) {
      y = int8_linear(x, name, in, out, false);
    } else {
      ValueId w = weight(name + ".weight", {out, in});
      if (!status().is_ok()) return kNoValue;
      y = o_.dot(x, w, {}, {}, {o_.rank(x) - 1}, {1});
    }
    ValueId b = weight(name + ".bias", {out});
    if (!status().is_ok()) return kNoValue;
    return o_.add(tp_all_reduce(o_, tp, y), b);
  }

  ValueId layer_norm(ValueId x, const std::string& name, int64_t n, double eps) {
    ValueId s = weight(name + ".weight", {n});
    ValueId b = weight(name + ".bias", {n});
    return o_.layer_norm(x, s, b, -1, eps);
  }

 private:
  Graph& g_;
  GraphBuilder gb_;
  OpBuilder o_;
  const std::map<std::string, Tensor>& w_;
  const std::string& weight_format_;
  Status st_;
};

}  // namespace

Expected<BertConfig> BertConfig::from_json_file(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, uint64_t{1} << 24));
  return from_json(text, path);
}

Expected<BertConfig> BertConfig::from_json(std::string_view text, const std::string& path) {
  RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::parse_object(text, path));
  const json::Fields f(j, path);
  BertConfig c;
  RLX_TRY(json::require_string(f, "model_type"));
  // sizes a real BERT stays far below; the bound keeps every product of them in range
  constexpr int64_t kMaxSize = int64_t{1} << 24;
  RLX_TRY(f.read("vocab_size", c.vocab_size, 1, kMaxSize));
  RLX_TRY(f.read("hidden_size", c.hidden, 1, kMaxSize));
  RLX_TRY(f.read("num_hidden_layers", c.layers, 1, 4096));
  RLX_TRY(f.read("num_attention_heads", c.heads, 1, kMaxSize));
  RLX_TRY(f.read("intermediate_size", c.intermediate, 1, kMaxSize));
  RLX_TRY(f.read("max_position_embeddings", c.max_positions, 1, kMaxSize));
  RLX_TRY(f.read("type_vocab_size", c.type_vocab, 1, kMaxSize));
  RLX_TRY(f.read("layer_norm_eps", c.layer_norm_eps));
  RLX_TRY(f.read("hidden_act", c.hidden_act));
  if (c.hidden % c.heads != 0)
    return error(ErrorCode::format_error, path, ": hidden_size ", c.hidden, " is not a multiple of num_attention_heads ",
                 c.heads);
  if (c.hidden_act != "gelu" && c.hidden_act != "gelu_new" && c.hidden_act != "relu" && c.hidden_act != "gelu_pytorch_tanh")
    return error(ErrorCode::unsupported, path, ": hidden_act '", c.hidden_act, "' is not supported");
  return c;
}

std::string BertConfig::to_json() const {
  nlohmann::json j = {{"architectures", {"BertModel"}},
                      {"model_type", "bert"},
                      {"vocab_size", vocab_size},
                      {"hidden_size", hidden},
                      {"num_hidden_layers", layers},
                      {"num_attention_heads", heads},
                      {"intermediate_size", intermediate},
                      {"hidden_act", hidden_act},
                      {"hidden_dropout_prob", 0.1},
                      {"attention_probs_dropout_prob", 0.1},
                      {"max_position_embeddings", max_positions},
                      {"type_vocab_size", type_vocab},
                      {"initializer_range", 0.02},
                      {"layer_norm_eps", layer_norm_eps},
                      {"pad_token_id", 0},
                      {"position_embedding_type", "absolute"}};
  return j.dump(2);
}

Expected<Graph> build_bert(const BertConfig& c, const std::map<std::string, Tensor>& weights, BertOutput output,
                           const TensorParallel& tp, const std::string& weight_format) {
  if (tp.active() && !weight_format.empty())
    return error(ErrorCode::unsupported, "tensor parallelism of ", weight_format,
                 " block weights (split their rows of blocks first; int8 and f32 checkpoints shard)");
  Graph g;
  g.name = "bert";
  const Shape bs{Dim::symbol("batch"), Dim::symbol("seq")};
  ValueId ids = g.add_input("input_ids", TensorType{DType::i64, bs});
  ValueId mask = g.add_input("attention_mask", TensorType{DType::i64, bs});
  ValueId types = g.add_input("token_type_ids", TensorType{DType::i64, bs});
  Builder b(g, weights, weight_format);
  OpBuilder& o = b.o();
  // with tensor parallelism c counts this rank's heads and intermediate features (shard_bert)
  const int64_t h = c.hidden, nh = c.heads, hd = c.hidden / (c.heads * tp.size), ah = nh * hd;
  const int64_t vocab_rows = tp.active() ? tp.vocab_rows(c.vocab_size) : c.vocab_size;
  // embeddings: word + position + token type, then LayerNorm
  ValueId word = vocab_parallel_embedding(o, tp, b.weight("embeddings.word_embeddings.weight", {vocab_rows, h}), ids,
                                          tp.vocab_begin(c.vocab_size), vocab_rows);
  ValueId pos_ids = o.op(Op::Iota, {ids}, Attrs{{"dtype", DType::i64}, {"axis", int64_t{1}}});
  ValueId pos = o.embedding(b.weight("embeddings.position_embeddings.weight", {c.max_positions, h}), pos_ids);
  ValueId typ = o.embedding(b.weight("embeddings.token_type_embeddings.weight", {c.type_vocab, h}), types);
  ValueId x = b.layer_norm(o.add(o.add(word, pos), typ), "embeddings.LayerNorm", h, c.layer_norm_eps);
  // padding keys are masked out of every query's attention
  ValueId key_mask = o.reshape(o.cast(mask, DType::boolean), {0, 1, 1, -1});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    // heads stay in [B, S, H, D] (a view of the projection's output): no transposes
    auto heads = [&](ValueId t) { return o.reshape(t, {0, 0, nh, hd}); };
    ValueId q = heads(b.linear(x, p + "attention.self.query", h, ah));
    ValueId k = heads(b.linear(x, p + "attention.self.key", h, ah));
    ValueId v = heads(b.linear(x, p + "attention.self.value", h, ah));
    Attrs attention{{"causal", int64_t{0}}, {"layout", std::string("bshd")}};
    if (c.int8_attention_scores) attention.set("int8_scores", int64_t{1});
    ValueId ctx = o.op(Op::Attention, {q, k, v, key_mask}, attention);
    ctx = o.reshape(ctx, {0, 0, ah});
    ValueId attn = b.linear_partial(ctx, p + "attention.output.dense", ah, h, tp);
    x = b.layer_norm(o.add(attn, x), p + "attention.output.LayerNorm", h, c.layer_norm_eps);
    ValueId inter = b.linear(x, p + "intermediate.dense", h, c.intermediate);
    if (c.hidden_act == "relu") {
      inter = o.relu(inter);
    } else {
      inter = o.gelu(inter, c.hidden_act == "gelu" ? "none" : "tanh");
    }
    ValueId out = b.linear_partial(inter, p + "output.dense", c.intermediate, h, tp);
    x = b.layer_norm(o.add(out, x), p + "output.LayerNorm", h, c.layer_norm_eps);
    // where pipeline parallelism may cut the model (src/runtime/pipeline.h)
    if (l + 1 < c.layers && x != kNoValue) g.values[x].name = "layer." + std::to_string(l) + ".out";
  }
  if (output == BertOutput::last_hidden_state) {
    g.values[x].name = "last_hidden_state";
    g.outputs = {x};
  } else {
    // mean over real tokens, then unit length (sentence-transformers' Pooling + Normalize)
    ValueId m = o.reshape(o.cast(mask, DType::f32), {0, 0, 1});
    ValueId summed = o.reduce_sum(o.mul(x, m), {1}, false);
    ValueId count = o.max(o.reduce_sum(m, {1}, false), o.scalar(1e-9, DType::f32));
    ValueId mean = o.div(summed, count);
    ValueId norm = o.sqrt(o.reduce_sum(o.mul(mean, mean), {1}, true));
    ValueId emb = o.div(mean, o.max(norm, o.scalar(1e-12, DType::f32)));
    if (emb != kNoValue) g.values[emb].name = "sentence_embedding";
    g.outputs = {emb};
  }
  RLX_TRY(b.status());
  return g;
}

bool is_bert_folder(const std::string& dir) {
  auto j = json::read_object_file(dir + "/config.json");
  if (!j) return false;
  const nlohmann::json* type = j->contains("model_type") ? &(*j)["model_type"] : nullptr;
  if (type && type->is_string() && type->get<std::string>() == "bert") return true;
  if (j->contains("architectures") && (*j)["architectures"].is_array())
    for (const auto& a : (*j)["architectures"])
      if (a.is_string() && a.get<std::string>().rfind("Bert", 0) == 0) return true;
  return false;
}

Expected<BertModel> load_bert_folder(const std::string& dir, BertOutput output, const TensorParallel& tp, bool tokenizer) {
  BertModel m;
  RLX_ASSIGN_OR_RETURN(m.config, BertConfig::from_json_file(dir + "/config.json"));
  std::string weights = dir + "/model.safetensors";
  struct stat st;
  if (stat(weights.c_str(), &st) != 0) weights = dir + "/model.safetensors.index.json";
  RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(weights));
  auto fmt = f.metadata.find(std::string(kBlockWeightFormatKey));
  const std::string weight_format = fmt == f.metadata.end() ? std::string() : fmt->second;
  if (auto scores = f.metadata.find(std::string(kAttentionScoresKey)); scores != f.metadata.end()) {
    if (scores->second != "int8")
      return error(ErrorCode::format_error, weights, ": metadata ", kAttentionScoresKey, " = '", scores->second,
                   "' (only \"int8\" is known)");
    m.config.int8_attention_scores = true;
  }
  if (tp.active() && !weight_format.empty())
    return error(ErrorCode::unsupported, dir, ": tensor parallelism of a checkpoint with ", weight_format,
                 " block weights (", f.metadata.count("rlx.quantization") ? f.metadata.at("rlx.quantization") : weight_format,
                 "); quantize after sharding, or use the f32 or int8 folder");
  if (tp.active()) {
    auto shard = shard_bert(m.config, f.tensors, tp);
    if (!shard) return shard.status().with_context(dir);
    RLX_ASSIGN_OR_RETURN(m.graph, build_bert(shard->first, shard->second, output, tp));
  } else {
    auto g = build_bert(m.config, f.tensors, output, {}, weight_format);
    if (!g) return g.status().with_context(weights);
    m.graph = std::move(*g);
  }
  if (!tokenizer) return m;
  RLX_ASSIGN_OR_RETURN(m.tokenizer, text::WordPieceTokenizer::from_folder(dir));
  if (m.tokenizer.vocab_size() > m.config.vocab_size)
    return error(ErrorCode::format_error, dir, ": the tokenizer has ", m.tokenizer.vocab_size(),
                 " tokens but the model only ", m.config.vocab_size);
  return m;
}

namespace {

// A vocabulary of the right size with BERT's special tokens at their usual ids, every
// printable ASCII character (and its ## continuation), then pseudo-words.
std::vector<std::string> synthetic_vocab(int64_t size, std::mt19937_64& rng) {
  std::vector<std::string> v;
  v.push_back("[PAD]");
  for (int i = 1; i < 100; ++i) v.push_back("[unused" + std::to_string(i - 1) + "]");
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) v.push_back(s);
  for (char c = 33; c < 127; ++c) {
    if (c >= 'A' && c <= 'Z') continue;  // uncased
    v.push_back(std::string(1, c));
  }
  for (char c = 33; c < 127; ++c) {
    if (c >= 'A' && c <= 'Z') continue;
    v.push_back("##" + std::string(1, c));
  }
  const char* onsets[] = {"b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
                          "st", "th", "ch", "sh", "pr", "tr", "gr", "bl", ""};
  const char* vowels[] = {"a", "e", "i", "o", "u", "ai", "ea", "ou", "io"};
  const char* codas[] = {"", "n", "r", "s", "t", "l", "nd", "ng", "st", "ck"};
  std::set<std::string> seen(v.begin(), v.end());
  while (static_cast<int64_t>(v.size()) < size) {
    int syllables = 1 + static_cast<int>(rng() % 3);
    std::string w;
    for (int s = 0; s < syllables; ++s)
      w += std::string(onsets[rng() % 26]) + vowels[rng() % 9] + codas[rng() % 10];
    if (rng() % 4 == 0) w = "##" + w;
    if (seen.insert(w).second) v.push_back(w);
  }
  v.resize(static_cast<size_t>(size));
  return v;
}

}  // namespace

Status write_random_bert(const std::string& dir, const BertConfig& c, uint64_t seed) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // parents too (models/minilm)
  if (ec) return error(ErrorCode::io_error, "cannot create ", dir, ": ", ec.message());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<std::pair<std::string, Tensor>> tensors;
  auto add = [&](const std::string& name, Sizes shape, float fill_or_nan) {
    Tensor t = Tensor::zeros(DType::f32, std::move(shape));
    float* d = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = std::isnan(fill_or_nan) ? normal(rng) : fill_or_nan;
    tensors.emplace_back(name, std::move(t));
  };
  const float rnd = std::nanf("");
  // LayerNorm scales near 1 and biases near 0, but not exactly, so they are exercised
  auto ln = [&](const std::string& name) {
    add(name + ".weight", {c.hidden}, rnd);
    for (int64_t i = 0; i < c.hidden; ++i) tensors.back().second.data<float>()[i] += 1.f;
    add(name + ".bias", {c.hidden}, rnd);
  };
  add("embeddings.word_embeddings.weight", {c.vocab_size, c.hidden}, rnd);
  add("embeddings.position_embeddings.weight", {c.max_positions, c.hidden}, rnd);
  add("embeddings.token_type_embeddings.weight", {c.type_vocab, c.hidden}, rnd);
  ln("embeddings.LayerNorm");
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      add(p + m + ".weight", {c.hidden, c.hidden}, rnd);
      add(p + m + ".bias", {c.hidden}, rnd);
    }
    ln(p + "attention.output.LayerNorm");
    add(p + "intermediate.dense.weight", {c.intermediate, c.hidden}, rnd);
    add(p + "intermediate.dense.bias", {c.intermediate}, rnd);
    add(p + "output.dense.weight", {c.hidden, c.intermediate}, rnd);
    add(p + "output.dense.bias", {c.hidden}, rnd);
    ln(p + "output.LayerNorm");
  }
  add("pooler.dense.weight", {c.hidden, c.hidden}, rnd);
  add("pooler.dense.bias", {c.hidden}, rnd);
  RLX_TRY(safetensors::save(dir + "/model.safetensors", tensors, {{"format", "pt"}}));
  {
    std::ofstream f(dir + "/config.json");
    f << c.to_json() << "\n";
    if (!f) return error(ErrorCode::io_error, "cannot write ", dir, "/config.json");
  }
  {
    std::ofstream f(dir + "/vocab.txt");
    for (const std::string& t : synthetic_vocab(c.vocab_size, rng)) f << t << "\n";
    if (!f) return error(ErrorCode::io_error, "cannot write ", dir, "/vocab.txt");
  }
  std::ofstream(dir + "/tokenizer_config.json") << R"({"do_lower_case": true, "model_max_length": 512})" << "\n";
  return Status::ok();
}

}  // namespace rlx::models

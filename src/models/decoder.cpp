#include "decoder_internal.h"

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

// Builds the step graph; weights are checked for shape as they are used.
class StepBuilder {
 public:
  StepBuilder(Graph& g, const DecoderWeights& w) : g_(g), gb_(g), o_(gb_), w_(w) {}
  OpBuilder& o() { return o_; }
  Status status() const { return st_.is_ok() ? o_.status() : st_; }

  const DecoderWeight* find(const std::string& name) {
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
    const DecoderWeight* w = find(name);
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
    const DecoderWeight* w = find(name);
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
  ValueId int8_linear(ValueId x, const std::string& name, const DecoderWeight& w, int64_t in, int64_t out) {
    const DecoderWeight& s = w_.tensors.at(name + "_scale");
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

  // RMSNorm over the last axis by the scale `name` [n] (1 + scale for Gemma's checkpoints).
  ValueId rms_norm(ValueId x, const std::string& name, int64_t n) {
    ValueId scale = dense(name, {n});
    if (w_.config.norm_plus_one && scale != kNoValue) scale = o_.add(scale, o_.scalar(1.0, DType::f32));
    return o_.rms_norm(x, scale, -1, w_.config.rms_eps);
  }

  // A Linear projection plus its bias `bias_name` [out] when the model has one.
  ValueId linear_bias(ValueId x, const std::string& name, int64_t in, int64_t out, bool has_bias) {
    ValueId y = linear(x, name, in, out);
    if (!has_bias) return y;
    const std::string bias_name = name.substr(0, name.size() - std::string_view(".weight").size()) + ".bias";
    return o_.add(y, dense(bias_name, {out}));
  }

 private:
  Graph& g_;
  GraphBuilder gb_;
  OpBuilder o_;
  const DecoderWeights& w_;
  Status st_;
  std::map<std::string, ValueId> params_;
};

}  // namespace

Expected<Graph> build_decoder(const DecoderWeights& w, const DecoderGraphOptions& opt) {
  const DecoderConfig& c = w.config;
  RLX_TRY(c.validate(w.source));
  if (opt.context <= 0) return error(ErrorCode::invalid_argument, "the KV cache needs at least one slot");
  if (opt.block_size <= 0) return error(ErrorCode::invalid_argument, "KV-cache blocks need at least one slot");
  const int64_t table = paged_table_blocks(opt.context, opt.block_size);
  const int64_t pool = opt.pool_blocks > 0 ? opt.pool_blocks : table;
  Graph g;
  g.name = cat(family_name(c.family), opt.decode ? "_decode" : "_prefill");
  const Dim B = Dim::symbol("batch");
  const Dim S = opt.decode ? Dim(1) : Dim::symbol("seq");
  const int64_t H = c.hidden, Hq = c.heads, Hkv = c.kv_heads, D = c.head_dim, keys = table * opt.block_size;
  ValueId ids = g.add_input("input_ids", TensorType{DType::i64, {B, S}});
  ValueId pos = g.add_input("positions", TensorType{DType::i64, {B, S}});
  ValueId slots = g.add_input("slots", TensorType{DType::i64, {B, S}});
  ValueId blocks = g.add_input("block_table", TensorType{DType::i64, {B, Dim(table)}});
  ValueId mask = g.add_input("mask", TensorType{DType::boolean, {B, Dim(1), S, Dim(keys)}});
  const ValueId mask_local =
      c.has_sliding_layers() ? g.add_input("mask_local", TensorType{DType::boolean, {B, Dim(1), S, Dim(keys)}}) : kNoValue;
  std::vector<ValueId> kc(c.layers), vc(c.layers);
  for (int64_t l = 0; l < c.layers; ++l) {
    const TensorType pool_type{DType::f32, {Dim(Hkv), Dim(pool * opt.block_size), Dim(D)}};
    kc[l] = g.add_input("k_cache." + std::to_string(l), pool_type);
    vc[l] = g.add_input("v_cache." + std::to_string(l), pool_type);
  }
  StepBuilder b(g, w);
  OpBuilder& o = b.o();
  // tensor parallelism (models/tensor_parallel.h): c counts this rank's heads and MLP
  // features; the vocabulary is split into tp.vocab_rows(V) rows per rank
  const TensorParallel& tp = w.tp;
  const int64_t V = c.vocab_size, Vl = tp.active() ? tp.vocab_rows(V) : V;
  ValueId x = vocab_parallel_embedding(o, tp, b.dense("model.embed_tokens.weight", {Vl, H}), ids,
                                       tp.vocab_begin(V), Vl);  // [B, S, H]
  if (c.embedding_multiplier() != 1.0) x = o.mul(x, o.scalar(c.embedding_multiplier(), DType::f32));
  std::vector<ValueId> new_caches;
  // the rotary frequencies of global and sliding layers (a plain theta when nothing scales them)
  auto rope_attrs = [&](int64_t l) {
    Attrs a{{"theta", c.is_sliding(l) && c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta},
            {"layout", std::string("bshd")}};
    if (c.rope_interleaved) a.set("interleaved", int64_t{1});
    if (c.rope_scaled(l)) a.set("inv_freq", c.rope_inv_freq(l, opt.rope_context > 0 ? opt.rope_context : opt.context));
    return a;
  };
  // YaRN's factor on cos and sin multiplies q . k by its square: folded into the scale
  auto att_attrs = [&](int64_t l) {
    Attrs a{{"block_size", opt.block_size}};
    const double mscale = c.rope_attention_factor(l);
    const double scale = c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    if (c.attention_scale > 0 || mscale != 1.0) a.set("scale", scale * mscale * mscale);
    if (c.attn_softcap > 0) a.set("softcap", c.attn_softcap);
    return a;
  };
  std::vector<ValueId> layer_out;
  const std::string pre_mlp_norm = c.post_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = layer_prefix(l);
    ValueId h = b.rms_norm(x, p + "input_layernorm.weight", H);
    ValueId q = o.reshape(b.linear_bias(h, p + "self_attn.q_proj.weight", H, Hq * D, c.attention_bias), {0, 0, Hq, D});
    ValueId k = o.reshape(b.linear_bias(h, p + "self_attn.k_proj.weight", H, Hkv * D, c.attention_bias), {0, 0, Hkv, D});
    ValueId v = o.reshape(b.linear_bias(h, p + "self_attn.v_proj.weight", H, Hkv * D, c.attention_bias), {0, 0, Hkv, D});
    if (c.qk_norm) {
      q = b.rms_norm(q, p + "self_attn.q_norm.weight", D);
      k = b.rms_norm(k, p + "self_attn.k_norm.weight", D);
    }
    const Attrs ra = rope_attrs(l);
    q = o.op(Op::Rope, {q, pos}, ra);
    k = o.op(Op::Rope, {k, pos}, ra);
    // the pools are [Hkv, slots, D]: this step's keys and values land at the slots the session
    // gave each token ([B, S, Hkv, D] -> [Hkv, B, S, D] updates)
    const Attrs sa{{"axis", int64_t{1}}};
    ValueId k2 = o.op(Op::Scatter, {kc[l], slots, o.transpose(k, {2, 0, 1, 3})}, sa);
    ValueId v2 = o.op(Op::Scatter, {vc[l], slots, o.transpose(v, {2, 0, 1, 3})}, sa);
    new_caches.push_back(k2);
    new_caches.push_back(v2);
    // (bhsd queries: the CPU's attention kernel runs prefill blocks about 15% faster on
    // contiguous query rows than on bshd's strided ones, more than the two transposes cost)
    ValueId att = o.op(Op::PagedAttention, {o.transpose(q, {0, 2, 1, 3}), k2, v2, blocks, c.is_sliding(l) ? mask_local : mask},
                       att_attrs(l));
    att = o.reshape(o.transpose(att, {0, 2, 1, 3}), {0, 0, Hq * D});
    ValueId attn_out = tp_all_reduce(o, tp, b.linear(att, p + "self_attn.o_proj.weight", Hq * D, H));
    if (c.post_norms) attn_out = b.rms_norm(attn_out, p + "post_attention_layernorm.weight", H);
    x = o.add(x, attn_out);
    h = b.rms_norm(x, p + pre_mlp_norm, H);
    ValueId gate = b.linear(h, p + "mlp.gate_proj.weight", H, c.intermediate);
    ValueId up = b.linear(h, p + "mlp.up_proj.weight", H, c.intermediate);
    ValueId act = c.gelu_mlp ? o.gelu(gate, "tanh") : o.silu(gate);
    ValueId mlp_out = tp_all_reduce(o, tp, b.linear(o.mul(act, up), p + "mlp.down_proj.weight", c.intermediate, H));
    if (c.post_norms) mlp_out = b.rms_norm(mlp_out, p + "post_feedforward_layernorm.weight", H);
    x = o.add(x, mlp_out);
    layer_out.push_back(x);
    // where pipeline parallelism may cut the model (src/runtime/pipeline.h)
    if (l + 1 < c.layers && x != kNoValue) g.values[x].name = "layer." + std::to_string(l) + ".out";
  }
  if (!opt.all_logits && !opt.decode)
    x = o.slice(x, {-1}, {std::numeric_limits<int64_t>::max()}, {1});
  x = b.rms_norm(x, "model.norm.weight", H);
  const std::string head = c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  ValueId logits = gather_vocab_logits(o, tp, b.linear(x, head, H, Vl), V);
  if (c.final_softcap > 0)
    logits = o.mul(o.tanh(o.mul(logits, o.scalar(1.0 / c.final_softcap, DType::f32))), o.scalar(c.final_softcap, DType::f32));
  RLX_TRY(b.status());
  g.values[logits].name = "logits";
  g.outputs = {logits};
  for (int64_t l = 0; l < c.layers; ++l) {
    g.values[new_caches[2 * l]].name = "k_cache_out." + std::to_string(l);
    g.values[new_caches[2 * l + 1]].name = "v_cache_out." + std::to_string(l);
    g.outputs.push_back(new_caches[2 * l]);
    g.outputs.push_back(new_caches[2 * l + 1]);
  }
  if (opt.layer_outputs)
    for (int64_t l = 0; l < c.layers; ++l) {
      // (a value that is already an output, such as the last layer's without a slice, is
      // listed again: outputs may repeat)
      if (g.values[layer_out[l]].name.empty()) g.values[layer_out[l]].name = "layer_out." + std::to_string(l);
      g.outputs.push_back(layer_out[l]);
    }
  return g;
}

Expected<Tensor> decoder_layer_outputs(const DecoderWeights& w, const std::vector<int64_t>& prompt, const std::string& device,
                                       int64_t context) {
  const DecoderConfig& c = w.config;
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n == 0) return error(ErrorCode::invalid_argument, "an empty prompt");
  for (int64_t t : prompt)
    if (t < 0 || t >= c.vocab_size)
      return error(ErrorCode::invalid_argument, "token id ", t, " is outside the vocabulary of ", c.vocab_size);
  if (w.tp.active()) return error(ErrorCode::unsupported, "layer outputs of a tensor-parallel shard");
  if (context < 0) return error(ErrorCode::invalid_argument, "a context of ", context, " tokens");
  // one block of n slots holds the prompt: the table is {1, 0} (block 0 is the scratch block)
  DecoderGraphOptions go{.context = n, .all_logits = false, .decode = false, .block_size = n, .pool_blocks = 2,
                         .layer_outputs = true};
  go.rope_context = context > 0 ? context : n;
  RLX_ASSIGN_OR_RETURN(Graph g, build_decoder(w, go));
  CompileOptions co;
  co.device = device;
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(std::move(g), co));
  const int64_t keys = 2 * n;
  RLX_TRY(check_allocation(DType::f32, {c.layers, n, c.hidden}, "layer outputs"));
  RLX_TRY(check_allocation(DType::boolean, {2, n, keys}, "the prompt's attention masks"));
  RLX_TRY(check_allocation(DType::f32, {2 * c.layers, c.kv_heads, keys, c.head_dim}, "the prompt's KV cache"));
  Tensor ids = Tensor::zeros(DType::i64, {1, n}), pos = Tensor::zeros(DType::i64, {1, n});
  Tensor slots = Tensor::zeros(DType::i64, {1, n}), table = Tensor::zeros(DType::i64, {1, 2});
  Tensor mask = Tensor::zeros(DType::boolean, {1, 1, n, keys}), local = Tensor::zeros(DType::boolean, {1, 1, n, keys});
  table.data<int64_t>()[0] = 1;
  for (int64_t i = 0; i < n; ++i) {
    ids.data<int64_t>()[i] = prompt[static_cast<size_t>(i)];
    pos.data<int64_t>()[i] = i;
    slots.data<int64_t>()[i] = n + i;
    std::fill(mask.data<bool>() + i * keys, mask.data<bool>() + i * keys + i + 1, true);
    if (c.has_sliding_layers())
      std::fill(local.data<bool>() + i * keys + std::max<int64_t>(0, i - c.sliding_window + 1), local.data<bool>() + i * keys + i + 1,
                true);
  }
  std::vector<Tensor> inputs{ids, pos, slots, table, mask};
  if (c.has_sliding_layers()) inputs.push_back(local);
  for (int64_t l = 0; l < 2 * c.layers; ++l) inputs.push_back(Tensor::zeros(DType::f32, {c.kv_heads, keys, c.head_dim}));
  RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, model->run(inputs));
  const size_t first = 1 + 2 * static_cast<size_t>(c.layers);
  if (out.size() != first + static_cast<size_t>(c.layers))
    return error(ErrorCode::internal, "the layer-output graph gave ", out.size(), " outputs");
  Tensor all = Tensor::zeros(DType::f32, {c.layers, n, c.hidden});
  for (int64_t l = 0; l < c.layers; ++l) {
    const Tensor& t = out[first + static_cast<size_t>(l)];
    if (t.dtype() != DType::f32 || t.numel() != n * c.hidden)
      return error(ErrorCode::internal, "layer ", l, "'s output has ", t.numel(), " values, not ", n * c.hidden);
    std::copy(t.data<float>(), t.data<float>() + n * c.hidden, all.data<float>() + l * n * c.hidden);
  }
  return all;
}

std::vector<std::pair<int, int>> decoder_cache_donations(const DecoderConfig& c) {
  std::vector<std::pair<int, int>> d;
  // the cache inputs follow ids, positions, slots, the block table and the masks
  const int first = c.has_sliding_layers() ? 6 : 5;
  for (int l = 0; l < static_cast<int>(c.layers); ++l) {
    d.emplace_back(1 + 2 * l, first + 2 * l);
    d.emplace_back(2 + 2 * l, first + 1 + 2 * l);
  }
  return d;
}

// ---------------------------------------------------------------------------------------
// Session

Expected<std::unique_ptr<DecoderSession>> DecoderSession::create(const DecoderWeights& w, int64_t batch, int64_t context,
                                                             const std::string& device, bool all_logits,
                                                             DecoderParallel par, passes::Precision precision,
                                                             KvCacheOptions kv) {
  if ((w.tp.active() || par.pipeline) && !par.comm)
    return error(ErrorCode::invalid_argument, "a tensor- or pipeline-parallel session needs a communicator");
  if (w.tp.active() && par.pipeline && (!par.stage_comm || par.stage_comm->size() != w.tp.size))
    return error(ErrorCode::invalid_argument, "tensor and pipeline parallelism together need the stage's group of ",
                 w.tp.size, " tensor-parallel ranks (DecoderParallel::stage_comm)");
  if (batch <= 0) return error(ErrorCode::invalid_argument, "batch must be positive");
  if (context <= 0) return error(ErrorCode::invalid_argument, "the context must be positive");
  if (kv.block_size <= 0 || kv.block_size > 4096)
    return error(ErrorCode::invalid_argument, "a KV-cache block holds 1 to 4096 tokens, not ", kv.block_size);
  const int64_t per_sequence = paged_table_blocks(context, kv.block_size) - 1;
  if (kv.blocks < 0 || (kv.blocks == 0 && batch > std::numeric_limits<int32_t>::max() / per_sequence))
    return error(ErrorCode::invalid_argument, "KV-cache blocks: ", kv.blocks);
  const int64_t blocks = kv.blocks > 0 ? kv.blocks : batch * per_sequence;
  std::unique_ptr<DecoderSession> s(new DecoderSession());
  s->config_ = w.config;
  s->batch_ = batch;
  s->context_ = context;
  s->block_size_ = kv.block_size;
  s->pool_blocks_ = blocks + 1;  // block 0: the scratch block
  s->table_cols_ = paged_table_blocks(context, kv.block_size);
  CompileOptions co;
  co.device = device;
  co.donate = decoder_cache_donations(w.config);
  // collectives inside the graph: the tensor-parallel group (of the stage, with a pipeline)
  co.comm = par.pipeline ? (w.tp.active() ? par.stage_comm : nullptr) : par.comm;
  s->all_logits_ = all_logits;
  const DecoderGraphOptions go{.context = context, .all_logits = all_logits, .decode = false,
                               .block_size = kv.block_size, .pool_blocks = s->pool_blocks_};
  DecoderGraphOptions dgo = go;
  dgo.all_logits = false;
  dgo.decode = true;
  RLX_ASSIGN_OR_RETURN(Graph pg, build_decoder(w, go));
  RLX_ASSIGN_OR_RETURN(Graph dg, build_decoder(w, dgo));
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
  const DecoderConfig& c = w.config;
  // (the pool's size comes from flags: all layers' pools are checked against this machine's
  // memory before any is taken)
  const std::string what = cat("the KV cache (", blocks, " blocks of ", kv.block_size, " tokens, ", c.layers, " layers)");
  const Sizes pool_sizes{c.kv_heads, s->pool_blocks_ * kv.block_size, c.head_dim};
  RLX_TRY(check_allocation(DType::f32, {2 * c.layers, pool_sizes[0], pool_sizes[1], pool_sizes[2]}, what));
  for (int64_t l = 0; l < 2 * c.layers; ++l) {
    RLX_ASSIGN_OR_RETURN(Tensor pool, Tensor::allocate(DType::f32, pool_sizes, what));
    s->caches_.push_back(std::move(pool));
  }
  s->pad_.assign(batch, 0);
  s->kv_ = std::make_unique<KvBlocks>(blocks, batch, kv.block_size, kv.prefix_caching);
  return s;
}

DecoderSession::~DecoderSession() = default;

Status DecoderSession::prepare(int64_t prompt_len) {
  if (prefill_pp_) return Status::ok();  // each stage compiles its variants on first use
  RLX_TRY(prefill_->prepare({{"batch", batch_}, {"seq", prompt_len}}).status());
  RLX_TRY(decode_->prepare({{"batch", batch_}}).status());
  return Status::ok();
}

Status DecoderSession::prepare_rows(int64_t rows, int64_t seq) {
  if (rows < 1 || rows > batch_ || seq < 1) return error(ErrorCode::invalid_argument, "prepare_rows(", rows, ", ", seq, ")");
  if (prefill_pp_) return Status::ok();
  if (seq == 1) return decode_->prepare({{"batch", rows}}).status();
  return prefill_->prepare({{"batch", rows}, {"seq", seq}}).status();
}

void DecoderSession::reset_row(int64_t row) {
  if (row >= 0 && row < batch_) kv_->release(row);
}

int64_t DecoderSession::adopt_prefix(int64_t row, const std::vector<int64_t>& tokens) {
  if (row < 0 || row >= batch_ || static_cast<int64_t>(tokens.size()) > context_) return 0;
  return kv_->adopt_prefix(row, tokens);
}

int64_t DecoderSession::free_blocks() const { return kv_->available(); }
int64_t DecoderSession::length(int64_t b) const { return kv_->length(b); }
int64_t DecoderSession::blocks_needed(int64_t row, int64_t tokens) const { return kv_->needed(row, tokens); }

Expected<Tensor> DecoderSession::extend(int64_t first_row, const std::vector<std::vector<int64_t>>& tokens,
                                        int64_t min_seq) {
  const int64_t rows = static_cast<int64_t>(tokens.size());
  if (first_row < 0 || rows < 1 || first_row + rows > batch_)
    return error(ErrorCode::invalid_argument, "rows ", first_row, "..", first_row + rows - 1, " are outside the session's ",
                 batch_, " sequences");
  if (min_seq < 1 || min_seq > context_) return error(ErrorCode::invalid_argument, "a step of ", min_seq, " positions");
  int64_t seq = min_seq;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = first_row + r, n = static_cast<int64_t>(tokens[r].size());
    for (int64_t t : tokens[r])
      if (t < 0 || t >= config_.vocab_size)
        return error(ErrorCode::invalid_argument, "token id ", t, " is outside the vocabulary of ", config_.vocab_size);
    if (length(b) + n > context_)
      return error(ErrorCode::out_of_range, "the KV cache holds ", context_, " tokens per sequence; sequence ", b, " needs ",
                   length(b) + n);
    seq = std::max(seq, n);
  }
  // the blocks the step's new tokens need, all or none
  int64_t new_blocks = 0;
  for (int64_t r = 0; r < rows; ++r) new_blocks += blocks_needed(first_row + r, static_cast<int64_t>(tokens[r].size()));
  if (new_blocks > free_blocks())
    return error(ErrorCode::unavailable, "the KV cache has ", free_blocks(), " free blocks of ", block_size_,
                 " tokens; the step needs ", new_blocks);
  for (int64_t r = 0; r < rows; ++r) kv_->reserve(first_row + r, static_cast<int64_t>(tokens[r].size()));
  // each row's tokens end at the step's last position (so that the last position's logits are
  // every row's next-token logits); the positions before them are pads, which write slot 0 and
  // attend only to key `scratch`, which the table's last column maps to block 0
  const int64_t keys = table_cols_ * block_size_, scratch = (table_cols_ - 1) * block_size_;
  Tensor tid = Tensor::zeros(DType::i64, {rows, seq});
  Tensor tpos = Tensor::zeros(DType::i64, {rows, seq});
  Tensor tslots = Tensor::zeros(DType::i64, {rows, seq});
  Tensor ttable = Tensor::zeros(DType::i64, {rows, table_cols_});
  Tensor tmask = Tensor::zeros(DType::boolean, {rows, 1, seq, keys});
  const bool sliding = config_.has_sliding_layers();
  Tensor tlocal = sliding ? Tensor::zeros(DType::boolean, {rows, 1, seq, keys}) : Tensor{};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = first_row + r, n = static_cast<int64_t>(tokens[r].size());
    const std::vector<int64_t>& blocks = kv_->table(b);
    std::copy(blocks.begin(), blocks.end(), ttable.data<int64_t>() + r * table_cols_);
    pad_[b] = seq - n;
    for (int64_t i = 0; i < seq; ++i) {
      const int64_t e = r * seq + i;
      bool* m = tmask.data<bool>() + e * keys;
      bool* ml = sliding ? tlocal.data<bool>() + e * keys : nullptr;
      if (i < pad_[b]) {
        m[scratch] = true;
        if (ml) ml[scratch] = true;
        continue;
      }
      const int64_t p = length(b) + i - pad_[b];
      tid.data<int64_t>()[e] = tokens[r][i - pad_[b]];
      tpos.data<int64_t>()[e] = p;
      tslots.data<int64_t>()[e] = blocks[p / block_size_] * block_size_ + p % block_size_;
      std::fill(m, m + p + 1, true);
      // a sliding layer's query sees the last sliding_window keys, itself included
      if (ml) std::fill(ml + std::max<int64_t>(0, p - config_.sliding_window + 1), ml + p + 1, true);
    }
  }
  std::vector<Tensor> inputs{tid, tpos, tslots, ttable, tmask};
  if (sliding) inputs.push_back(tlocal);
  const std::vector<Tensor>& caches = caches_;
  for (const Tensor& t : caches) inputs.push_back(t);
  const bool prefill = seq > 1;  // (a one-token step's logits are the same from either graph)
  std::vector<Tensor> outputs;
  if (prefill_pp_) {
    const Sizes lsizes{rows, prefill && all_logits_ ? seq : 1, config_.vocab_size};
    Tensor& logits = logits_[lsizes];
    if (!logits.defined() || logits.sizes() != lsizes) logits = Tensor::zeros(DType::f32, lsizes);
    outputs.push_back(logits);
    for (const Tensor& t : caches) outputs.push_back(t);
    RLX_TRY((prefill ? *prefill_pp_ : *decode_pp_).run_into(inputs, outputs));
  } else {
    Model& m = prefill ? *prefill_ : *decode_;
    RLX_ASSIGN_OR_RETURN(CompiledVariant * v, m.variant_for(inputs));
    const Shape& ls = v->primitive_graph.type(v->primitive_graph.outputs[0]).shape;
    RLX_ASSIGN_OR_RETURN(Sizes lsizes, static_sizes(ls, "logits"));
    // one logits buffer per shape, reused: a fresh 128 KB+ tensor per token costs page faults
    Tensor& logits = logits_[lsizes];
    if (!logits.defined() || logits.sizes() != lsizes) logits = Tensor::zeros(DType::f32, lsizes);
    outputs.push_back(logits);
    for (const Tensor& t : caches) outputs.push_back(t);
    RLX_TRY(v->executable->run_into(inputs, outputs));
  }
  for (int64_t r = 0; r < rows; ++r) kv_->commit(first_row + r, tokens[r]);
  return outputs[0];
}

Expected<Tensor> DecoderSession::prefill(const std::vector<std::vector<int64_t>>& prompts) {
  if (prompts.empty() || static_cast<int64_t>(prompts.size()) > batch_)
    return error(ErrorCode::invalid_argument, "prefill takes 1 to ", batch_, " prompts, got ", prompts.size());
  for (const auto& p : prompts)
    if (p.empty()) return error(ErrorCode::invalid_argument, "an empty prompt");
  // missing sequences repeat the first prompt (their results are ignored): the compiled batch
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(batch_), prompts[0]);
  std::copy(prompts.begin(), prompts.end(), rows.begin());
  for (int64_t b = 0; b < batch_; ++b) reset_row(b);
  return extend(0, rows);
}

Expected<Tensor> DecoderSession::decode(const std::vector<int64_t>& tokens) {
  if (length(0) == 0) return error(ErrorCode::invalid_argument, "decode before prefill");
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(batch_), {tokens.empty() ? 0 : tokens[0]});
  for (size_t b = 0; b < tokens.size() && static_cast<int64_t>(b) < batch_; ++b) rows[b] = {tokens[b]};
  return extend(0, rows);
}

}  // namespace rlx::models

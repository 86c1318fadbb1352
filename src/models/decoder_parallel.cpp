// Tensor-parallel shards of decoder weights (shard_decoder in decoder.h; the scheme is described
// in tensor_parallel.h). The rank-local graph is then the ordinary build_decoder graph over the
// shard's smaller head and feature counts, plus the collectives build_decoder inserts.
#include <string>

#include "models/decoder.h"

namespace rlx::models {
namespace {

enum class Split : uint8_t { rows, cols };

// Slices one matrix `name` of [out, in] elements: rows [begin, begin + count) or columns.
Status shard_matrix(const DecoderWeights& w, DecoderWeights& s, const std::string& name, Split split, int64_t begin,
                    int64_t count) {
  auto it = w.tensors.find(name);
  if (it == w.tensors.end()) return error(ErrorCode::format_error, w.source, ": no tensor '", name, "'");
  const DecoderWeight& src = it->second;
  DecoderWeight& dst = s.tensors[name];
  dst.format = src.format;
  if (split == Split::rows) {
    RLX_ASSIGN_OR_RETURN(dst.data, slice_rows(src.data, begin, count, name));
    auto sc = w.tensors.find(name + "_scale");  // int8 rows keep their own scales
    if (sc != w.tensors.end()) {
      RLX_ASSIGN_OR_RETURN(Tensor col, sc->second.data.reshaped({sc->second.data.numel(), 1}));
      RLX_ASSIGN_OR_RETURN(Tensor part, slice_rows(col, begin, count, name + "_scale"));
      RLX_ASSIGN_OR_RETURN(s.tensors[name + "_scale"].data, part.reshaped({count}));
    }
    return Status::ok();
  }
  if (src.format.empty()) {
    RLX_ASSIGN_OR_RETURN(dst.data, slice_cols(src.data, begin, count, name));
    return Status::ok();
  }
  auto qf = quant_format(src.format);
  if (!qf) return error(ErrorCode::unsupported, w.source, ": tensor '", name, "' has unknown format ", src.format);
  if (begin % qf->block_elems != 0 || count % qf->block_elems != 0)
    return error(ErrorCode::invalid_argument, "tensor parallelism: '", name, "' is ", src.format, " with blocks of ",
                 qf->block_elems, " values; this rank's ", count, " input features at ", begin,
                 " do not start and end on a block (use fewer ranks or a finer format)");
  RLX_ASSIGN_OR_RETURN(dst.data, slice_row_bytes(src.data, begin / qf->block_elems * qf->block_bytes,
                                                 count / qf->block_elems * qf->block_bytes, name));
  return Status::ok();
}

}  // namespace

Expected<DecoderWeights> shard_decoder(const DecoderWeights& w, const TensorParallel& tp) {
  const DecoderConfig& c = w.config;
  RLX_TRY(c.validate(w.source));
  if (w.tp.active()) return error(ErrorCode::invalid_argument, w.source, ": the weights are already a shard");
  RLX_TRY(tp.check_divides(c.heads, "num_attention_heads"));
  RLX_TRY(tp.check_divides(c.kv_heads, "num_key_value_heads"));
  RLX_TRY(tp.check_divides(c.intermediate, "intermediate_size"));
  DecoderWeights s;
  s.source = w.source + " (tensor-parallel rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.size) + ")";
  s.tp = tp;
  s.config = c;
  s.config.heads = c.heads / tp.size;
  s.config.kv_heads = c.kv_heads / tp.size;
  s.config.intermediate = c.intermediate / tp.size;
  // everything not split below is replicated (norms)
  for (const auto& [name, t] : w.tensors) s.tensors[name] = t;
  const int64_t D = c.head_dim;
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int64_t q = s.config.heads * D, kv = s.config.kv_heads * D, f = s.config.intermediate;
    RLX_TRY(shard_matrix(w, s, p + "self_attn.q_proj.weight", Split::rows, q * tp.rank, q));
    RLX_TRY(shard_matrix(w, s, p + "self_attn.k_proj.weight", Split::rows, kv * tp.rank, kv));
    RLX_TRY(shard_matrix(w, s, p + "self_attn.v_proj.weight", Split::rows, kv * tp.rank, kv));
    RLX_TRY(shard_matrix(w, s, p + "self_attn.o_proj.weight", Split::cols, q * tp.rank, q));
    if (c.attention_bias) {
      // biases [out] follow their matrices' rows
      for (auto [name, n] : {std::pair{"q_proj.bias", q}, {"k_proj.bias", kv}, {"v_proj.bias", kv}}) {
        const std::string b = p + "self_attn." + name;
        auto it = w.tensors.find(b);
        if (it == w.tensors.end()) return error(ErrorCode::format_error, w.source, ": no tensor '", b, "'");
        RLX_ASSIGN_OR_RETURN(Tensor col, it->second.data.reshaped({it->second.data.numel(), 1}));
        RLX_ASSIGN_OR_RETURN(Tensor part, slice_rows(col, n * tp.rank, n, b));
        RLX_ASSIGN_OR_RETURN(s.tensors[b].data, part.reshaped({n}));
      }
    }
    RLX_TRY(shard_matrix(w, s, p + "mlp.gate_proj.weight", Split::rows, f * tp.rank, f));
    RLX_TRY(shard_matrix(w, s, p + "mlp.up_proj.weight", Split::rows, f * tp.rank, f));
    RLX_TRY(shard_matrix(w, s, p + "mlp.down_proj.weight", Split::cols, f * tp.rank, f));
  }
  const int64_t rows = tp.vocab_rows(c.vocab_size);
  RLX_TRY(shard_matrix(w, s, "model.embed_tokens.weight", Split::rows, tp.vocab_begin(c.vocab_size), rows));
  if (!c.tie_embeddings)
    RLX_TRY(shard_matrix(w, s, "lm_head.weight", Split::rows, tp.vocab_begin(c.vocab_size), rows));
  return s;
}

}  // namespace rlx::models

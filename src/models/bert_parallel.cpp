// Tensor-parallel shards of BERT checkpoints (shard_bert in bert.h; the scheme is described in
// models/tensor_parallel.h).
#include <string>

#include "models/bert.h"

namespace rlx::models {

Expected<std::pair<BertConfig, std::map<std::string, Tensor>>> shard_bert(const BertConfig& cfg,
                                                                          const std::map<std::string, Tensor>& weights,
                                                                          const TensorParallel& tp) {
  RLX_TRY(tp.check_divides(cfg.heads, "num_attention_heads"));
  RLX_TRY(tp.check_divides(cfg.intermediate, "intermediate_size"));
  BertConfig c = cfg;
  c.heads = cfg.heads / tp.size;
  c.intermediate = cfg.intermediate / tp.size;
  std::map<std::string, Tensor> out = weights;  // replicated tensors are shared, not copied
  // the sliced tensors go in under their plain names, which find_bert_weight tries first
  auto get = [&](const std::string& name) -> Expected<const Tensor*> {
    const Tensor* t = find_bert_weight(weights, name);
    if (!t) return error(ErrorCode::format_error, "the checkpoint has no tensor '", name, "'");
    return t;
  };
  auto rows = [&](const std::string& name, int64_t begin, int64_t count) -> Status {
    RLX_ASSIGN_OR_RETURN(const Tensor* t, get(name));
    if (t->rank() == 1) {  // a bias
      RLX_ASSIGN_OR_RETURN(Tensor col, t->reshaped({t->numel(), 1}));
      RLX_ASSIGN_OR_RETURN(Tensor part, slice_rows(col, begin, count, name));
      RLX_ASSIGN_OR_RETURN(out[name], part.reshaped({count}));
      return Status::ok();
    }
    RLX_ASSIGN_OR_RETURN(out[name], slice_rows(*t, begin, count, name));
    return Status::ok();
  };
  auto cols = [&](const std::string& name, int64_t begin, int64_t count) -> Status {
    RLX_ASSIGN_OR_RETURN(const Tensor* t, get(name));
    RLX_ASSIGN_OR_RETURN(out[name], slice_cols(*t, begin, count, name));
    return Status::ok();
  };
  const int64_t ah = cfg.hidden / tp.size, f = c.intermediate;
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value"}) {
      RLX_TRY(rows(p + m + ".weight", ah * tp.rank, ah));
      RLX_TRY(rows(p + m + ".bias", ah * tp.rank, ah));
      if (find_bert_weight(weights, p + m + ".weight_scale")) RLX_TRY(rows(p + m + ".weight_scale", ah * tp.rank, ah));
    }
    RLX_TRY(cols(p + "attention.output.dense.weight", ah * tp.rank, ah));
    RLX_TRY(rows(p + "intermediate.dense.weight", f * tp.rank, f));
    RLX_TRY(rows(p + "intermediate.dense.bias", f * tp.rank, f));
    if (find_bert_weight(weights, p + "intermediate.dense.weight_scale"))
      RLX_TRY(rows(p + "intermediate.dense.weight_scale", f * tp.rank, f));
    RLX_TRY(cols(p + "output.dense.weight", f * tp.rank, f));
  }
  const int64_t vr = tp.vocab_rows(cfg.vocab_size);
  RLX_TRY(rows("embeddings.word_embeddings.weight", tp.vocab_begin(cfg.vocab_size), vr));
  return std::make_pair(c, std::move(out));
}

}  // namespace rlx::models

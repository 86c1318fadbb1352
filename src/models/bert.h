// BERT-family encoders (all-MiniLM-L6-v2 and the like) built as rlx graphs from a Hugging
// Face folder: config.json, model.safetensors (Hugging Face tensor names), vocab.txt or
// tokenizer.json. Sentence embeddings are mean-pooled over the attention mask and
// L2-normalized, as sentence-transformers does for these models.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "models/tensor_parallel.h"
#include "models/text/wordpiece.h"
#include "rlx/graph.h"

namespace rlx::models {

struct BertConfig {
  int64_t vocab_size = 30522, hidden = 384, layers = 6, heads = 12, intermediate = 1536;
  int64_t max_positions = 512, type_vocab = 2;
  double layer_norm_eps = 1e-12;
  std::string hidden_act = "gelu";
  // Attention scores from q and k quantized to int8 per row (attention's int8_scores). Not a
  // config.json field: load_bert_folder sets it from the safetensors metadata
  // kAttentionScoresKey = "int8" (written by `rlx quantize --scheme int8`).
  bool int8_attention_scores = false;
  // From a Hugging Face config.json; errors name the file and the field.
  static Expected<BertConfig> from_json_file(const std::string& path);
  // The same from the file's text; `name` labels errors.
  static Expected<BertConfig> from_json(std::string_view text, const std::string& name);
  std::string to_json() const;
};

enum class BertOutput : uint8_t {
  sentence_embedding,  // [batch, hidden]: mean pooled over the mask, L2 normalized
  last_hidden_state,   // [batch, seq, hidden]
};

// The encoder graph over inputs input_ids, attention_mask, token_type_ids (i64 [batch, seq],
// symbolic dims `batch` and `seq`). `weights` maps Hugging Face names (a "bert." or
// "0.auto_model." prefix is accepted) to tensors; every tensor is checked for shape.
// The tensor called `name` (a Hugging Face name) in `w`, also under the prefixes checkpoints
// use ("bert.", "0.auto_model.", "model."); null when absent.
const Tensor* find_bert_weight(const std::map<std::string, Tensor>& w, const std::string& name);

// With tp.size > 1, `cfg` and `weights` are rank tp.rank's shard (shard_bert) and the graph
// has the tensor-parallel collectives.
// `weight_format` non-empty (a qmatmul format, e.g. "q4_0"): Linear weights stored as U8 block
// rows [out, row_bytes(in)] in that format (`rlx quantize --scheme int4-*`, quant/ptq.h) run as
// qmatmul plus the bias; float Linear weights still run as before. Not with tensor parallelism.
Expected<Graph> build_bert(const BertConfig& cfg, const std::map<std::string, Tensor>& weights,
                           BertOutput output = BertOutput::sentence_embedding, const TensorParallel& tp = {},
                           const std::string& weight_format = {});

// The safetensors metadata key naming the block format of a BERT folder's U8 Linear weights
// (written by quant::quantize_bert_blocks_folder, read by load_bert_folder).
inline constexpr std::string_view kBlockWeightFormatKey = "rlx.weight_format";
// The safetensors metadata key whose value "int8" asks for int8 attention scores
// (BertConfig::int8_attention_scores); any other value is an error.
inline constexpr std::string_view kAttentionScoresKey = "rlx.attention_scores";

// Rank tp.rank's tensor-parallel shard (models/tensor_parallel.h) of a BERT checkpoint: the
// config counts this rank's heads and intermediate features; query/key/value and
// intermediate.dense are split by output features (weights and biases), attention.output.dense
// and output.dense by input features (bias replicated), word embeddings by vocabulary rows.
// Every other tensor is shared with `weights`. Errors say which size does not divide.
Expected<std::pair<BertConfig, std::map<std::string, Tensor>>> shard_bert(const BertConfig& cfg,
                                                                          const std::map<std::string, Tensor>& weights,
                                                                          const TensorParallel& tp);

struct BertModel {
  BertConfig config;
  Graph graph;
  text::WordPieceTokenizer tokenizer;
};

// Loads a Hugging Face folder (config.json, model.safetensors or its sharded index, and the
// tokenizer files unless `tokenizer` is false: for the verbs that never tokenize, which then
// work on a folder without vocab.txt).
// With tp.size > 1 the graph is rank tp.rank's tensor-parallel shard (config stays the full one).
Expected<BertModel> load_bert_folder(const std::string& dir, BertOutput output = BertOutput::sentence_embedding,
                                     const TensorParallel& tp = {}, bool tokenizer = true);

// Whether `dir` looks like a BERT-family Hugging Face folder (config.json with a BERT
// model_type or architecture).
bool is_bert_folder(const std::string& dir);

// Writes a deterministic random-weight model with config `cfg` (all-MiniLM-L6-v2's by
// default) to `dir`: config.json, model.safetensors, vocab.txt, tokenizer_config.json.
Status write_random_bert(const std::string& dir, const BertConfig& cfg, uint64_t seed);

}  // namespace rlx::models

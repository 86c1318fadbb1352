// Qwen3 decoder-only language models built as rlx graphs, from a Hugging Face folder
// (config.json, model.safetensors with names model.layers.N.self_attn.q_proj.weight, ...) or
// a GGUF file with llama.cpp's names (blk.N.attn_q.weight, blk.N.attn_q_norm.weight, ...).
//
// Architecture (as transformers' Qwen3ForCausalLM computes it): token embedding; per layer
// x += o_proj(attention(rope(q_norm(q)), rope(k_norm(k)), v)) on RMSNorm(x), grouped-query
// attention (num_attention_heads query heads share num_key_value_heads key/value heads), with
// per-head RMSNorm of queries and keys over head_dim and NeoX-style (half-split) rotary
// embeddings with rope_theta; x += down(silu(gate(h)) * up(h)) on RMSNorm(x); a final RMSNorm
// and the output projection (lm_head, or the embedding table when tie_word_embeddings).
//
// The KV cache: one key and one value tensor per layer, f32 [batch, kv_heads, context,
// head_dim], graph inputs donated to the matching outputs (CompileOptions::donate), updated in
// place by `scatter` at the slots the step writes. A step's graph inputs are:
//   input_ids  i64 [batch, seq]          tokens of this step (seq = 1 when decoding)
//   positions  i64 [batch, seq]          rotary positions of those tokens, per sequence
//   slots      i64 [seq]                 cache slots written by this step (shared by the batch)
//   mask       bool [batch, 1, seq, ctx] which cache slots each query attends to
//   k_cache.L, v_cache.L  f32 [batch, kv_heads, ctx, head_dim] for every layer L
// and its outputs: logits f32 [batch, seq | 1, vocab], then k_cache.L, v_cache.L. Batches of
// prompts with different lengths are left-padded: every sequence's prompt ends at the same
// slot, its pad slots are masked out of every query (a pad query attends only to itself, so
// nothing is NaN), and positions count real tokens only. Qwen3Session does this bookkeeping.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/tensor_parallel.h"
#include "passes/autocast.h"
#include "rlx/compile.h"
#include "rlx/graph.h"

namespace rlx::dist {
class PipelineRunner;
}

namespace rlx::models {

struct Qwen3Config {
  int64_t vocab_size = 32000, hidden = 512, layers = 8, heads = 8, kv_heads = 4, head_dim = 64;
  int64_t intermediate = 1408, max_positions = 4096;
  double rms_eps = 1e-6, rope_theta = 1000000.0;
  bool tie_embeddings = true;
  int64_t bos_token_id = -1, eos_token_id = -1;

  // From a Hugging Face config.json; errors name the file and the field.
  static Expected<Qwen3Config> from_json_file(const std::string& path);
  // The same from the file's text; `name` labels errors.
  static Expected<Qwen3Config> from_json(std::string_view text, const std::string& name);
  std::string to_json() const;
  // Checks sizes (positive, heads a multiple of kv_heads, even head_dim); `where` names the source.
  Status validate(const std::string& where) const;
};

// One weight: a dense float tensor (any float dtype; converted to f32 when built), or
// block-quantized u8 rows [N, row_bytes(K)] in `format` (a qmatmul format: "q8_0", "f16", ...).
struct Qwen3Weight {
  Tensor data;
  std::string format;  // empty: dense
};

// Weights under Hugging Face names (model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight,
// ..., model.norm.weight, lm_head.weight).
struct Qwen3Weights {
  Qwen3Config config;
  std::map<std::string, Qwen3Weight> tensors;
  std::string source;  // the file(s) they came from, for messages
  // This rank's shard (shard_qwen3): config then counts this rank's heads, kv_heads and
  // intermediate features; vocab_size stays the full vocabulary.
  TensorParallel tp;
};

// Loads a Hugging Face folder (config.json, model.safetensors or its sharded index).
Expected<Qwen3Weights> load_qwen3_folder(const std::string& dir);
// Loads a GGUF file (general.architecture "qwen3"): configuration from the qwen3.* keys,
// tensors renamed from llama.cpp's names; quantized and f16 matrices stay quantized (qmatmul),
// a quantized token embedding is decoded to f32 for the lookup.
Expected<Qwen3Weights> load_qwen3_gguf(const std::string& path);
// Rank tp.rank's tensor-parallel shard of full weights `w` (models/tensor_parallel.h): q/k/v,
// gate and up split by output features, o_proj and down by input features, the embedding and
// lm_head by vocabulary (padded to a multiple of tp.size), norms replicated. Dense, f16,
// int8 and block-quantized weights are sliced as they are (a quantized matrix split by input
// features needs whole blocks per rank). Errors say which size does not divide.
Expected<Qwen3Weights> shard_qwen3(const Qwen3Weights& w, const TensorParallel& tp);
// Either of the above, by path (a folder or a .gguf file).
Expected<Qwen3Weights> load_qwen3(const std::string& path);
// Whether `path` is a Qwen3 model (a folder whose config.json says qwen3, or a GGUF file).
bool is_qwen3_model(const std::string& path);

struct Qwen3GraphOptions {
  int64_t context = 256;     // cache slots
  bool all_logits = true;    // logits of every position, or only of the last one
  bool decode = false;       // seq fixed to 1 (the single-token decode graph); else symbolic `seq`
};

// The step graph described at the top of this file; `batch` is symbolic.
Expected<Graph> build_qwen3(const Qwen3Weights& w, const Qwen3GraphOptions& options);
// (output, input) pairs that donate every cache input to its updated output.
std::vector<std::pair<int, int>> qwen3_cache_donations(const Qwen3Config& c);

// Runs prompts through a compiled prefill graph and a decode graph sharing one KV cache.
// How a session spreads over ranks (docs/distributed.md). Sharded weights (w.tp.size > 1)
// need `comm`, the group of w.tp.size ranks whose collectives join the shards. With
// `pipeline`, rank k of `comm` runs the k-th range of layers (and holds only their KV cache
// updates), each step's batch flows through the stages in `micro_batches`, and every rank
// receives the logits. Every rank runs the same steps with the same tokens. Both at once
// (sharded weights and `pipeline`): `comm` is the pipeline (one rank per stage, all with the
// same shard index) and `stage_comm` the tensor-parallel group of this rank's stage.
struct Qwen3Parallel {
  std::shared_ptr<dist::Communicator> comm;
  bool pipeline = false;
  int micro_batches = 1;
  std::shared_ptr<dist::Communicator> stage_comm;
};

class Qwen3Session {
 public:
  // Compiles both graphs for `device`; the cache holds `context` slots for `batch` sequences.
  static Expected<std::unique_ptr<Qwen3Session>> create(const Qwen3Weights& w, int64_t batch, int64_t context,
                                                        const std::string& device = "cpu", bool all_logits = false,
                                                        Qwen3Parallel parallel = {},
                                                        passes::Precision precision = passes::Precision::f32);
  ~Qwen3Session();
  // Compiles the prefill variant for prompts of `prompt_len` slots and the decode variant
  // ahead of time (otherwise the first prefill / decode compiles them).
  Status prepare(int64_t prompt_len);
  // Bytes of weights one decode step reads (every matrix once; the embedding only as a head).
  int64_t weight_bytes_per_step() const { return weight_bytes_; }
  // Prefills the prompts (1..batch of them, different lengths allowed, left padded) into an
  // empty cache. Returns logits [batch, P or 1, vocab] (P = the longest prompt; all_logits).
  // The returned logits share a buffer that the next step of the same shape overwrites
  // (clone() to keep them).
  Expected<Tensor> prefill(const std::vector<std::vector<int64_t>>& prompts);
  // Appends one token per sequence; returns logits [batch, 1, vocab].
  Expected<Tensor> decode(const std::vector<int64_t>& tokens);
  int64_t batch() const { return batch_; }
  int64_t used_slots() const { return used_; }
  // Left padding of sequence b.
  int64_t pad(int64_t b) const { return pad_[b]; }
  const Qwen3Config& config() const { return config_; }

 private:
  Expected<Tensor> step(const std::vector<int64_t>& ids, int64_t seq, bool prefill);
  Qwen3Config config_;
  int64_t batch_ = 1, context_ = 0, used_ = 0, weight_bytes_ = 0;
  std::vector<int64_t> pad_, length_;  // per sequence: pad slots, tokens so far (real ones)
  std::unique_ptr<Model> prefill_, decode_;
  std::unique_ptr<dist::PipelineRunner> prefill_pp_, decode_pp_;  // pipeline parallelism
  bool all_logits_ = false;
  std::vector<Tensor> caches_;
  std::map<Sizes, Tensor> logits_;
};

// Writes a deterministic random-weight model to `dir`: config.json, model.safetensors
// (f32, every value exactly representable in f16 so an f16 GGUF holds the same numbers),
// tokenizer.json (a byte-level BPE over generated merges) and tokenizer_config.json. With
// `gguf_path` non-empty also a GGUF file with llama.cpp's names, tensors in `gguf_type`
// ("f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k"; norms stay f32; rows that k-quant blocks of
// 256 do not tile fall back to q8_0), and the tokenizer in tokenizer.ggml.* metadata.
Status write_random_qwen3(const std::string& dir, const Qwen3Config& cfg, uint64_t seed, const std::string& gguf_path = "",
                          const std::string& gguf_type = "f16");
// Writes the GGUF form of already loaded weights (all dense) with matrices in `gguf_type`
// (also rlx's "int4_g128" / "int4_g128_asym", which add the key "rlx.quantization"). Matrices
// whose rows the format's blocks do not tile fall back (k-quants to q8_0, int4_g128 to q4_0,
// int4_g128_asym to q4_1); their names go to *fallbacks when given.
Status write_qwen3_gguf(const std::string& path, const Qwen3Weights& w, const std::string& gguf_type,
                        const std::string& tokenizer_json_path, std::vector<std::string>* fallbacks = nullptr);

}  // namespace rlx::models

// Decoder-only language models (Llama 2 and 3, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3 text,
// Phi-3) built as rlx graphs by one builder, from a Hugging Face folder (config.json,
// model.safetensors or its sharded index, Hugging Face tensor names) or a GGUF file with
// llama.cpp's names (blk.N.attn_q.weight, ...). A family is a DecoderConfig: the switches below
// say what differs, set from the family's defaults and then from config.json or the GGUF keys
// (decoder_config.cpp holds the table). docs/generation.md describes each family.
//
// The computation (as transformers computes it): token embedding (times sqrt(hidden) for Gemma); per
// layer h = norm(x); q, k, v projections (with biases when attention_bias); per-head RMSNorm of
// q and k when qk_norm; rotary embeddings (half-split, or interleaved pairs for llama GGUF files,
// whose q/k rows llama.cpp permutes); grouped-query attention over the layer's window (every
// earlier token, or the last sliding_window ones on sliding layers), scores soft-capped when
// attn_softcap; x += o_proj (post-normed when post_norms); then the MLP act(gate(h)) * up(h)
// (SiLU or tanh-GELU) through down, post-normed likewise; a final norm, the output projection
// (lm_head or the tied embedding) and tanh soft-capping of the logits when final_softcap.
// RMSNorm scales by w, or by 1 + w for Gemma's Hugging Face checkpoints (its GGUF files store
// 1 + w).
//
// The KV cache is paged (as vLLM keeps it): per layer one key and one value pool of slots,
// f32 [kv_heads, blocks * block_size, head_dim], graph inputs donated to the matching outputs
// (CompileOptions::donate) and updated in place by `scatter` at the slots a step writes. A
// sequence owns whole blocks of block_size slots, listed in its row of the block table, so
// sequences of very different lengths share one pool and a short one holds few blocks; the
// paged_attention op reads each sequence's keys through its table. A step's graph inputs are:
//   input_ids   i64 [batch, seq]          tokens of this step (seq = 1 when decoding)
//   positions   i64 [batch, seq]          rotary positions of those tokens, per sequence
//   slots       i64 [batch, seq]          pool slots those tokens' keys and values go to
//   block_table i64 [batch, T]            each sequence's blocks (T = paged_table_blocks)
//   mask        bool [batch, 1, seq, T*block_size] which of its keys (positions) each query
//                                         attends to
//   mask_local  the same within the sliding window (only when the model has sliding layers)
//   k_cache.L, v_cache.L  f32 [kv_heads, blocks * block_size, head_dim] for every layer L
// and its outputs: logits f32 [batch, seq | 1, vocab], then k_cache.L, v_cache.L. Every
// sequence has its own blocks, so sequences of a batch may be at different lengths and may join
// or leave between steps (continuous batching). DecoderSession does the bookkeeping: sequence b's
// token at position p is in slot blocks_b[p / block_size] * block_size + p % block_size; in a
// step where sequences add different numbers of tokens, each one's tokens end at the step's
// last position and the positions before them are pads, which write slot 0 (block 0 is never
// given to a sequence: the scratch block) and attend only to it, through the table's last
// column, which always names block 0 (so nothing is NaN and no sequence's slot is touched).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/kv_blocks.h"
#include "models/tensor_parallel.h"
#include "passes/autocast.h"
#include "rlx/compile.h"
#include "rlx/gguf.h"
#include "rlx/graph.h"

namespace rlx::dist {
class PipelineRunner;
}

namespace rlx::models {

// The families rlx runs. Mistral's GGUF files say "llama" (llama.cpp converts it as Llama).
enum class DecoderFamily : uint8_t { llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3 };
// The family's Hugging Face model_type ("llama", ..., "gemma3_text" for gemma3).
std::string_view family_name(DecoderFamily f);
// The family of a model_type or GGUF general.architecture; nullopt for any other.
std::optional<DecoderFamily> family_from_name(std::string_view name);
// Every family's name, for messages ("llama, mistral, ...").
std::string family_names();

// How rotary frequencies are scaled (of the global layers; sliding layers never are).
struct RopeScaling {
  enum class Kind : uint8_t { none, linear, llama3, yarn, longrope } kind = Kind::none;
  double factor = 1.0;                                 // linear, llama3 and yarn; longrope: max / original positions
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_positions = 8192;               // llama3 and yarn
  // YaRN: frequencies ramp from extrapolated (beta_fast rotations over the original context)
  // to interpolated (beta_slow), and cos / sin are multiplied by attention_factor (0: derived,
  // 1 + 0.1 ln(factor), as Hugging Face and llama.cpp do).
  double beta_fast = 32.0, beta_slow = 1.0, attention_factor = 0.0;
  // LongRoPE (Phi-3 128k, Phi-3.5): pair i's frequency is divided by long_factor[i] when the
  // session's context exceeds original_max_positions, else by short_factor[i] (llama.cpp's
  // rule; Hugging Face switches per step on the sequence's length, which agrees while context
  // and sequences stay within the original window); cos and sin are multiplied by
  // attention_factor (0: derived, sqrt(1 + ln(factor) / ln(original)), as Hugging Face does).
  std::vector<double> long_factor, short_factor;
};

struct DecoderConfig {
  DecoderFamily family = DecoderFamily::qwen3;
  int64_t vocab_size = 32000, hidden = 512, layers = 8, heads = 8, kv_heads = 4, head_dim = 64;
  int64_t intermediate = 1408, max_positions = 4096;
  double rms_eps = 1e-6, rope_theta = 1000000.0;
  bool tie_embeddings = true;
  int64_t bos_token_id = -1, eos_token_id = -1;
  // Every id that ends generation: config.json's eos_token_id list (Llama 3.1 gives
  // <|end_of_text|>, <|eom_id|> and <|eot_id|>), or GGUF's eos and eot ids. eos_token_id is the first.
  std::vector<int64_t> eos_token_ids;

  // What differs between families. A default-constructed config is Qwen3's; for_family sets
  // another family's defaults.
  bool attention_bias = false;   // q, k and v projections have biases (qwen2)
  bool qk_norm = true;           // per-head RMSNorm of queries and keys (qwen3, gemma3)
  bool post_norms = false;       // the attention and MLP outputs are normed before the residual add (gemma)
  bool norm_plus_one = false;    // RMSNorm scales by 1 + w (Gemma's Hugging Face checkpoints)
  bool gelu_mlp = false;         // act(gate) is tanh-approximated GELU (gemma), else SiLU
  double attention_scale = 0.0;  // query scale; 0: 1/sqrt(head_dim)
  double attn_softcap = 0.0;     // scores become c * tanh(scores / c) (gemma2); 0: off
  double final_softcap = 0.0;    // the same for the logits
  int64_t sliding_window = 0;    // keys a sliding layer's query sees (itself included); 0: none
  int64_t sliding_pattern = 1;   // with a window: layer l is global iff pattern > 1 and (l + 1) % pattern == 0
  double rope_local_theta = 0.0; // rope theta of sliding layers (gemma3); 0: rope_theta
  RopeScaling rope_scaling;
  std::vector<double> rope_freq_factors;  // per frequency divisors (GGUF rope_freqs.weight; llama 3)
  bool rope_interleaved = false; // rotate pairs (2i, 2i+1): llama-family GGUF files, whose q/k rows are permuted

  // The defaults of `family` (sizes as above).
  static DecoderConfig for_family(DecoderFamily family);
  // From a Hugging Face config.json; errors name the file and the field (an unknown model_type
  // or an option rlx does not implement, such as rope_scaling longrope, is refused naming it).
  static Expected<DecoderConfig> from_json_file(const std::string& path);
  // The same from the file's text; `name` labels errors.
  static Expected<DecoderConfig> from_json(std::string_view text, const std::string& name);
  std::string to_json() const;
  // Checks sizes (positive, heads a multiple of kv_heads, even head_dim); `where` names the source.
  Status validate(const std::string& where) const;
  // Whether layer `l` attends within the sliding window.
  bool is_sliding(int64_t l) const {
    return sliding_window > 0 && (sliding_pattern <= 1 || (l + 1) % sliding_pattern != 0);
  }
  bool has_sliding_layers() const;
  // What token embeddings are multiplied by: sqrt(hidden) for Gemma, else 1.
  double embedding_multiplier() const;
  // The rotary inverse frequencies of layer `l` (head_dim / 2 of them), scaling applied, for a
  // session whose sequences may hold `context` tokens (LongRoPE picks its factors by it).
  std::vector<double> rope_inv_freq(int64_t l, int64_t context = 0) const;
  // Whether layer `l`'s rotary frequencies are scaled (some scaling is set and the layer is not
  // one of Gemma 3's local layers, which have their own theta and are never scaled).
  bool rope_scaled(int64_t l) const;
  // What YaRN multiplies layer `l`'s cos and sin by (1 elsewhere); the decoder applies its
  // square to the attention scores, which is the same thing for q . k.
  double rope_attention_factor(int64_t l) const;
};

// One weight: a dense float tensor (any float dtype; converted to f32 when built), or
// block-quantized u8 rows [N, row_bytes(K)] in `format` (a qmatmul format: "q8_0", "f16", ...).
struct DecoderWeight {
  Tensor data;
  std::string format;  // empty: dense
};

// Weights under Hugging Face names (model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight,
// ..., model.norm.weight, lm_head.weight).
struct DecoderWeights {
  DecoderConfig config;
  std::map<std::string, DecoderWeight> tensors;
  std::string source;  // the file(s) they came from, for messages
  // This rank's shard (shard_decoder): config then counts this rank's heads, kv_heads and
  // intermediate features; vocab_size stays the full vocabulary.
  TensorParallel tp;
};

// Loads a Hugging Face folder (config.json, model.safetensors or its sharded index).
Expected<DecoderWeights> load_decoder_folder(const std::string& dir);
// Loads a GGUF file (general.architecture one of the families, mistral's being "llama"):
// configuration from the ARCH.* keys, tensors renamed from llama.cpp's names (fused q/k/v and
// gate/up matrices, as Phi-3 files hold them, split by rows); quantized and f16 matrices stay
// quantized (qmatmul), a quantized token embedding is decoded to f32 for the lookup.
Expected<DecoderWeights> load_decoder_gguf(const std::string& path);
// Whether a parsed GGUF file's general.architecture is one of the families.
bool is_decoder_arch(const gguf::File& f);
// The same from a parsed file (`path` names it in errors; the weights view its storage).
Expected<DecoderWeights> decoder_from_gguf(const gguf::File& f, const std::string& path);
// Rank tp.rank's tensor-parallel shard of full weights `w` (models/tensor_parallel.h): q/k/v
// (and their biases), gate and up split by output features, o_proj and down by input features, the embedding and
// lm_head by vocabulary (padded to a multiple of tp.size), norms replicated. Dense, f16,
// int8 and block-quantized weights are sliced as they are (a quantized matrix split by input
// features needs whole blocks per rank). Errors say which size does not divide.
Expected<DecoderWeights> shard_decoder(const DecoderWeights& w, const TensorParallel& tp);
// Either of the above, by path (a folder or a .gguf file).
Expected<DecoderWeights> load_decoder(const std::string& path);
// Whether `path` looks like a decoder model: a folder whose config.json names one of the
// families (model_type or architectures), or a GGUF file whose general.architecture does.
bool is_decoder_model(const std::string& path);

struct DecoderGraphOptions {
  int64_t context = 256;     // tokens one sequence may hold
  bool all_logits = true;    // logits of every position, or only of the last one
  bool decode = false;       // seq fixed to 1 (the single-token decode graph); else symbolic `seq`
  int64_t block_size = 16;   // slots per KV-cache block
  int64_t pool_blocks = 0;   // blocks in each pool, the scratch block included; 0: one sequence's
                             // (paged_table_blocks(context, block_size))
  bool layer_outputs = false;  // also output the residual stream after each layer, `layer_out.L`
                               // [batch, seq, hidden], after the caches (decoder_layer_outputs)
  int64_t rope_context = 0;    // the context LongRoPE picks its factors by; 0: `context`
};

// The prefill step graph as a file is shown and run on its own (load_model of a decoder
// folder, `rlx run` and `rlx info` of a decoder GGUF): one sequence of 256 tokens in blocks of
// one slot, so that every slot and block id below 257 is valid (synthesized inputs are).
inline DecoderGraphOptions standalone_step_options() {
  return {.context = 256, .all_logits = false, .decode = false, .block_size = 1, .pool_blocks = 0};
}

// Columns of the block table: the blocks `context` tokens fill, plus the scratch block's.
inline int64_t paged_table_blocks(int64_t context, int64_t block_size) {
  return (context + block_size - 1) / block_size + 1;
}

// The step graph described at the top of this file; `batch` is symbolic.
Expected<Graph> build_decoder(const DecoderWeights& w, const DecoderGraphOptions& options);
// The residual stream after every layer (what llama.cpp names l_out-N) for one prompt prefilled
// from position 0 on `device`: f32 [layers, tokens, hidden]. For comparing rlx with another
// implementation layer by layer when their logits differ (`rlx generate --dump-layers`).
// `context` is the session's (0: the prompt's length); LongRoPE picks its factors by it.
Expected<Tensor> decoder_layer_outputs(const DecoderWeights& w, const std::vector<int64_t>& prompt,
                                       const std::string& device = "cpu", int64_t context = 0);
// (output, input) pairs that donate every cache input to its updated output.
std::vector<std::pair<int, int>> decoder_cache_donations(const DecoderConfig& c);

// Runs prompts through a compiled prefill graph and a decode graph sharing one KV cache.
// How a session spreads over ranks (docs/distributed.md). Sharded weights (w.tp.size > 1)
// need `comm`, the group of w.tp.size ranks whose collectives join the shards. With
// `pipeline`, rank k of `comm` runs the k-th range of layers (and holds only their KV cache
// updates), each step's batch flows through the stages in `micro_batches`, and every rank
// receives the logits. Every rank runs the same steps with the same tokens. Both at once
// (sharded weights and `pipeline`): `comm` is the pipeline (one rank per stage, all with the
// same shard index) and `stage_comm` the tensor-parallel group of this rank's stage.
struct DecoderParallel {
  std::shared_ptr<dist::Communicator> comm;
  bool pipeline = false;
  int micro_batches = 1;
  std::shared_ptr<dist::Communicator> stage_comm;
};

// The paged KV cache of a session.
struct KvCacheOptions {
  int64_t block_size = 16;
  // Blocks the sequences share (the scratch block not counted); 0: enough for every sequence
  // to hold `context` tokens at once. Fewer lets more sequences run when most are short: a
  // step that needs a block when none is free fails (free_blocks() says what is left).
  int64_t blocks = 0;
  // Full blocks stay findable by their tokens after their sequence ends, and adopt_prefix()
  // gives a new sequence the ones that hold its prompt's start (models/kv_blocks.h).
  bool prefix_caching = false;
};

class DecoderSession {
 public:
  // Compiles both graphs for `device`; each of `batch` sequences may hold `context` tokens.
  static Expected<std::unique_ptr<DecoderSession>> create(const DecoderWeights& w, int64_t batch, int64_t context,
                                                          const std::string& device = "cpu", bool all_logits = false,
                                                        DecoderParallel parallel = {},
                                                        passes::Precision precision = passes::Precision::f32,
                                                        KvCacheOptions kv = {});
  ~DecoderSession();
  // Compiles the prefill variant for prompts of `prompt_len` slots and the decode variant
  // ahead of time (otherwise the first prefill / decode compiles them).
  Status prepare(int64_t prompt_len);
  // Bytes of weights one decode step reads (every matrix once; the embedding only as a head).
  int64_t weight_bytes_per_step() const { return weight_bytes_; }
  // Prefills the prompts (1..batch of them, different lengths allowed) into an empty cache.
  // Returns logits [batch, P or 1, vocab] (P = the longest prompt; all_logits); prompt b's
  // token i is at position pad(b) + i. The returned logits share a buffer that the next step
  // of the same shape overwrites (clone() to keep them).
  Expected<Tensor> prefill(const std::vector<std::vector<int64_t>>& prompts);
  // Appends one token per sequence; returns logits [batch, 1, vocab].
  Expected<Tensor> decode(const std::vector<int64_t>& tokens);
  // Continuous batching: sequence first_row + r appends tokens[r] (none: the row idles through
  // the step) in one step over rows first_row .. first_row + tokens.size() - 1 only (a view of
  // those rows' caches, so the step costs what its rows cost). Returns logits [rows, 1 or S,
  // vocab]; the last position's row is each sequence's next-token logits. The step has
  // max(min_seq, longest tokens[r]) positions (padding a step to one of a few lengths keeps
  // the number of compiled variants small).
  Expected<Tensor> extend(int64_t first_row, const std::vector<std::vector<int64_t>>& tokens, int64_t min_seq = 1);
  // Compiles the variant a step over `rows` rows of `seq` positions runs (seq 1: decode).
  Status prepare_rows(int64_t rows, int64_t seq);
  // Empties sequence `row` (its next tokens start at position 0) and frees its blocks.
  void reset_row(int64_t row);
  // With prefix caching, empty sequence `row` takes the cached blocks that hold the start of
  // `tokens` (all but at least the last token); returns how many tokens it now holds, which
  // the caller then does not feed again. 0 without prefix caching.
  int64_t adopt_prefix(int64_t row, const std::vector<int64_t>& tokens);
  // Blocks a step can take (free, or cached and held by no sequence), of kv_blocks().
  int64_t free_blocks() const;
  int64_t kv_blocks() const { return pool_blocks_ - 1; }
  int64_t block_size() const { return block_size_; }
  // New blocks sequence `row` needs to take `tokens` more tokens.
  int64_t blocks_needed(int64_t row, int64_t tokens) const;
  int64_t batch() const { return batch_; }
  int64_t context() const { return context_; }
  // Tokens sequence b holds in the cache.
  int64_t length(int64_t b) const;
  // Pad positions before sequence b's tokens in its last step.
  int64_t pad(int64_t b) const { return pad_[b]; }
  const DecoderConfig& config() const { return config_; }

 private:
  DecoderConfig config_;
  int64_t batch_ = 1, context_ = 0, weight_bytes_ = 0;
  int64_t block_size_ = 16, pool_blocks_ = 0, table_cols_ = 0;
  std::vector<int64_t> pad_;  // per sequence: pads in its last step
  std::unique_ptr<KvBlocks> kv_;
  std::unique_ptr<Model> prefill_, decode_;
  std::unique_ptr<dist::PipelineRunner> prefill_pp_, decode_pp_;  // pipeline parallelism
  bool all_logits_ = false;
  std::vector<Tensor> caches_;
  std::map<Sizes, Tensor> logits_;
};

// Writes a deterministic random-weight model of cfg.family to `dir`: config.json, model.safetensors
// (f32, every value exactly representable in f16 so an f16 GGUF holds the same numbers),
// tokenizer.json (a byte-level BPE over generated merges) and tokenizer_config.json. With
// `gguf_path` non-empty also a GGUF file as llama.cpp's converter writes that family (its
// names and keys, llama's permuted q/k rows, Gemma's 1 + w norms, Phi-3's fused matrices,
// Llama 3's rope_freqs), tensors in `gguf_type`
// ("f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k"; norms stay f32; rows that k-quant blocks of
// 256 do not tile fall back to q8_0), and the tokenizer in tokenizer.ggml.* metadata.
Status write_random_decoder(const std::string& dir, const DecoderConfig& cfg, uint64_t seed, const std::string& gguf_path = "",
                          const std::string& gguf_type = "f16");
// Writes the GGUF form of already loaded weights (all dense) with matrices in `gguf_type`
// (also rlx's "int4_g128" / "int4_g128_asym", which add the key "rlx.quantization"). Matrices
// whose rows the format's blocks do not tile fall back (k-quants to q8_0, int4_g128 to q4_0,
// int4_g128_asym to q4_1); their names go to *fallbacks when given.
Status write_decoder_gguf(const std::string& path, const DecoderWeights& w, const std::string& gguf_type,
                        const std::string& tokenizer_json_path, std::vector<std::string>* fallbacks = nullptr);

}  // namespace rlx::models

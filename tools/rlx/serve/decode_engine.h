// The text-generation side of `rlx serve` (docs/serve.md): one decoder model, its
// DecoderSession of `slots` sequences over a paged KV cache, and one engine thread that runs
// continuous batching over it. Requests wait in a bounded queue; each gets a free sequence row
// when one opens and the cache has blocks for its prompt, its prompt is prefilled in chunks
// (one chunk per engine iteration, so that a long prompt does not stall the running streams by
// more than a chunk), and then it joins the batched decode step. Finished, cancelled or
// timed-out requests leave at the next step and free their row and blocks. When a step needs
// blocks that no longer exist, the sequence admitted last is preempted (as vLLM does): its
// blocks are freed, and it waits at the head of the queue to prefill its prompt and the tokens
// it already generated again, then goes on where it stopped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "entry.h"
#include "models/decoder.h"
#include "models/text/bpe.h"
#include "models/text/chat_template.h"
#include "rlx/comm.h"
#include "serve/metrics.h"

namespace rlx::serve {

// What a request asks of generation.
struct GenerationParams {
  cli::Sampling sampling;               // temperature 0: greedy
  uint64_t seed = 0;
  int64_t max_tokens = 0;          // > 0
  std::vector<std::string> stop;   // texts that end generation (not included in the output)
  bool ignore_eos = false;
  int64_t logprobs = -1;           // -1: none; else the chosen token's log-probability and this many alternatives
};

// One generated token as the client sees it.
struct TokenEvent {
  int64_t token = 0;
  std::string text;  // the UTF-8 text this token completes (may be empty: a partial character or held back for stop)
  std::string piece;  // the token's own bytes (with logprobs)
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;  // the most likely alternatives, with log-probabilities
};

// A request and its output channel. The HTTP handler creates it, the engine fills it; `next`
// blocks the handler until tokens or the end arrive.
class GenerationRequest {
 public:
  GenerationRequest(std::vector<int64_t> prompt, GenerationParams params)
      : prompt_(std::move(prompt)), params_(std::move(params)) {}
  const std::vector<int64_t>& prompt() const { return prompt_; }
  const GenerationParams& params() const { return params_; }
  // Takes the events that arrived (waits up to `wait_ms` for one); `done` is set once the
  // request finished and every event has been taken.
  std::vector<TokenEvent> next(int wait_ms, bool& done);
  // Asks the engine to stop this request at its next step (a disconnected client).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // Why it finished: "stop" (end of turn or a stop text), "length" (max_tokens or the context),
  // "cancelled", "timeout" or "error" (then error() says why). Valid once done.
  std::string finish_reason() const;
  std::string error() const;
  int64_t completion_tokens() const;
  // Prompt tokens whose KV-cache blocks were reused (prefix caching).
  int64_t cached_tokens() const { return cached_tokens_; }
  void set_cached_tokens(int64_t n) { cached_tokens_ = n; }

  // ---- the engine's side
  void push(TokenEvent e);
  void finish(std::string reason, std::string error = "");
  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();

 private:
  const std::vector<int64_t> prompt_;
  const GenerationParams params_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> cached_tokens_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  bool finished_ = false;
  std::string reason_, error_;
  int64_t completion_tokens_ = 0;
};

struct DecodeEngineOptions {
  std::string device = "cpu";
  std::string precision = "f32";
  int64_t slots = 4;           // sequences decoded together
  int64_t context = 2048;      // tokens per sequence (prompt and completion)
  int64_t kv_cache_tokens = 0; // tokens the paged KV cache holds in all; 0: slots x context
  int64_t kv_block_size = 16;  // tokens per block
  bool prefix_caching = true;  // a new sequence takes the cached blocks of its prompt's start
  int64_t max_queue = 64;      // requests waiting for a slot; more get 429
  int64_t prefill_chunk = 128; // prompt tokens prefilled per engine iteration
  double request_timeout_s = 600;
  // under mpirun -np tp * pp: rank 0 runs the engine and serves, the other ranks follow()
  int tp = 1, pp = 1, micro_batches = 1;
};

class DecodeEngine {
 public:
  // Loads the model (folder or GGUF) and its tokenizer, compiles every step variant the engine
  // runs (decode over 1, 2, 4 ... slots rows; prefill chunks of 2, 4 ... prefill_chunk), and
  // starts the engine thread.
  static Expected<std::unique_ptr<DecodeEngine>> create(const std::string& path, const DecodeEngineOptions& o,
                                                        std::shared_ptr<Metrics> metrics);
  ~DecodeEngine();
  // Queues a request (queued), or says why it was not (the queue is full: HTTP 429; shutting
  // down: 503); invalid_argument (naming the sizes) when the prompt plus max_tokens does not fit
  // the context.
  enum class Admission : uint8_t { queued, queue_full, shutting_down };
  Expected<Admission> submit(const std::shared_ptr<GenerationRequest>& r);
  // The prompt a chat makes (the model's template) and its tokens.
  Expected<std::vector<int64_t>> chat_tokens(const std::vector<text::ChatMessage>& messages) const;
  Expected<std::vector<int64_t>> text_tokens(const std::string& text) const;
  const text::BpeTokenizer& tokenizer() const { return *tokenizer_; }
  int64_t context() const { return options_.context; }
  // Requests waiting for a row, and rows in use.
  int64_t queued() const;
  int64_t active() const;
  // Fraction of the KV cache's blocks that sequences hold, and the blocks there are.
  double kv_cache_usage() const;
  int64_t kv_blocks() const { return kv_blocks_; }
  // Stops taking requests; waits until the running ones finish or `deadline_s` passes, then
  // cancels what is left and stops the thread (and, under mpirun, the followers).
  void shutdown(double deadline_s);
  // This process's rank in the job (0 without mpirun). Ranks other than 0 run no engine thread:
  // follow() replays rank 0's steps (every rank joins each step's collectives) until rank 0
  // shuts down.
  int rank() const { return world_->rank(); }
  Status follow();

 private:
  struct Row {
    std::shared_ptr<GenerationRequest> req;
    std::vector<int64_t> seq;              // the prompt, then every generated token fed back
    size_t prefilled = 0;                  // tokens of seq in the cache
    int64_t pending = -1;                  // sampled token not yet fed (decode state when >= 0)
    int64_t generated = 0;
    std::mt19937_64 rng;
    std::string bytes;                     // generated bytes not yet sent (partial UTF-8, possible stop prefix)
    std::chrono::steady_clock::time_point admitted;
    bool first = true;
  };
  DecodeEngine() = default;
  void loop();
  // Samples row r's next token from `logits` (vocab floats), sends it, and finishes the row
  // when it ends; returns whether the row goes on.
  bool emit(int64_t r, const float* logits);
  void release(int64_t r, const std::string& reason, const std::string& err = "");
  // Frees row r's blocks and puts it at the head of the queue to resume later.
  void preempt(int64_t r);
  // The busy row admitted last (-1: none).
  int64_t last_admitted() const;
  // Gives free rows to waiting requests (preempted ones first) while the cache has room.
  void admit();
  // The session's steps, sent to the followers first under mpirun.
  Expected<Tensor> step(int64_t first_row, const std::vector<std::vector<int64_t>>& tokens, int64_t min_seq);
  void reset(int64_t row);
  // session_->adopt_prefix, sent to the followers first under mpirun.
  int64_t adopt(int64_t row, const std::vector<int64_t>& tokens);
  // Rank 0 to the followers: {op, a, b, c} (then per-row counts and tokens for a step, the
  // tokens for an adopt).
  enum Op : int64_t { kNoop = 0, kStep = 1, kReset = 2, kStop = 3, kAdopt = 4 };
  Status send(Op op, int64_t a = 0, int64_t b = 0, int64_t c = 0);
  int64_t bucket_rows(int64_t rows) const;

  DecodeEngineOptions options_;
  std::string path_;
  std::unique_ptr<models::DecoderSession> session_;
  std::shared_ptr<dist::Communicator> world_;
  std::optional<text::BpeTokenizer> tokenizer_;
  std::vector<int64_t> stop_ids_;
  std::shared_ptr<Metrics> metrics_;
  std::vector<Row> rows_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationRequest>> queue_;
  std::deque<Row> preempted_;  // waiting to resume, before queue_
  std::atomic<int64_t> active_{0}, kv_used_{0};
  int64_t kv_blocks_ = 0;
  bool stopping_ = false, draining_ = false;
  std::thread thread_;
};

}  // namespace rlx::serve

// The embedding side of `rlx serve` (docs/serve.md): a BERT-family folder compiled once, and
// one thread that batches what the waiting requests ask for. Each run takes up to max_batch
// texts of the queued requests, sorted by length and cut into runs; each run is padded to a
// length bucket (16, 32, 64 ... tokens) and a power-of-two number of texts, so that the number
// of compiled variants stays small (each compiles when first needed).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "models/bert.h"
#include "rlx/compile.h"
#include "serve/metrics.h"

namespace rlx::serve {

struct EmbedRequest {
  std::vector<std::string> texts;
  // filled by the engine
  std::vector<std::vector<float>> embeddings;
  int64_t tokens = 0;
  Status status;
  // Waits until the engine has answered.
  void wait();
  void finish(Status s);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

struct EmbedEngineOptions {
  std::string device = "cpu";
  std::string precision = "f32";
  int64_t max_batch = 32;   // texts per run
  int64_t max_queue = 64;   // requests waiting; more get 429
};

class EmbedEngine {
 public:
  static Expected<std::unique_ptr<EmbedEngine>> create(const std::string& path, const EmbedEngineOptions& o,
                                                       std::shared_ptr<Metrics> metrics);
  ~EmbedEngine();
  // Queues a request: false when the queue is full or the engine stops. invalid_argument
  // (naming the input) when a text has more tokens than the model's positions.
  Expected<bool> submit(const std::shared_ptr<EmbedRequest>& r);
  int64_t dim() const { return model_.config.hidden; }
  int64_t queued() const;
  void shutdown();

 private:
  EmbedEngine() = default;
  void loop();
  Status run(const std::vector<std::pair<EmbedRequest*, size_t>>& texts);
  EmbedEngineOptions options_;
  models::BertModel model_;
  std::unique_ptr<Model> compiled_;
  std::shared_ptr<Metrics> metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<EmbedRequest>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rlx::serve

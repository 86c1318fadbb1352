// The counters and histograms `rlx serve` exposes at GET /metrics, in Prometheus' text format
// (version 0.0.4). Thread safe: HTTP handlers and the engines record into one Metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace rlx::serve {

class Metrics {
 public:
  // A finished HTTP request: its route ("/v1/chat/completions"), status code and latency.
  void request(const std::string& route, int status, double seconds);
  void prompt_tokens(int64_t n);
  // Prompt tokens whose KV-cache blocks an earlier request left (not computed again).
  void cached_prompt_tokens(int64_t n);
  void completion_tokens(int64_t n);
  void embeddings(int64_t n);
  // A sequence preempted: its KV-cache blocks went to others (it resumes later).
  void preemption();
  // Time from a generation request's arrival to its first token.
  void time_to_first_token(double seconds);
  // Sequences in one batched decode step, and texts in one embedding run.
  void decode_batch(int64_t rows);
  void embed_batch(int64_t texts);
  // Gauges read when /metrics is scraped (queue depth, sequences running, KV-cache use).
  // `labels` is Prometheus label text (model="qwen") or empty.
  void gauge(const std::string& name, const std::string& labels, const std::string& help, std::function<double()> read);
  std::string render() const;

 private:
  struct Histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
    void observe(double v);
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  uint64_t prompt_tokens_ = 0, cached_prompt_tokens_ = 0, completion_tokens_ = 0, embeddings_ = 0, preemptions_ = 0;
  Histogram ttft_{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}, {}, 0, 0};
  Histogram decode_batch_{{1, 2, 4, 8, 16, 32, 64}, {}, 0, 0};
  Histogram embed_batch_{{1, 2, 4, 8, 16, 32, 64, 128}, {}, 0, 0};
  struct Gauge {
    std::string name, labels, help;
    std::function<double()> read;
  };
  std::vector<Gauge> gauges_;
};

}  // namespace rlx::serve

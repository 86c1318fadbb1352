#include "serve/metrics.h"

#include <algorithm>
#include <sstream>

namespace rlx::serve {

namespace {
const std::vector<double> kLatencyBounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

void write_histogram(std::ostringstream& o, const std::string& name, const std::string& labels,
                     const std::vector<double>& bounds, const std::vector<uint64_t>& counts, double sum, uint64_t count) {
  uint64_t cum = 0;
  const std::string sep = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i < bounds.size(); ++i) {
    cum += i < counts.size() ? counts[i] : 0;
    o << name << "_bucket{" << sep << "le=\"" << bounds[i] << "\"} " << cum << "\n";
  }
  o << name << "_bucket{" << sep << "le=\"+Inf\"} " << count << "\n";
  o << name << "_sum" << (labels.empty() ? "" : "{" + labels + "}") << " " << sum << "\n";
  o << name << "_count" << (labels.empty() ? "" : "{" + labels + "}") << " " << count << "\n";
}
}  // namespace

void Metrics::Histogram::observe(double v) {
  if (counts.size() != bounds.size() + 1) counts.assign(bounds.size() + 1, 0);
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

void Metrics::request(const std::string& route, int status, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[{route, status}];
  auto it = latency_.find(route);
  if (it == latency_.end()) it = latency_.emplace(route, Histogram{kLatencyBounds, {}, 0, 0}).first;
  it->second.observe(seconds);
}
void Metrics::prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::cached_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  cached_prompt_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::preemption() {
  std::lock_guard<std::mutex> l(mu_);
  ++preemptions_;
}
void Metrics::completion_tokens(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  completion_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::embeddings(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  embeddings_ += static_cast<uint64_t>(n);
}
void Metrics::time_to_first_token(double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  ttft_.observe(seconds);
}
void Metrics::decode_batch(int64_t rows) {
  std::lock_guard<std::mutex> l(mu_);
  decode_batch_.observe(static_cast<double>(rows));
}
void Metrics::embed_batch(int64_t texts) {
  std::lock_guard<std::mutex> l(mu_);
  embed_batch_.observe(static_cast<double>(texts));
}
void Metrics::gauge(const std::string& name, const std::string& labels, const std::string& help,
                    std::function<double()> read) {
  std::lock_guard<std::mutex> l(mu_);
  gauges_.push_back({name, labels, help, std::move(read)});
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::ostringstream o;
  o << "# HELP rlx_requests_total HTTP requests by route and status code.\n# TYPE rlx_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    o << "rlx_requests_total{route=\"" << k.first << "\",code=\"" << k.second << "\"} " << n << "\n";
  o << "# HELP rlx_request_duration_seconds Time from a request's arrival to its last byte.\n"
       "# TYPE rlx_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_)
    write_histogram(o, "rlx_request_duration_seconds", "route=\"" + route + "\"", h.bounds, h.counts, h.sum, h.count);
  o << "# HELP rlx_prompt_tokens_total Prompt tokens prefilled.\n# TYPE rlx_prompt_tokens_total counter\n"
    << "rlx_prompt_tokens_total " << prompt_tokens_ << "\n";
  o << "# HELP rlx_generation_tokens_total Tokens generated.\n# TYPE rlx_generation_tokens_total counter\n"
    << "rlx_generation_tokens_total " << completion_tokens_ << "\n";
  o << "# HELP rlx_embeddings_total Texts embedded.\n# TYPE rlx_embeddings_total counter\n"
    << "rlx_embeddings_total " << embeddings_ << "\n";
  o << "# HELP rlx_prompt_cached_tokens_total Prompt tokens whose KV-cache blocks an earlier request left (prefix "
       "caching).\n# TYPE rlx_prompt_cached_tokens_total counter\n"
    << "rlx_prompt_cached_tokens_total " << cached_prompt_tokens_ << "\n";
  o << "# HELP rlx_preemptions_total Sequences whose KV-cache blocks were taken back for others (they resume by "
       "prefilling their tokens again).\n# TYPE rlx_preemptions_total counter\n"
    << "rlx_preemptions_total " << preemptions_ << "\n";
  o << "# HELP rlx_time_to_first_token_seconds From a generation request's arrival to its first token.\n"
       "# TYPE rlx_time_to_first_token_seconds histogram\n";
  write_histogram(o, "rlx_time_to_first_token_seconds", "", ttft_.bounds, ttft_.counts, ttft_.sum, ttft_.count);
  o << "# HELP rlx_decode_batch_size Sequences in each batched decode step.\n# TYPE rlx_decode_batch_size histogram\n";
  write_histogram(o, "rlx_decode_batch_size", "", decode_batch_.bounds, decode_batch_.counts, decode_batch_.sum,
                  decode_batch_.count);
  o << "# HELP rlx_embed_batch_size Texts in each embedding run.\n# TYPE rlx_embed_batch_size histogram\n";
  write_histogram(o, "rlx_embed_batch_size", "", embed_batch_.bounds, embed_batch_.counts, embed_batch_.sum,
                  embed_batch_.count);
  std::vector<Gauge> gauges = gauges_;  // one HELP / TYPE per name: its series together
  std::stable_sort(gauges.begin(), gauges.end(), [](const Gauge& a, const Gauge& b) { return a.name < b.name; });
  std::string last;
  for (const Gauge& g : gauges) {
    if (g.name != last) o << "# HELP " << g.name << " " << g.help << "\n# TYPE " << g.name << " gauge\n";
    last = g.name;
    o << g.name << (g.labels.empty() ? "" : "{" + g.labels + "}") << " " << g.read() << "\n";
  }
  return o.str();
}

}  // namespace rlx::serve

#include "serve/embed_engine.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "precision.h"

namespace rlx::serve {

void EmbedRequest::wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return done_; });
}
void EmbedRequest::finish(Status s) {
  {
    std::lock_guard<std::mutex> l(mu_);
    status = std::move(s);
    done_ = true;
  }
  cv_.notify_all();
}

Expected<std::unique_ptr<EmbedEngine>> EmbedEngine::create(const std::string& path, const EmbedEngineOptions& o,
                                                           std::shared_ptr<Metrics> metrics) {
  if (o.max_batch < 1) return error(ErrorCode::invalid_argument, "serve: --max-batch must be at least 1");
  std::unique_ptr<EmbedEngine> e(new EmbedEngine());
  e->options_ = o;
  e->metrics_ = std::move(metrics);
  RLX_ASSIGN_OR_RETURN(e->model_, models::load_bert_folder(path, models::BertOutput::sentence_embedding));
  RLX_TRY(cli::apply_precision(e->model_.graph, o.precision, o.device).status());
  RLX_ASSIGN_OR_RETURN(e->compiled_, Model::compile(e->model_.graph, {.device = o.device}));
  // the smallest run, so that /health is ready with something compiled (other sizes compile on first use)
  text::Encoding enc = e->model_.tokenizer.encode_batch({""}, e->model_.config.max_positions, 16);
  const std::vector<Tensor> in{enc.ids_tensor(), enc.mask_tensor(), enc.type_tensor()};
  RLX_TRY(e->compiled_->variant_for(in).status());
  e->thread_ = std::thread([p = e.get()] { p->loop(); });
  return e;
}

EmbedEngine::~EmbedEngine() { shutdown(); }

Expected<bool> EmbedEngine::submit(const std::shared_ptr<EmbedRequest>& r) {
  const int64_t limit = model_.config.max_positions;
  r->tokens = 0;
  for (size_t i = 0; i < r->texts.size(); ++i) {
    // counted untruncated: a text longer than the model reads is refused, not cut
    const int64_t n = model_.tokenizer.encode_batch({r->texts[i]}, std::numeric_limits<int32_t>::max()).lengths[0];
    if (n > limit)
      return error(ErrorCode::invalid_argument, "input[", i, "] has ", n, " tokens; this model reads at most ", limit);
    r->tokens += n;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ || static_cast<int64_t>(queue_.size()) >= options_.max_queue) return false;
    queue_.push_back(r);
  }
  cv_.notify_all();
  return true;
}

int64_t EmbedEngine::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int64_t>(queue_.size());
}

Status EmbedEngine::run(const std::vector<std::pair<EmbedRequest*, size_t>>& texts) {
  std::vector<std::string> batch;
  for (const auto& [r, i] : texts) batch.push_back(r->texts[i]);
  // padded with empty texts to a power of two (or max_batch): with the length buckets, at most
  // a few dozen shapes ever compile
  size_t rows = 1;
  while (rows < batch.size()) rows *= 2;
  batch.resize(std::min(rows, std::max(batch.size(), static_cast<size_t>(options_.max_batch))));
  text::Encoding probe = model_.tokenizer.encode_batch(batch, model_.config.max_positions);
  int64_t bucket = 16;
  while (bucket < probe.seq) bucket *= 2;
  bucket = std::min(bucket, model_.config.max_positions);
  text::Encoding e = model_.tokenizer.encode_batch(batch, model_.config.max_positions, bucket);
  std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
  RLX_ASSIGN_OR_RETURN(CompiledVariant * v, compiled_->variant_for(in));
  RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, v->executable->run(in));
  const int64_t d = dim();
  for (size_t k = 0; k < texts.size(); ++k) {
    const float* row = out[0].data<float>() + static_cast<int64_t>(k) * d;
    texts[k].first->embeddings[texts[k].second].assign(row, row + d);
  }
  metrics_->embed_batch(static_cast<int64_t>(texts.size()));
  metrics_->embeddings(static_cast<int64_t>(texts.size()));
  return Status::ok();
}

void EmbedEngine::loop() {
  for (;;) {
    std::vector<std::shared_ptr<EmbedRequest>> taken;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      // whole requests, up to max_batch texts (a larger request runs alone, in max_batch pieces)
      int64_t n = 0;
      while (!queue_.empty() &&
             (taken.empty() || n + static_cast<int64_t>(queue_.front()->texts.size()) <= options_.max_batch)) {
        n += static_cast<int64_t>(queue_.front()->texts.size());
        taken.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    // every text of the taken requests, shortest first, in runs of max_batch of one length bucket
    std::vector<std::pair<EmbedRequest*, size_t>> all;
    std::vector<int64_t> len;
    for (auto& r : taken) {
      r->embeddings.assign(r->texts.size(), {});
      for (size_t i = 0; i < r->texts.size(); ++i) all.emplace_back(r.get(), i);
    }
    for (const auto& [r, i] : all) len.push_back(static_cast<int64_t>(r->texts[i].size()));
    std::vector<size_t> order(all.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return len[a] < len[b]; });
    Status st;
    for (size_t s = 0; s < order.size() && st.is_ok(); s += static_cast<size_t>(options_.max_batch)) {
      std::vector<std::pair<EmbedRequest*, size_t>> part;
      for (size_t k = s; k < std::min(order.size(), s + static_cast<size_t>(options_.max_batch)); ++k)
        part.push_back(all[order[k]]);
      st = run(part);
    }
    for (auto& r : taken) r->finish(st);
  }
  std::lock_guard<std::mutex> l(mu_);
  for (auto& r : queue_) r->finish(error(ErrorCode::unavailable, "the server is shutting down"));
  queue_.clear();
}

void EmbedEngine::shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace rlx::serve

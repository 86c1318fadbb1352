#include "serve/decode_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "models/chat.h"
#include "passes/autocast.h"

namespace rlx::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Bytes at the end of `s` that begin a UTF-8 character the string does not finish.
size_t incomplete_utf8_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// The longest suffix of `s` that is a proper prefix of one of `stops` (it may become a stop).
size_t stop_prefix_tail(const std::string& s, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& stop : stops)
    for (size_t k = std::min(s.size(), stop.size() - 1); k > best; --k)
      if (s.compare(s.size() - k, k, stop, 0, k) == 0) {
        best = k;
        break;
      }
  return best;
}

}  // namespace

// ---- GenerationRequest

std::vector<TokenEvent> GenerationRequest::next(int wait_ms, bool& done) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, std::chrono::milliseconds(wait_ms), [&] { return !events_.empty() || finished_; });
  std::vector<TokenEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  done = finished_;
  return out;
}
std::string GenerationRequest::finish_reason() const {
  std::lock_guard<std::mutex> l(mu_);
  return reason_;
}
std::string GenerationRequest::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}
int64_t GenerationRequest::completion_tokens() const {
  std::lock_guard<std::mutex> l(mu_);
  return completion_tokens_;
}
void GenerationRequest::push(TokenEvent e) {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++completion_tokens_;
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}
void GenerationRequest::finish(std::string reason, std::string error) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (finished_) return;
    finished_ = true;
    reason_ = std::move(reason);
    error_ = std::move(error);
  }
  cv_.notify_all();
}

// ---- DecodeEngine

Expected<std::unique_ptr<DecodeEngine>> DecodeEngine::create(const std::string& path, const DecodeEngineOptions& o,
                                                             std::shared_ptr<Metrics> metrics) {
  if (o.slots < 1 || o.context < 2 || o.max_queue < 0 || o.prefill_chunk < 1)
    return error(ErrorCode::invalid_argument, "serve: need --parallel-slots >= 1, --max-context >= 2, --prefill-chunk >= 1");
  std::unique_ptr<DecodeEngine> e(new DecodeEngine());
  e->options_ = o;
  e->path_ = path;
  e->metrics_ = std::move(metrics);
  RLX_ASSIGN_OR_RETURN(cli::RankedDecoder ranked, cli::load_decoder_on_ranks(path, o.tp, o.pp, o.micro_batches));
  const models::DecoderWeights& w = ranked.weights;
  e->world_ = ranked.world;
  auto tok = text::BpeTokenizer::load(path);
  if (!tok) return std::move(tok).take_status().with_context(cat("serve: ", path, " needs its tokenizer"));
  e->tokenizer_ = std::move(*tok);
  e->stop_ids_ = models::end_of_generation_ids(path, w.config, &*e->tokenizer_);
  RLX_ASSIGN_OR_RETURN(passes::Precision prec, passes::parse_precision(o.precision));
  if (o.kv_block_size < 1 || o.kv_cache_tokens < 0)
    return error(ErrorCode::invalid_argument, "serve: need --kv-block-size >= 1 and --kv-cache-tokens >= 0");
  const models::KvCacheOptions kv{.block_size = o.kv_block_size,
                                  .blocks = (o.kv_cache_tokens + o.kv_block_size - 1) / o.kv_block_size,
                                  .prefix_caching = o.prefix_caching};
  RLX_ASSIGN_OR_RETURN(e->session_,
                       models::DecoderSession::create(w, o.slots, o.context, o.device, false, ranked.parallel, prec, kv));
  e->kv_blocks_ = e->session_->kv_blocks();
  // every variant the loop runs, compiled now: decode over each row bucket, prefill chunks of
  // each length bucket
  for (int64_t rows = 1;; rows = std::min(rows * 2, o.slots)) {
    RLX_TRY(e->session_->prepare_rows(rows, 1));
    if (rows == o.slots) break;
  }
  const int64_t chunk = std::min(o.prefill_chunk, o.context);
  for (int64_t seq = 2; seq <= chunk; seq = seq == chunk ? chunk + 1 : std::min(seq * 2, chunk))
    RLX_TRY(e->session_->prepare_rows(1, seq));
  e->rows_.resize(static_cast<size_t>(o.slots));
  if (e->world_->rank() == 0) e->thread_ = std::thread([p = e.get()] { p->loop(); });
  return e;
}

DecodeEngine::~DecodeEngine() { shutdown(0); }

Expected<std::vector<int64_t>> DecodeEngine::chat_tokens(const std::vector<text::ChatMessage>& messages) const {
  RLX_ASSIGN_OR_RETURN(std::string text, models::chat_prompt(path_, messages));
  return tokenizer_->encode(text, /*add_special_tokens=*/false);  // the template wrote them
}

Expected<std::vector<int64_t>> DecodeEngine::text_tokens(const std::string& text) const {
  return tokenizer_->encode(text, /*add_special_tokens=*/true);
}

Expected<DecodeEngine::Admission> DecodeEngine::submit(const std::shared_ptr<GenerationRequest>& r) {
  const int64_t n = static_cast<int64_t>(r->prompt().size());
  if (n == 0) return error(ErrorCode::invalid_argument, "the prompt has no tokens");
  if (r->params().max_tokens < 1) return error(ErrorCode::invalid_argument, "max_tokens must be at least 1");
  if (n + r->params().max_tokens > options_.context)
    return error(ErrorCode::invalid_argument, "This model's maximum context length is ", options_.context,
                 " tokens. However, you requested ", n + r->params().max_tokens, " tokens (", n, " in the prompt, ",
                 r->params().max_tokens, " for the completion).");
  const int64_t bs = options_.kv_block_size;
  if ((n + r->params().max_tokens + bs - 1) / bs > kv_blocks_)
    return error(ErrorCode::invalid_argument, "This model's maximum context length is ", kv_blocks_ * bs,
                 " tokens (the server's KV cache). However, you requested ", n + r->params().max_tokens, " tokens (", n,
                 " in the prompt, ", r->params().max_tokens, " for the completion).");
  {
    std::lock_guard<std::mutex> l(mu_);
    if (draining_ || stopping_) return Admission::shutting_down;
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue) return Admission::queue_full;
    queue_.push_back(r);
  }
  cv_.notify_all();
  return Admission::queued;
}

int64_t DecodeEngine::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int64_t>(queue_.size() + preempted_.size());
}
int64_t DecodeEngine::active() const { return active_.load(); }
double DecodeEngine::kv_cache_usage() const {
  return static_cast<double>(kv_used_.load()) / static_cast<double>(std::max<int64_t>(1, kv_blocks_));
}

int64_t DecodeEngine::bucket_rows(int64_t rows) const {
  int64_t b = 1;
  while (b < rows) b *= 2;
  return std::min(b, options_.slots);
}

void DecodeEngine::preempt(int64_t r) {
  Row keep = std::move(rows_[static_cast<size_t>(r)]);
  keep.prefilled = 0;
  reset(r);
  rows_[static_cast<size_t>(r)] = Row{};
  --active_;
  metrics_->preemption();
  std::lock_guard<std::mutex> l(mu_);
  preempted_.push_front(std::move(keep));
}

int64_t DecodeEngine::last_admitted() const {
  int64_t last = -1;
  for (size_t r = 0; r < rows_.size(); ++r)
    if (rows_[r].req && (last < 0 || rows_[r].admitted >= rows_[static_cast<size_t>(last)].admitted))
      last = static_cast<int64_t>(r);
  return last;
}

void DecodeEngine::admit() {
  // each running sequence may need a new block at its next token: kept free for them, so that a
  // sequence admitted now does not soon push out one that was running
  int64_t reserve = active_;
  for (size_t r = 0; r < rows_.size() && !(preempted_.empty() && queue_.empty()); ++r) {
    if (rows_[r].req) continue;
    const bool resume = !preempted_.empty();
    const size_t tokens = (resume ? preempted_.front().seq.size() : queue_.front()->prompt().size()) + 1;
    if (session_->blocks_needed(static_cast<int64_t>(r), static_cast<int64_t>(tokens)) + reserve > session_->free_blocks())
      break;  // first come, first served: later requests wait too
    if (resume) {
      rows_[r] = std::move(preempted_.front());
      preempted_.pop_front();
    } else {
      Row& w = rows_[r];
      w.req = queue_.front();
      queue_.pop_front();
      w.seq = w.req->prompt();
      w.rng.seed(w.req->params().seed);
      w.admitted = Clock::now();
    }
    // the blocks an earlier sequence left that hold this one's start (a preempted sequence's
    // own, when nothing took them since)
    Row& w = rows_[r];
    w.prefilled = static_cast<size_t>(adopt(static_cast<int64_t>(r), w.seq));
    if (!resume && w.prefilled > 0) {
      w.req->set_cached_tokens(static_cast<int64_t>(w.prefilled));
      metrics_->cached_prompt_tokens(static_cast<int64_t>(w.prefilled));
    }
    ++active_;
    ++reserve;
  }
}

void DecodeEngine::release(int64_t r, const std::string& reason, const std::string& err) {
  Row& w = rows_[static_cast<size_t>(r)];
  if (!w.req) return;
  metrics_->completion_tokens(w.generated);
  w.req->finish(reason, err);
  reset(r);
  w = Row{};
  --active_;
}

bool DecodeEngine::emit(int64_t r, const float* logits) {
  Row& w = rows_[static_cast<size_t>(r)];
  const GenerationParams& p = w.req->params();
  const int64_t V = session_->config().vocab_size;
  if (w.first) {
    metrics_->time_to_first_token(std::chrono::duration<double>(Clock::now() - w.req->created).count());
    w.first = false;
  }
  const int64_t tok = cli::sample_token(logits, V, p.sampling, w.rng);
  ++w.generated;
  TokenEvent e;
  e.token = tok;
  if (p.logprobs >= 0) {
    const float mx = *std::max_element(logits, logits + V);
    double sum = 0;
    for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    const double lse = mx + std::log(sum);
    e.logprob = logits[tok] - lse;
    e.piece = tokenizer_->token_bytes(tok);
    const int64_t k = std::min<int64_t>(p.logprobs, V);
    std::vector<int64_t> idx(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
    for (int64_t i = 0; i < k; ++i) e.top.emplace_back(tokenizer_->token_bytes(idx[i]), logits[idx[i]] - lse);
  }
  const bool eos = !p.ignore_eos && std::binary_search(stop_ids_.begin(), stop_ids_.end(), tok);
  if (eos) {  // the end-of-turn token is not text; what was held back is
    e.text = std::move(w.bytes);
    w.req->push(std::move(e));
    release(r, "stop");
    return false;
  }
  w.bytes += tokenizer_->token_bytes(tok);
  // a stop text ends the completion before it
  size_t cut = std::string::npos;
  for (const std::string& s : p.stop)
    if (!s.empty()) cut = std::min(cut, w.bytes.find(s));
  if (cut != std::string::npos) {
    e.text = w.bytes.substr(0, cut);
    w.req->push(std::move(e));
    release(r, "stop");
    return false;
  }
  const bool length = w.generated >= p.max_tokens || session_->length(r) + 1 > options_.context;
  if (length) {
    e.text = std::move(w.bytes);
    w.req->push(std::move(e));
    release(r, "length");
    return false;
  }
  // send what can no longer become a stop text or a longer character
  const size_t hold = std::max(stop_prefix_tail(w.bytes, p.stop), incomplete_utf8_tail(w.bytes));
  e.text = w.bytes.substr(0, w.bytes.size() - hold);
  w.bytes.erase(0, w.bytes.size() - hold);
  w.req->push(std::move(e));
  w.pending = tok;
  return true;
}

void DecodeEngine::loop() {
  const int64_t V = session_->config().vocab_size;
  const int64_t chunk = std::min(options_.prefill_chunk, options_.context);
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (stopping_) break;
      // requests that waited past the timeout (or whose client left) never get a row
      const auto now = Clock::now();
      auto expired = [&](const GenerationRequest& q) {
        return q.cancelled() || std::chrono::duration<double>(now - q.created).count() > options_.request_timeout_s;
      };
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (expired(**it)) {
          (*it)->finish((*it)->cancelled() ? "cancelled" : "timeout", "the request waited past the server's request timeout");
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      for (auto it = preempted_.begin(); it != preempted_.end();) {
        if (expired(*it->req)) {
          metrics_->completion_tokens(it->generated);
          it->req->finish(it->req->cancelled() ? "cancelled" : "timeout", "the request ran past the server's request timeout");
          it = preempted_.erase(it);
        } else {
          ++it;
        }
      }
      admit();
      if (active_ == 0) {
        // idle; under mpirun a heartbeat a second keeps the followers' collectives in time
        if (!cv_.wait_for(l, std::chrono::seconds(1), [&] { return stopping_ || !queue_.empty() || !preempted_.empty(); }) &&
            world_->size() > 1) {
          l.unlock();
          if (Status st = send(kNoop); !st.is_ok()) std::fprintf(stderr, "rlx serve: %s\n", st.message().c_str());
        }
        continue;
      }
    }
    // cancelled (a client that went away) and timed-out requests leave before the step
    const auto now = Clock::now();
    for (size_t r = 0; r < rows_.size(); ++r) {
      if (!rows_[r].req) continue;
      if (rows_[r].req->cancelled()) {
        release(static_cast<int64_t>(r), "cancelled");
      } else if (std::chrono::duration<double>(now - rows_[r].req->created).count() > options_.request_timeout_s) {
        release(static_cast<int64_t>(r), "timeout", "the request ran past the server's request timeout");
      }
    }
    // one prefill chunk, of the row that was admitted first among those still prefilling (a
    // preempted sequence prefills its generated tokens too, and then decodes on)
    int64_t pr = -1;
    for (size_t r = 0; r < rows_.size(); ++r) {
      const Row& w = rows_[r];
      if (w.req && w.prefilled < w.seq.size() && (pr < 0 || w.admitted < rows_[static_cast<size_t>(pr)].admitted))
        pr = static_cast<int64_t>(r);
    }
    int64_t n = 0;
    if (pr >= 0) {
      n = std::min<int64_t>(chunk, static_cast<int64_t>(rows_[static_cast<size_t>(pr)].seq.size() -
                                                        rows_[static_cast<size_t>(pr)].prefilled));
      // no blocks left: the sequence admitted last gives its blocks back (this one, if it is)
      while (pr >= 0 && session_->blocks_needed(pr, n) > session_->free_blocks()) {
        const int64_t victim = last_admitted();
        preempt(victim);
        if (victim == pr) pr = -1;
      }
    }
    if (pr >= 0) {
      Row& w = rows_[static_cast<size_t>(pr)];
      int64_t seq = 1;
      while (seq < n) seq *= 2;
      seq = std::min(seq, chunk);
      std::vector<int64_t> part(w.seq.begin() + static_cast<long>(w.prefilled), w.seq.begin() + static_cast<long>(w.prefilled) + n);
      auto logits = step(pr, {part}, seq);
      if (!logits) {
        release(pr, "error", logits.status().message());
      } else {
        w.prefilled += static_cast<size_t>(n);
        if (w.pending < 0) metrics_->prompt_tokens(n);  // (a resumed sequence's tokens were counted)
        if (w.prefilled == w.seq.size() && w.pending < 0) emit(pr, logits->data<float>());
      }
    }
    // one decode step over the rows that have a token to feed (rows between them idle), after
    // preempting the sequences admitted last while the step would need more blocks than are free
    auto decodes = [&](size_t r) { return rows_[r].req && rows_[r].pending >= 0 && rows_[r].prefilled == rows_[r].seq.size(); };
    for (;;) {
      int64_t need = 0;
      for (size_t r = 0; r < rows_.size(); ++r)
        if (decodes(r)) need += session_->blocks_needed(static_cast<int64_t>(r), 1);
      if (need <= session_->free_blocks()) break;
      preempt(last_admitted());
    }
    int64_t hi = 0, decoding = 0;
    for (size_t r = 0; r < rows_.size(); ++r)
      if (decodes(r)) {
        hi = static_cast<int64_t>(r) + 1;
        ++decoding;
      }
    kv_used_ = kv_blocks_ - session_->free_blocks();
    if (decoding == 0) continue;
    const int64_t rows = bucket_rows(hi);
    std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(rows));
    for (int64_t r = 0; r < hi; ++r)
      if (decodes(static_cast<size_t>(r))) tokens[r] = {rows_[r].pending};
    auto logits = step(0, tokens, 1);
    metrics_->decode_batch(decoding);
    for (int64_t r = 0; r < hi; ++r) {
      if (tokens[r].empty()) continue;
      if (!logits) {
        release(r, "error", logits.status().message());
        continue;
      }
      Row& w = rows_[r];
      w.seq.push_back(w.pending);
      ++w.prefilled;
      w.pending = -1;
      emit(r, logits->data<float>() + r * V);
    }
    kv_used_ = kv_blocks_ - session_->free_blocks();
  }
  for (size_t r = 0; r < rows_.size(); ++r) release(static_cast<int64_t>(r), "cancelled");
  if (world_->size() > 1) (void)send(kStop);
}

Status DecodeEngine::send(Op op, int64_t a, int64_t b, int64_t c) {
  int64_t head[4] = {op, a, b, c};
  return world_->broadcast(head, 4, DType::i64, 0);
}

Expected<Tensor> DecodeEngine::step(int64_t first_row, const std::vector<std::vector<int64_t>>& tokens, int64_t min_seq) {
  if (world_->size() > 1) {
    const int64_t rows = static_cast<int64_t>(tokens.size());
    RLX_TRY(send(kStep, first_row, rows, min_seq));
    std::vector<int64_t> counts, flat;
    for (const auto& t : tokens) {
      counts.push_back(static_cast<int64_t>(t.size()));
      flat.insert(flat.end(), t.begin(), t.end());
    }
    RLX_TRY(world_->broadcast(counts.data(), rows, DType::i64, 0));
    if (!flat.empty()) RLX_TRY(world_->broadcast(flat.data(), static_cast<int64_t>(flat.size()), DType::i64, 0));
  }
  return session_->extend(first_row, tokens, min_seq);
}

int64_t DecodeEngine::adopt(int64_t row, const std::vector<int64_t>& tokens) {
  if (world_->size() > 1) {
    std::vector<int64_t> sent = tokens;  // (the broadcast's buffer is writable on every rank)
    const int64_t n = static_cast<int64_t>(sent.size());
    if (!send(kAdopt, row, n).is_ok() || !world_->broadcast(sent.data(), n, DType::i64, 0).is_ok())
      return 0;  // (the followers then fail their next step, and so does this one)
  }
  return session_->adopt_prefix(row, tokens);
}

void DecodeEngine::reset(int64_t row) {
  if (world_->size() > 1) (void)send(kReset, row);
  session_->reset_row(row);
}

Status DecodeEngine::follow() {
  for (;;) {
    int64_t head[4] = {0, 0, 0, 0};
    // (rank 0 sends a heartbeat every second while idle, within the communicator's deadline)
    RLX_TRY(world_->broadcast(head, 4, DType::i64, 0));
    switch (head[0]) {
      case kNoop: break;
      case kReset: session_->reset_row(head[1]); break;
      case kAdopt: {
        if (head[2] < 1 || head[2] > options_.context)
          return error(ErrorCode::internal, "serve follower: an adopt of ", head[2], " tokens");
        std::vector<int64_t> tokens(static_cast<size_t>(head[2]));
        RLX_TRY(world_->broadcast(tokens.data(), head[2], DType::i64, 0));
        session_->adopt_prefix(head[1], tokens);
        break;
      }
      case kStop: return Status::ok();
      case kStep: {
        const int64_t rows = head[2];
        if (rows < 1 || rows > options_.slots) return error(ErrorCode::internal, "serve follower: a step of ", rows, " rows");
        std::vector<int64_t> counts(static_cast<size_t>(rows));
        RLX_TRY(world_->broadcast(counts.data(), rows, DType::i64, 0));
        int64_t total = 0;
        for (int64_t n : counts) total += n;
        std::vector<int64_t> flat(static_cast<size_t>(total));
        if (total > 0) RLX_TRY(world_->broadcast(flat.data(), total, DType::i64, 0));
        std::vector<std::vector<int64_t>> tokens;
        size_t at = 0;
        for (int64_t n : counts) {
          tokens.emplace_back(flat.begin() + static_cast<long>(at), flat.begin() + static_cast<long>(at + n));
          at += static_cast<size_t>(n);
        }
        // an error here is rank 0's too (the same step on the same data): it answers the client
        (void)session_->extend(head[1], tokens, head[3]);
        break;
      }
      default: return error(ErrorCode::internal, "serve follower: unknown op ", head[0]);
    }
  }
}

void DecodeEngine::shutdown(double deadline_s) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!thread_.joinable()) return;
    draining_ = true;
  }
  const auto end = Clock::now() + std::chrono::duration<double>(std::max(0.0, deadline_s));
  while (Clock::now() < end && queued() + active() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& q : queue_) q->finish("cancelled");
    queue_.clear();
    for (Row& w : preempted_) w.req->finish("cancelled");
    preempted_.clear();
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace rlx::serve

#include "serve/server.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include <sys/socket.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "models/bert.h"
#include "models/decoder.h"
#include "serve/decode_engine.h"
#include "serve/embed_engine.h"
#include "serve/openai_api.h"

namespace rlx::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal = sig; }

struct ServedModel {
  std::string id, path;
  std::unique_ptr<DecodeEngine> decoder;
  std::unique_ptr<EmbedEngine> embedder;
};

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 429) res.set_header("Retry-After", "1");
  res.set_content(dump(error_body(e)), "application/json");
}

class Server {
 public:
  explicit Server(ServeOptions o) : o_(std::move(o)), metrics_(std::make_shared<Metrics>()) {}
  Status run();

 private:
  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res);
  ServedModel* find(const std::string& id);
  // Parses the request's JSON body into `body` and returns the model it names, or sends the
  // error response (400 not a JSON object or the wrong kind, 404 unknown, 503 loading).
  ServedModel* model_for(const httplib::Request& req, json& body, bool decoder, httplib::Response& res);
  void completions(const httplib::Request& req, httplib::Response& res, bool chat);
  void embeddings(const httplib::Request& req, httplib::Response& res);
  void load_models();
  DecodeEngineOptions decode_options() const;
  void watch(ServedModel& m);  // its gauges

  ServeOptions o_;
  std::shared_ptr<Metrics> metrics_;
  httplib::Server http_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  std::atomic<bool> ready_{false}, draining_{false};
  std::string load_error_;
  std::mutex load_mu_;
  std::atomic<uint64_t> next_id_{1};
};

ServedModel* Server::find(const std::string& id) {
  for (auto& m : models_)
    if (m->id == id) return m.get();
  return nullptr;
}

bool Server::authorized(const httplib::Request& req, httplib::Response& res) {
  if (o_.api_key.empty()) return true;
  if (req.get_header_value("Authorization") == "Bearer " + o_.api_key) return true;
  send_error(res, {401, "authentication_error", "Incorrect API key provided.", "invalid_api_key"});
  return false;
}

ServedModel* Server::model_for(const httplib::Request& req, json& body, bool decoder, httplib::Response& res) {
  body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    send_error(res, {400, "invalid_request_error", "the request body is not a JSON object", "invalid_json"});
    return nullptr;
  }
  if (!ready_) {
    send_error(res, {503, "server_error", "the models are still loading", "model_loading"});
    return nullptr;
  }
  if (draining_) {
    send_error(res, {503, "server_error", "the server is shutting down", "shutting_down"});
    return nullptr;
  }
  if (!body.contains("model") || !body["model"].is_string()) {
    send_error(res, {400, "invalid_request_error", "'model' is required (a string)", "", "model"});
    return nullptr;
  }
  const std::string id = body["model"].get<std::string>();
  ServedModel* m = find(id);
  if (!m) {
    send_error(res, {404, "invalid_request_error", "The model '" + id + "' does not exist", "model_not_found", "model"});
    return nullptr;
  }
  if (decoder ? !m->decoder : !m->embedder) {
    send_error(res, {400, "invalid_request_error",
                     "The model '" + id + "' is " + (m->decoder ? "a text generation model" : "an embedding model"),
                     "wrong_model_kind", "model"});
    return nullptr;
  }
  return m;
}

void Server::completions(const httplib::Request& req, httplib::Response& res, bool chat) {
  json body;
  ServedModel* m = model_for(req, body, true, res);
  if (!m) return;
  DecodeEngine& engine = *m->decoder;
  auto parsed = parse_generation(body, chat, engine);
  if (!parsed) {
    send_error(res, parsed.error());
    return;
  }
  auto request = std::make_shared<GenerationRequest>(std::move(parsed->prompt), parsed->params);
  auto admitted = engine.submit(request);
  if (!admitted) {
    send_error(res, {400, "invalid_request_error", admitted.status().message(), "context_length_exceeded",
                     chat ? "messages" : "prompt"});
    return;
  }
  if (*admitted == DecodeEngine::Admission::queue_full) {
    send_error(res, {429, "rate_limit_error", "the server is busy: too many requests wait; retry later", "queue_full"});
    return;
  }
  if (*admitted == DecodeEngine::Admission::shutting_down) {
    send_error(res, {503, "server_error", "the server is shutting down", "shutting_down"});
    return;
  }
  ResponseWriter writer(chat, "cmpl-" + std::to_string(next_id_++), m->id, static_cast<int64_t>(std::time(nullptr)),
                        static_cast<int64_t>(request->prompt().size()), parsed->params.logprobs, parsed->include_usage);
  if (!parsed->stream) {
    bool done = false;
    std::vector<TokenEvent> all;
    while (!done) {
      auto ev = request->next(1000, done);
      all.insert(all.end(), std::make_move_iterator(ev.begin()), std::make_move_iterator(ev.end()));
    }
    const std::string reason = request->finish_reason();
    if (reason != "stop" && reason != "length") {
      send_error(res, reason == "timeout" ? ApiError{504, "server_error", request->error(), "timeout"}
                                          : ApiError{500, "server_error", "generation failed: " + request->error(), reason});
      return;
    }
    res.set_content(dump(writer.whole(all, reason, request->completion_tokens(), request->cached_tokens())), "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  auto first = std::make_shared<bool>(true);
  res.set_chunked_content_provider(
      "text/event-stream",
      [request, writer, first](size_t, httplib::DataSink& sink) mutable {
        auto send = [&](const json& j) {
          const std::string line = "data: " + dump(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (*first) {
          *first = false;
          if (!send(writer.opening())) return false;
        }
        bool done = false;
        auto events = request->next(100, done);
        for (const TokenEvent& e : events) {
          if (e.text.empty() && !writer.logprobs()) continue;
          if (!send(writer.chunk(e))) return false;  // the client went away: the releaser cancels
        }
        if (!sink.is_writable()) return false;
        if (!done) return true;
        const std::string reason = request->finish_reason();
        if (reason == "stop" || reason == "length") {
          if (!send(writer.closing(reason))) return false;
          if (writer.include_usage() && !send(writer.usage_chunk(request->completion_tokens(), request->cached_tokens()))) return false;
        } else {
          send(error_body({reason == "timeout" ? 504 : 500, "server_error", "generation " + reason + ": " + request->error(), reason}));
        }
        const std::string end = "data: [DONE]\n\n";
        sink.write(end.data(), end.size());
        sink.done();
        return true;
      },
      [request](bool success) {
        if (!success) request->cancel();  // frees its row at the engine's next step
      });
}

void Server::embeddings(const httplib::Request& req, httplib::Response& res) {
  json body;
  ServedModel* m = model_for(req, body, false, res);
  if (!m) return;
  auto parsed = parse_embedding(body, m->embedder->dim());
  if (!parsed) {
    send_error(res, parsed.error());
    return;
  }
  auto r = std::make_shared<EmbedRequest>();
  r->texts = parsed->texts;
  auto ok = m->embedder->submit(r);
  if (!ok) {
    send_error(res, {400, "invalid_request_error", ok.status().message(), "context_length_exceeded", "input"});
    return;
  }
  if (!*ok) {
    send_error(res, {429, "rate_limit_error", "the server is busy: too many requests wait; retry later", "queue_full"});
    return;
  }
  r->wait();
  if (!r->status.is_ok()) {
    send_error(res, {500, "server_error", r->status.message(), "embedding_failed"});
    return;
  }
  metrics_->prompt_tokens(r->tokens);
  res.set_content(dump(embedding_response(*r, m->id, parsed->base64)), "application/json");
}

void Server::routes() {
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Request-Start", std::to_string(std::chrono::duration<double>(Clock::now().time_since_epoch()).count()));
    if (req.path.rfind("/v1/", 0) == 0 && !authorized(req, res)) return httplib::Server::HandlerResponse::Handled;
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    double t0 = 0;
    if (res.has_header("X-Request-Start")) t0 = std::stod(res.get_header_value("X-Request-Start"));
    const double now = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    const bool known = req.path == "/health" || req.path == "/metrics" || req.path.rfind("/v1/", 0) == 0;
    metrics_->request(known ? (req.path.rfind("/v1/models/", 0) == 0 ? "/v1/models/{id}" : req.path) : "other", res.status,
                      t0 > 0 ? now - t0 : 0.0);
  });
  http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, {404, "invalid_request_error", "Unknown request URL: " + req.method + " " + req.path, "unknown_url"});
    } else if (res.status == 413) {
      send_error(res, {413, "invalid_request_error", "the request body is larger than the server accepts", "body_too_large"});
    } else {
      send_error(res, {res.status, "invalid_request_error", "the request could not be handled", ""});
    }
  });
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, {500, "server_error", "internal error: " + what, "internal_error"});
  });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> l(load_mu_);
    if (!load_error_.empty()) {
      res.status = 500;
      res.set_content(dump({{"status", "error"}, {"error", load_error_}}), "application/json");
    } else if (!ready_) {
      res.status = 503;
      res.set_content(R"({"status":"loading"})", "application/json");
    } else {
      res.set_content(draining_ ? R"({"status":"shutting down"})" : R"({"status":"ok"})", "application/json");
      if (draining_) res.status = 503;
    }
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_->render(), "text/plain; version=0.0.4");
  });
  auto model_json = [](const ServedModel& m) {
    return json{{"id", m.id}, {"object", "model"}, {"created", 0}, {"owned_by", "rlx"}};
  };
  http_.Get("/v1/models", [this, model_json](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    if (ready_)
      for (auto& m : models_) data.push_back(model_json(*m));
    res.set_content(dump({{"object", "list"}, {"data", data}}), "application/json");
  });
  http_.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    ServedModel* m = ready_ ? find(req.matches[1].str()) : nullptr;
    if (!m) {
      send_error(res, {404, "invalid_request_error", "The model '" + req.matches[1].str() + "' does not exist", "model_not_found", "model"});
      return;
    }
    res.set_content(dump(model_json(*m)), "application/json");
  });
  http_.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r, false); });
  http_.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r, true); });
  http_.Post("/v1/embeddings", [this](const httplib::Request& q, httplib::Response& r) { embeddings(q, r); });
}

DecodeEngineOptions Server::decode_options() const {
  return {o_.device, o_.precision, o_.parallel_slots, o_.max_context, o_.kv_cache_tokens, o_.kv_block_size, o_.prefix_caching,
          o_.max_queue, o_.prefill_chunk, o_.request_timeout_s, o_.tp, o_.pp, o_.micro_batches};
}

void Server::watch(ServedModel& m) {
  DecodeEngine* p = m.decoder.get();
  const std::string lab = "model=\"" + m.id + "\"";
  metrics_->gauge("rlx_queue_depth", lab, "Requests waiting for a sequence slot.", [p] { return static_cast<double>(p->queued()); });
  metrics_->gauge("rlx_active_sequences", lab, "Sequences being prefilled or decoded.", [p] { return static_cast<double>(p->active()); });
  metrics_->gauge("rlx_kv_cache_usage_ratio", lab, "Fraction of the paged KV cache's blocks that sequences hold.",
                  [p] { return p->kv_cache_usage(); });
  metrics_->gauge("rlx_kv_cache_blocks", lab, "Blocks in the paged KV cache.", [p] { return static_cast<double>(p->kv_blocks()); });
}

void Server::load_models() {
  for (auto& m : models_) {
    Status st;
    if (m->decoder) continue;  // (loaded before listening, under mpirun)
    if (models::is_decoder_model(m->path)) {
      auto e = DecodeEngine::create(m->path, decode_options(), metrics_);
      if (e) {
        m->decoder = std::move(*e);
        watch(*m);
      } else {
        st = e.status();
      }
    } else if (models::is_bert_folder(m->path)) {
      auto e = EmbedEngine::create(m->path, {o_.device, o_.precision, o_.max_batch, o_.max_queue}, metrics_);
      if (e) {
        m->embedder = std::move(*e);
        EmbedEngine* p = m->embedder.get();
        metrics_->gauge("rlx_queue_depth", "model=\"" + m->id + "\"", "Requests waiting for a sequence slot.",
                        [p] { return static_cast<double>(p->queued()); });
      } else {
        st = e.status();
      }
    } else {
      st = error(ErrorCode::invalid_argument, m->path, " is neither a decoder model (",
                 models::family_names(), ": a Hugging Face folder or GGUF file) nor a BERT-family folder");
    }
    if (!st.is_ok()) {
      std::lock_guard<std::mutex> l(load_mu_);
      load_error_ = cat("model '", m->id, "': ", st.message());
      std::fprintf(stderr, "rlx serve: %s\n", load_error_.c_str());
      g_signal = SIGTERM;  // a server without its models stops (exit status 1)
      return;
    }
    std::fprintf(stderr, "rlx serve: model '%s' ready (%s)\n", m->id.c_str(), m->decoder ? "text generation" : "embeddings");
  }
  ready_ = true;
}

Status Server::run() {
  for (const std::string& spec : o_.models) {
    auto m = std::make_unique<ServedModel>();
    const size_t eq = spec.find('=');
    m->path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    if (eq != std::string::npos) {
      m->id = spec.substr(0, eq);
    } else {
      std::string base = m->path;
      while (base.size() > 1 && base.back() == '/') base.pop_back();
      base = base.substr(base.find_last_of('/') == std::string::npos ? 0 : base.find_last_of('/') + 1);
      if (base.size() > 5 && base.compare(base.size() - 5, 5, ".gguf") == 0) base.resize(base.size() - 5);
      m->id = base;
    }
    if (m->id.empty() || m->path.empty()) return error(ErrorCode::invalid_argument, "serve: model '", spec, "' (PATH or NAME=PATH)");
    if (find(m->id)) return error(ErrorCode::invalid_argument, "serve: two models are named '", m->id, "' (name them with NAME=PATH)");
    models_.push_back(std::move(m));
  }
  if (models_.empty()) return error(ErrorCode::invalid_argument, "serve: give at least one model");
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (o_.tp * o_.pp > 1) {
    // under mpirun every rank loads its part of the one decoder; rank 0 serves, the others
    // replay its steps until it stops (mpirun's SIGTERM reaches them too: rank 0 decides)
    if (models_.size() != 1 || !models::is_decoder_model(models_[0]->path))
      return error(ErrorCode::invalid_argument, "serve: with --tp / --pp, give exactly one decoder model");
    RLX_ASSIGN_OR_RETURN(models_[0]->decoder, DecodeEngine::create(models_[0]->path, decode_options(), metrics_));
    if (models_[0]->decoder->rank() != 0) return models_[0]->decoder->follow();
    watch(*models_[0]);
  }
  routes();
  const int per_model = static_cast<int>(o_.parallel_slots + o_.max_queue + 8);
  const int threads = o_.threads > 0 ? o_.threads : std::min(1024, per_model * static_cast<int>(models_.size()));
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_.set_payload_max_length(static_cast<size_t>(o_.max_body_bytes));
  http_.set_keep_alive_timeout(static_cast<time_t>(o_.idle_timeout_s));
  http_.set_read_timeout(static_cast<time_t>(o_.idle_timeout_s));
  http_.set_write_timeout(static_cast<time_t>(o_.idle_timeout_s));
  // cpp-httplib listens with a backlog of 5: a burst of clients connecting at once (32 in the
  // load test and the benchmark, 60 in the full-queue test) overflowed it, and with SYN cookies
  // the kernel then reset some of the connections that the clients believed open. Debian's
  // cpp-httplib is a compiled library, so CPPHTTPLIB_LISTEN_BACKLOG cannot change it; the
  // listening socket is caught when it is created and listen() is called on it again after the
  // bind with a longer queue (Linux resizes the queue of a listening socket).
  constexpr int kListenBacklog = 1024;
  int listen_fd = -1;
  http_.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });
  int port = o_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(o_.host);
    if (port < 0) return error(ErrorCode::io_error, "serve: cannot listen on ", o_.host);
  } else if (!http_.bind_to_port(o_.host, port)) {
    return error(ErrorCode::io_error, "serve: cannot listen on ", o_.host, ":", port, " (in use, or not an address of this machine)");
  }
  if (listen_fd < 0 || ::listen(listen_fd, kListenBacklog) != 0)
    std::fprintf(stderr, "rlx serve: warning: could not lengthen the listen queue to %d; bursts of connections may "
                         "be reset\n", kListenBacklog);
  std::printf("rlx serve: listening on http://%s:%d (pid %d)\n", o_.host.c_str(), port, static_cast<int>(getpid()));
  std::fflush(stdout);
  std::thread loader([this] { load_models(); });
  // SIGTERM: stop accepting, let in-flight requests finish within the deadline, cancel the
  // rest (their handlers then answer and return, and listen returns once they all have)
  std::thread watcher([this, &loader] {
    while (g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    draining_ = true;
    std::fprintf(stderr, "rlx serve: signal %d: stopping (in-flight requests have %.0f s)\n", g_signal.load(),
                 o_.shutdown_timeout_s);
    http_.stop();
    loader.join();
    for (auto& m : models_) {
      if (m->decoder) m->decoder->shutdown(o_.shutdown_timeout_s);
      if (m->embedder) m->embedder->shutdown();
    }
  });
  const bool listened = http_.listen_after_bind();
  if (g_signal == 0) g_signal = SIGTERM;  // (the listener failed)
  watcher.join();
  std::lock_guard<std::mutex> l(load_mu_);
  if (!load_error_.empty()) return error(ErrorCode::invalid_argument, "serve: ", load_error_);
  if (!listened) return error(ErrorCode::io_error, "serve: the listener failed");
  return Status::ok();
}

}  // namespace

Status run_server(const ServeOptions& options) {
  Server s(options);
  return s.run();
}

}  // namespace rlx::serve

// `rlx serve`: an OpenAI-compatible HTTP server (docs/serve.md) over the decode and embedding
// engines, on cpp-httplib. Routes: GET /health, GET /metrics, GET /v1/models[/ID],
// POST /v1/completions, /v1/chat/completions (streaming as server-sent events), /v1/embeddings.
#pragma once

#include <string>
#include <vector>

#include "rlx/status.h"

namespace rlx::serve {

struct ServeOptions {
  std::vector<std::string> models;  // PATH or NAME=PATH: decoder models (folder or GGUF) and BERT folders
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;              // empty: no key needed
  std::string device = "cpu";
  std::string precision = "f32";
  int64_t max_batch = 32;           // texts per embedding run
  int64_t max_context = 2048;       // tokens per sequence
  int64_t parallel_slots = 4;       // sequences decoded together
  int64_t kv_cache_tokens = 0;      // tokens the paged KV cache holds for all sequences; 0: slots x context
  int64_t kv_block_size = 16;       // tokens per KV-cache block
  bool prefix_caching = true;       // reuse the blocks of earlier prompts' starts
  int64_t max_queue = 64;           // requests waiting per model; more get 429
  int64_t prefill_chunk = 128;      // prompt tokens per engine iteration
  double request_timeout_s = 600;   // a generation running longer is stopped
  double idle_timeout_s = 30;       // a keep-alive connection idle this long is closed
  double shutdown_timeout_s = 10;   // after SIGTERM: how long in-flight requests may finish
  int64_t max_body_bytes = 16 << 20;
  int threads = 0;                  // HTTP threads; 0: slots + queue + 8 per model
  // under mpirun -np tp * pp (one decoder model): rank 0 serves, the other ranks follow its steps
  int tp = 1, pp = 1, micro_batches = 1;
};

// Listens, loads and compiles the models in the background (GET /health says 503 until they
// are ready), serves until SIGTERM or SIGINT, then stops accepting, lets in-flight requests
// finish for shutdown_timeout_s, cancels the rest and returns. An error when the address
// cannot be bound or a model fails to load.
Status run_server(const ServeOptions& options);

}  // namespace rlx::serve

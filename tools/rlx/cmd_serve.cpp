// rlx serve: the OpenAI-compatible server (tools/rlx/serve/, docs/serve.md).
#include "cli.h"
#include "serve/server.h"

namespace rlx::cli {

int cmd_serve(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {"no-prefix-cache"},
                         {"host", "port", "api-key", "device", "precision", "max-batch", "max-context", "parallel-slots",
                          "kv-cache-tokens", "kv-block-size",
                          "max-queue", "prefill-chunk", "request-timeout", "idle-timeout", "shutdown-timeout", "max-body",
                          "threads", "tp", "pp", "micro-batches"});
  if (!args) return report_error(args.status());
  serve::ServeOptions o;
  o.models = args->positional;
  if (o.models.empty())
    return report_error(error(ErrorCode::invalid_argument,
                              "usage: rlx serve MODEL... (PATH or NAME=PATH) [--host 127.0.0.1] [--port 8080] [--device D] "
                              "[--precision P] [--max-batch N] [--max-context T] [--parallel-slots S] [--api-key KEY] ..."));
  auto flags = [&]() -> Status {
    o.host = args->get("host").value_or(o.host);
    RLX_ASSIGN_OR_RETURN(int64_t port, args->integer("port", o.port, 0, 65535));
    o.port = static_cast<int>(port);
    o.api_key = args->get("api-key").value_or("");
    if (args->has("api-key") && o.api_key.empty()) return error(ErrorCode::invalid_argument, "--api-key needs a key");
    o.device = args->get("device").value_or(o.device);
    o.precision = args->get("precision").value_or(o.precision);
    RLX_ASSIGN_OR_RETURN(o.max_batch, args->integer("max-batch", o.max_batch, 1, 4096));
    RLX_ASSIGN_OR_RETURN(o.max_context, args->integer("max-context", o.max_context, 2, int64_t{1} << 20));
    RLX_ASSIGN_OR_RETURN(o.parallel_slots, args->integer("parallel-slots", o.parallel_slots, 1, 1024));
    RLX_ASSIGN_OR_RETURN(o.kv_cache_tokens, args->integer("kv-cache-tokens", o.kv_cache_tokens, 0, int64_t{1} << 30));
    RLX_ASSIGN_OR_RETURN(o.kv_block_size, args->integer("kv-block-size", o.kv_block_size, 1, 4096));
    o.prefix_caching = !args->has("no-prefix-cache");
    RLX_ASSIGN_OR_RETURN(o.max_queue, args->integer("max-queue", o.max_queue, 0, 100000));
    RLX_ASSIGN_OR_RETURN(o.prefill_chunk, args->integer("prefill-chunk", o.prefill_chunk, 1, int64_t{1} << 20));
    RLX_ASSIGN_OR_RETURN(o.request_timeout_s, args->number("request-timeout", o.request_timeout_s, 0.001, 1e7));
    RLX_ASSIGN_OR_RETURN(o.idle_timeout_s, args->number("idle-timeout", o.idle_timeout_s, 1, 1e7));
    RLX_ASSIGN_OR_RETURN(o.shutdown_timeout_s, args->number("shutdown-timeout", o.shutdown_timeout_s, 0, 1e7));
    RLX_ASSIGN_OR_RETURN(o.max_body_bytes, args->integer("max-body", o.max_body_bytes, 1024, int64_t{1} << 32));
    RLX_ASSIGN_OR_RETURN(int64_t threads, args->integer("threads", 0, 0, 4096));
    o.threads = static_cast<int>(threads);
    RLX_ASSIGN_OR_RETURN(int64_t tp, args->integer("tp", 1, 1, 4096));
    RLX_ASSIGN_OR_RETURN(int64_t pp, args->integer("pp", 1, 1, 4096));
    RLX_ASSIGN_OR_RETURN(int64_t mb, args->integer("micro-batches", 1, 1, 4096));
    o.tp = static_cast<int>(tp);
    o.pp = static_cast<int>(pp);
    o.micro_batches = static_cast<int>(mb);
    return Status::ok();
  };
  if (Status s = flags(); !s) return report_error(s);
  if (Status s = serve::run_server(o); !s) return report_error(s);
  return kOk;
}

}  // namespace rlx::cli

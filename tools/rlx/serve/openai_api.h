// The OpenAI API's JSON for `rlx serve`: requests checked field by field (every error names
// the field, as OpenAI's do), and the responses and stream chunks of /v1/completions,
// /v1/chat/completions and /v1/embeddings in the schema the official clients read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/decode_engine.h"
#include "serve/embed_engine.h"

namespace rlx::serve {

// An HTTP error with OpenAI's body: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string type, message, code, param;
};
nlohmann::json error_body(const ApiError& e);

// A value or the error response to send instead.
template <class T>
class ApiResult {
 public:
  ApiResult(T v) : value_(std::move(v)) {}  // NOLINT: implicit, as Expected
  ApiResult(ApiError e) : error_(std::move(e)) {}  // NOLINT
  explicit operator bool() const { return value_.has_value(); }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }
  const ApiError& error() const { return error_; }

 private:
  std::optional<T> value_;
  ApiError error_;
};

struct GenerationCall {
  std::vector<int64_t> prompt;
  GenerationParams params;
  bool stream = false, include_usage = false;
};
// A /v1/completions (chat false) or /v1/chat/completions body: the prompt (text, or token ids;
// chat messages through the model's template) and the sampling fields (temperature 1, top_p 1
// and a random seed unless given, as OpenAI; max_tokens: 16 for completions, the rest of the
// context for chat).
ApiResult<GenerationCall> parse_generation(const nlohmann::json& body, bool chat, const DecodeEngine& engine);

struct EmbeddingCall {
  std::vector<std::string> texts;
  bool base64 = false;
};
ApiResult<EmbeddingCall> parse_embedding(const nlohmann::json& body, int64_t dim);
nlohmann::json embedding_response(const EmbedRequest& r, const std::string& model, bool base64);

// Builds one completion's JSON: whole (non-streaming) or as stream chunks.
class ResponseWriter {
 public:
  ResponseWriter(bool chat, std::string id, std::string model, int64_t created, int64_t prompt_tokens, int64_t logprobs,
                 bool include_usage)
      : chat_(chat), id_(std::move(id)), model_(std::move(model)), created_(created), prompt_tokens_(prompt_tokens),
        logprobs_(logprobs), include_usage_(include_usage) {}
  // (cached_tokens: prompt tokens whose KV-cache blocks were reused: usage.prompt_tokens_details)
  nlohmann::json whole(const std::vector<TokenEvent>& events, const std::string& finish_reason, int64_t completion_tokens,
                       int64_t cached_tokens = 0) const;
  nlohmann::json opening() const;  // chat: the delta with the role; completions: an empty text
  nlohmann::json chunk(const TokenEvent& e) const;
  nlohmann::json closing(const std::string& finish_reason) const;
  nlohmann::json usage_chunk(int64_t completion_tokens, int64_t cached_tokens = 0) const;
  bool logprobs() const { return logprobs_ >= 0; }
  bool include_usage() const { return include_usage_; }

 private:
  nlohmann::json base(const char* object) const;
  nlohmann::json usage(int64_t completion_tokens, int64_t cached_tokens = 0) const;
  nlohmann::json logprobs_json(const std::vector<TokenEvent>& events) const;
  bool chat_;
  std::string id_, model_;
  int64_t created_, prompt_tokens_, logprobs_;
  bool include_usage_;
};

}  // namespace rlx::serve

#include "serve/openai_api.h"

#include <cmath>
#include <cstring>
#include <random>

namespace rlx::serve {

using json = nlohmann::json;

namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return {400, "invalid_request_error", message, "invalid_value", param};
}

// Optional fields of a type; null counts as absent (the clients send null for unset fields).
std::optional<ApiError> number(const json& b, const char* key, double lo, double hi, double& out) {
  if (!b.contains(key) || b[key].is_null()) return std::nullopt;
  if (!b[key].is_number()) return bad(key, cat("'", key, "' must be a number"));
  const double v = b[key].get<double>();
  if (!(v >= lo && v <= hi)) return bad(key, cat("'", key, "' must be in [", lo, ", ", hi, "], got ", v));
  out = v;
  return std::nullopt;
}
std::optional<ApiError> integer(const json& b, const char* key, int64_t lo, int64_t hi, int64_t& out) {
  if (!b.contains(key) || b[key].is_null()) return std::nullopt;
  if (!b[key].is_number_integer()) return bad(key, cat("'", key, "' must be an integer"));
  if (b[key].is_number_unsigned() && b[key].get<uint64_t>() > static_cast<uint64_t>(hi))
    return bad(key, cat("'", key, "' must be in [", lo, ", ", hi, "]"));
  const int64_t v = b[key].get<int64_t>();
  if (v < lo || v > hi) return bad(key, cat("'", key, "' must be in [", lo, ", ", hi, "], got ", v));
  out = v;
  return std::nullopt;
}
std::optional<ApiError> boolean(const json& b, const char* key, bool& out) {
  if (!b.contains(key) || b[key].is_null()) return std::nullopt;
  if (!b[key].is_boolean()) return bad(key, cat("'", key, "' must be a boolean"));
  out = b[key].get<bool>();
  return std::nullopt;
}

// A message's content: a string, or an array of parts of which only text parts are accepted.
std::optional<ApiError> content_text(const json& c, size_t i, std::string& out) {
  const std::string param = cat("messages[", i, "].content");
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (c.is_null()) {
    out.clear();
    return std::nullopt;
  }
  if (!c.is_array()) return bad(param, cat("'", param, "' must be a string or an array of text parts"));
  out.clear();
  for (const json& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return bad(param, cat("'", param, "': only {\"type\": \"text\", \"text\": ...} parts are supported (the model reads text)"));
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::vector<int> byte_values(const std::string& s) {
  std::vector<int> v;
  for (unsigned char c : s) v.push_back(c);
  return v;
}

std::string base64(const void* data, size_t n) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += t[(v >> 18) & 63];
    out += t[(v >> 12) & 63];
    out += i + 1 < n ? t[(v >> 6) & 63] : '=';
    out += i + 2 < n ? t[v & 63] : '=';
  }
  return out;
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ApiResult<GenerationCall> parse_generation(const json& b, bool chat, const DecodeEngine& engine) {
  GenerationCall c;
  GenerationParams& p = c.params;
  p.sampling.temp = 1.0;
  int64_t n = 1;
  if (auto e = integer(b, "n", 1, 1, n)) return ApiError{400, "invalid_request_error", "only n = 1 is supported", "invalid_value", "n"};
  // what rlx does not implement is refused unless it asks for nothing (silently ignoring a
  // penalty or a tool would answer something else than was asked)
  auto neutral = [&](const char* key, const json& none) {
    return !b.contains(key) || b[key].is_null() || b[key] == none ||
           (none.is_number() && b[key].is_number() && b[key].get<double>() == none.get<double>());
  };
  const std::pair<const char*, json> unsupported[] = {
      {"presence_penalty", 0}, {"frequency_penalty", 0}, {"logit_bias", json::object()}, {"best_of", 1},
      {"echo", false},         {"suffix", ""},           {"tools", json::array()},       {"functions", json::array()},
      {"response_format", json{{"type", "text"}}}};
  for (const auto& [key, none] : unsupported)
    if (!neutral(key, none))
      return ApiError{400, "invalid_request_error", cat("'", key, "' is not supported by rlx serve (docs/serve.md)"),
                      "unsupported_parameter", key};
  if (auto e = number(b, "temperature", 0, 2, p.sampling.temp)) return *e;
  if (auto e = number(b, "top_p", 0, 1, p.sampling.top_p)) return *e;
  if (b.contains("top_p") && b["top_p"].is_number() && p.sampling.top_p <= 0) return bad("top_p", "'top_p' must be above 0");
  if (auto e = integer(b, "top_k", 0, int64_t{1} << 31, p.sampling.top_k)) return *e;
  int64_t seed = -1;
  if (auto e = integer(b, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), seed)) return *e;
  p.seed = b.contains("seed") && !b["seed"].is_null() ? static_cast<uint64_t>(seed) : std::random_device{}();
  if (auto e = boolean(b, "stream", c.stream)) return *e;
  if (b.contains("stream_options") && b["stream_options"].is_object())
    if (auto e = boolean(b["stream_options"], "include_usage", c.include_usage)) return *e;
  int64_t max_tokens = 0;
  const char* max_key = b.contains("max_completion_tokens") && !b["max_completion_tokens"].is_null() ? "max_completion_tokens" : "max_tokens";
  if (auto e = integer(b, max_key, 1, engine.context(), max_tokens)) return *e;
  // stop: a string or up to 4 of them
  if (b.contains("stop") && !b["stop"].is_null()) {
    const json& s = b["stop"];
    if (s.is_string()) {
      p.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 4) {
      for (const json& x : s) {
        if (!x.is_string()) return bad("stop", "'stop' must be a string or an array of up to 4 strings");
        p.stop.push_back(x.get<std::string>());
      }
    } else {
      return bad("stop", "'stop' must be a string or an array of up to 4 strings");
    }
  }
  // logprobs: completions take a count (0-5); chat takes a boolean and top_logprobs (0-20)
  if (chat) {
    bool lp = false;
    if (auto e = boolean(b, "logprobs", lp)) return *e;
    int64_t top = 0;
    if (auto e = integer(b, "top_logprobs", 0, 20, top)) return *e;
    if (b.contains("top_logprobs") && !b["top_logprobs"].is_null() && !lp)
      return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    p.logprobs = lp ? top : -1;
  } else {
    if (auto e = integer(b, "logprobs", 0, 5, p.logprobs)) return *e;
    if (!b.contains("logprobs") || b["logprobs"].is_null()) p.logprobs = -1;
  }
  if (chat) {
    if (!b.contains("messages") || !b["messages"].is_array() || b["messages"].empty())
      return bad("messages", "'messages' must be a non-empty array");
    std::vector<text::ChatMessage> messages;
    for (size_t i = 0; i < b["messages"].size(); ++i) {
      const json& m = b["messages"][i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        return bad(cat("messages[", i, "].role"), cat("'messages[", i, "]' must be an object with a string 'role'"));
      text::ChatMessage msg;
      msg.role = m["role"].get<std::string>();
      if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for it
      if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
        return bad(cat("messages[", i, "].role"), cat("role '", msg.role, "' is not supported (system, developer, user, assistant)"));
      if (auto e = content_text(m.contains("content") ? m["content"] : json(nullptr), i, msg.content)) return *e;
      messages.push_back(std::move(msg));
    }
    auto tokens = engine.chat_tokens(messages);
    if (!tokens) return bad("messages", tokens.status().message());
    c.prompt = std::move(*tokens);
  } else {
    if (!b.contains("prompt")) return bad("prompt", "'prompt' is required");
    const json& pr = b["prompt"];
    const int64_t vocab = engine.tokenizer().vocab_size();
    auto ids_of = [&](const json& a) -> std::optional<ApiError> {
      for (const json& t : a) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
          return bad("prompt", cat("token ids in 'prompt' must be integers in [0, ", vocab, ")"));
        c.prompt.push_back(t.get<int64_t>());
      }
      return std::nullopt;
    };
    if (pr.is_string()) {
      auto t = engine.text_tokens(pr.get<std::string>());
      if (!t) return bad("prompt", t.status().message());
      c.prompt = std::move(*t);
    } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
      auto t = engine.text_tokens(pr[0].get<std::string>());
      if (!t) return bad("prompt", t.status().message());
      c.prompt = std::move(*t);
    } else if (pr.is_array() && pr.size() == 1 && pr[0].is_array()) {
      if (auto e = ids_of(pr[0])) return *e;
    } else if (pr.is_array() && !pr.empty() && pr[0].is_number_integer()) {
      if (auto e = ids_of(pr)) return *e;
    } else {
      return bad("prompt", "'prompt' must be a string, an array of token ids, or an array of one of them (one prompt per request)");
    }
    if (c.prompt.empty()) return bad("prompt", "'prompt' has no tokens");
  }
  const int64_t prompt_n = static_cast<int64_t>(c.prompt.size());
  if (prompt_n >= engine.context())
    return ApiError{400, "invalid_request_error",
                    cat("This model's maximum context length is ", engine.context(), " tokens. However, your prompt has ",
                        prompt_n, " tokens."),
                    "context_length_exceeded", chat ? "messages" : "prompt"};
  // unset: completions 16 tokens (OpenAI's default), chat what the context leaves
  p.max_tokens = max_tokens > 0 ? max_tokens : chat ? engine.context() - prompt_n : std::min<int64_t>(16, engine.context() - prompt_n);
  return c;
}

ApiResult<EmbeddingCall> parse_embedding(const json& b, int64_t dim) {
  EmbeddingCall c;
  if (!b.contains("input")) return bad("input", "'input' is required");
  const json& in = b["input"];
  if (in.is_string()) {
    c.texts.push_back(in.get<std::string>());
  } else if (in.is_array() && !in.empty()) {
    for (const json& x : in) {
      if (!x.is_string())
        return bad("input", "'input' must be a string or an array of strings (token-id inputs are not supported)");
      c.texts.push_back(x.get<std::string>());
    }
  } else {
    return bad("input", "'input' must be a string or a non-empty array of strings");
  }
  if (c.texts.size() > 2048) return bad("input", "'input' may hold at most 2048 texts");
  if (b.contains("encoding_format") && !b["encoding_format"].is_null()) {
    const json& f = b["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64")) return bad("encoding_format", "'encoding_format' must be 'float' or 'base64'");
    c.base64 = f == "base64";
  }
  if (b.contains("dimensions") && !b["dimensions"].is_null() && (!b["dimensions"].is_number_integer() || b["dimensions"].get<int64_t>() != dim))
    return bad("dimensions", cat("this model's embeddings have ", dim, " dimensions; 'dimensions' must be that or absent"));
  return c;
}

json embedding_response(const EmbedRequest& r, const std::string& model, bool b64) {
  json data = json::array();
  for (size_t i = 0; i < r.embeddings.size(); ++i) {
    const auto& e = r.embeddings[i];
    json item{{"object", "embedding"}, {"index", i}};
    if (b64) item["embedding"] = base64(e.data(), e.size() * sizeof(float));  // little-endian float32, as OpenAI's
    else item["embedding"] = e;
    data.push_back(std::move(item));
  }
  return {{"object", "list"}, {"data", data}, {"model", model}, {"usage", {{"prompt_tokens", r.tokens}, {"total_tokens", r.tokens}}}};
}

// ---- ResponseWriter

json ResponseWriter::base(const char* object) const {
  return {{"id", (chat_ ? "chat" : "") + id_}, {"object", object}, {"created", created_}, {"model", model_}, {"system_fingerprint", "rlx"}};
}

json ResponseWriter::usage(int64_t completion_tokens, int64_t cached_tokens) const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens_ + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json ResponseWriter::logprobs_json(const std::vector<TokenEvent>& events) const {
  if (logprobs_ < 0) return nullptr;
  if (chat_) {
    json content = json::array();
    for (const TokenEvent& e : events) {
      json top = json::array();
      for (const auto& [t, lp] : e.top) top.push_back({{"token", t}, {"logprob", lp}, {"bytes", byte_values(t)}});
      content.push_back({{"token", e.piece}, {"logprob", e.logprob}, {"bytes", byte_values(e.piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = 0;
  for (const TokenEvent& e : events) {
    tokens.push_back(e.piece);
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [t, lp] : e.top) top[t] = lp;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(e.piece.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json ResponseWriter::whole(const std::vector<TokenEvent>& events, const std::string& finish_reason,
                           int64_t completion_tokens, int64_t cached_tokens) const {
  std::string text;
  for (const TokenEvent& e : events) text += e.text;
  json j = base(chat_ ? "chat.completion" : "text_completion");
  json choice{{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", logprobs_json(events)}};
  if (chat_) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  j["choices"] = json::array({choice});
  j["usage"] = usage(completion_tokens, cached_tokens);
  return j;
}

json ResponseWriter::opening() const {
  json j = base(chat_ ? "chat.completion.chunk" : "text_completion");
  json choice{{"index", 0}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
  if (chat_) choice["delta"] = {{"role", "assistant"}, {"content", ""}};
  else choice["text"] = "";
  j["choices"] = json::array({choice});
  return j;
}

json ResponseWriter::chunk(const TokenEvent& e) const {
  json j = base(chat_ ? "chat.completion.chunk" : "text_completion");
  json choice{{"index", 0}, {"finish_reason", nullptr}, {"logprobs", logprobs_json({e})}};
  if (chat_) choice["delta"] = {{"content", e.text}};
  else choice["text"] = e.text;
  j["choices"] = json::array({choice});
  return j;
}

json ResponseWriter::closing(const std::string& finish_reason) const {
  json j = base(chat_ ? "chat.completion.chunk" : "text_completion");
  json choice{{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  if (chat_) choice["delta"] = json::object();
  else choice["text"] = "";
  j["choices"] = json::array({choice});
  return j;
}

json ResponseWriter::usage_chunk(int64_t completion_tokens, int64_t cached_tokens) const {
  json j = base(chat_ ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage(completion_tokens, cached_tokens);
  return j;
}

}  // namespace rlx::serve

#include "models/text/chat_template.h"

#include <sys/stat.h>

#include "rlx/mapped_file.h"
#include "support/json_fields.h"

namespace rlx::text {
namespace {

constexpr uint64_t kMaxTemplateBytes = uint64_t{4} << 20;
constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;

const char* const kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "pad_token",
                                      "sep_token", "cls_token", "mask_token"};

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The chat_template field: a string, or [{name, template}, ...] whose "default" is taken.
Expected<std::string> template_field(const nlohmann::json& j, const std::string& where) {
  const auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return error(ErrorCode::format_error, where, ": no chat_template");
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    return error(ErrorCode::format_error, where, ": 'chat_template' must be a string or a list of {name, template}, got ",
                 json::type_phrase(*it));
  std::string names;
  for (const nlohmann::json& e : *it) {
    if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["name"].is_string() ||
        !e["template"].is_string())
      return error(ErrorCode::format_error, where, ": 'chat_template' list entries must be {\"name\": string, \"template\": string}");
    if (e["name"].get<std::string>() == "default") return e["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
  }
  return error(ErrorCode::format_error, where, ": 'chat_template' has no template named \"default\" (it has: ", names, ")");
}

// bos_token etc.: a string, or an AddedToken object {"content": ...}; null or absent: none.
Status read_special_tokens(const nlohmann::json& j, const std::string& where, nlohmann::ordered_json& out) {
  for (const char* key : kSpecialTokens) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (it->is_string()) {
      out[key] = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      out[key] = (*it)["content"].get<std::string>();
    } else {
      return error(ErrorCode::format_error, where, ": '", key, "' must be a string or an object with a string 'content', got ",
                   json::type_phrase(*it));
    }
  }
  return Status::ok();
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source, const std::string& name) {
  if (source.size() > kMaxTemplateBytes)
    return error(ErrorCode::out_of_range, name, ": the chat template is ", source.size(), " bytes, more than the ",
                 kMaxTemplateBytes, " accepted");
  RLX_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::parse(source, name));
  ChatTemplate c;
  c.template_ = std::move(t);
  c.source_ = std::string(source);
  return c;
}

Expected<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                           const nlohmann::ordered_json& extra) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    o["role"] = m.role;
    o["content"] = m.content;
    list.push_back(std::move(o));
  }
  return render_json(list, add_generation_prompt, extra);
}

Expected<std::string> ChatTemplate::render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                                const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) return error(ErrorCode::invalid_argument, name(), ": messages must be a JSON array");
  if (!extra.is_object() && !extra.is_null())
    return error(ErrorCode::invalid_argument, name(), ": the extra variables must be a JSON object");
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (special_tokens.is_object())
    for (const auto& [k, v] : special_tokens.items()) ctx[k] = v;
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) ctx[k] = v;
  return template_.render(ctx, now_seconds);
}

Expected<ChatTemplate> chat_template_from_tokenizer_config(const nlohmann::json& config, const std::string& where) {
  if (!config.is_object()) return error(ErrorCode::format_error, where, ": not a JSON object");
  RLX_ASSIGN_OR_RETURN(std::string source, template_field(config, where));
  RLX_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(source, where + ": chat_template"));
  RLX_TRY(read_special_tokens(config, where, t.special_tokens));
  return t;
}

Expected<ChatTemplate> chat_template_from_gguf(const gguf::File& f) {
  const std::string where = f.name + ": tokenizer.chat_template";
  if (!f.find("tokenizer.chat_template")) return error(ErrorCode::format_error, f.name, ": no tokenizer.chat_template");
  RLX_ASSIGN_OR_RETURN(std::string source, f.get_string("tokenizer.chat_template"));
  RLX_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(source, where));
  const gguf::KeyValue* tokens = f.find("tokenizer.ggml.tokens");
  for (const auto& [key, name] : {std::pair<const char*, const char*>{"tokenizer.ggml.bos_token_id", "bos_token"},
                                  {"tokenizer.ggml.eos_token_id", "eos_token"},
                                  {"tokenizer.ggml.unknown_token_id", "unk_token"},
                                  {"tokenizer.ggml.padding_token_id", "pad_token"}}) {
    if (!f.find(key) || !tokens) continue;
    RLX_ASSIGN_OR_RETURN(uint64_t id, f.get_uint(key));
    auto text = tokens->value.string_at(id);
    if (!text) return text.status().with_context(cat(f.name, ": ", key, " = ", id));
    t.special_tokens[name] = *text;
  }
  return t;
}

Expected<ChatTemplate> load_chat_template(const std::string& path) {
  if (!is_dir(path)) {
    RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::load(path));
    return chat_template_from_gguf(f);
  }
  const std::string cfg_path = path + "/tokenizer_config.json";
  nlohmann::json cfg = nlohmann::json::object();
  if (is_file(cfg_path)) {
    RLX_ASSIGN_OR_RETURN(cfg, json::read_object_file(cfg_path, kMaxConfigBytes));
  }
  std::string source, where;
  if (is_file(path + "/chat_template.jinja")) {
    where = path + "/chat_template.jinja";
    RLX_ASSIGN_OR_RETURN(source, read_regular_file(where, kMaxTemplateBytes));
  } else if (is_file(path + "/chat_template.json")) {
    where = path + "/chat_template.json";
    RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::read_object_file(where, kMaxConfigBytes));
    RLX_ASSIGN_OR_RETURN(source, template_field(j, where));
  } else if (is_file(cfg_path)) {
    where = cfg_path + ": chat_template";
    RLX_ASSIGN_OR_RETURN(source, template_field(cfg, cfg_path));
  } else {
    return error(ErrorCode::format_error, path,
                 ": no chat template (looked for chat_template.jinja, chat_template.json and tokenizer_config.json)");
  }
  RLX_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(source, where));
  RLX_TRY(read_special_tokens(cfg, cfg_path, t.special_tokens));
  return t;
}

}  // namespace rlx::text

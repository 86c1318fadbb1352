// Chat templates: the Jinja template a model ships to turn a conversation into its prompt
// (tokenizer_config.json's chat_template, chat_template.jinja, or GGUF's tokenizer.chat_template),
// rendered as transformers' apply_chat_template renders it (jinja.h; docs/chat.md).
//
// The variables a template sees: messages (a list of {role, content}), add_generation_prompt,
// the special tokens the tokenizer files name (bos_token, eos_token, unk_token, pad_token, ...;
// absent when the files give none), then everything in `extra` (tools, date_string,
// enable_thinking, ...: a key of extra replaces a variable of the same name). Variables nobody
// gave are undefined, as in transformers (`tools is defined` is false unless extra has tools).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/text/jinja.h"
#include "rlx/gguf.h"
#include "rlx/status.h"

namespace rlx::text {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;
};

class ChatTemplate {
 public:
  // A template from its source; `name` labels errors ("<name>:<line>: ...").
  static Expected<ChatTemplate> parse(std::string_view source, const std::string& name);

  // The prompt for `messages`. Errors: invalid_argument "<name>:<line>: raise_exception: <the
  // template's message>" when the template refuses the conversation (e.g. roles that do not
  // alternate); out_of_range when a render limit is hit; format_error / unsupported for a
  // template that fails or uses what rlx does not implement.
  Expected<std::string> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  // The same with messages as JSON (a list of objects), for tool calls, content lists and
  // other fields ChatMessage does not have.
  Expected<std::string> render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& name() const { return template_.name(); }
  const std::string& source() const { return source_; }

  // The special tokens given to every render (as the tokenizer files name them; a loader fills
  // them in). Keys: bos_token, eos_token, unk_token, pad_token, sep_token, cls_token, mask_token.
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
  // Fixes the clock of strftime_now (seconds since the epoch) for reproducible prompts; the real
  // clock when absent.
  std::optional<int64_t> now_seconds;

 private:
  jinja::Template template_;
  std::string source_;
};

// The chat template of a tokenizer_config.json object: chat_template as a string, or a list of
// {name, template} of which "default" is taken; the special tokens as strings or as
// {"content": ...} objects. `where` labels errors. not_found-like errors are format_error
// "<where>: no chat_template".
Expected<ChatTemplate> chat_template_from_tokenizer_config(const nlohmann::json& config, const std::string& where);
// tokenizer.chat_template of a GGUF file, with bos_token / eos_token from tokenizer.ggml.tokens
// at tokenizer.ggml.bos_token_id / eos_token_id.
Expected<ChatTemplate> chat_template_from_gguf(const gguf::File& f);
// A Hugging Face folder (chat_template.jinja, else chat_template.json, else
// tokenizer_config.json's chat_template; the special tokens from tokenizer_config.json) or a
// .gguf file.
Expected<ChatTemplate> load_chat_template(const std::string& path);

}  // namespace rlx::text

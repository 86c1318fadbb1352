// A Jinja2 template engine for chat templates: the subset of Jinja that the chat templates of
// the common model families use (Llama 2/3/3.1, Mistral, Qwen2.5/3, Gemma 2/3, Phi-3), with the
// semantics of the environment Hugging Face transformers renders them in
// (apply_chat_template: an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
// the loopcontrols extension, a tojson that does not escape HTML or non-ASCII, and the globals
// raise_exception and strftime_now). docs/chat.md lists what is supported.
//
// Templates come from strangers (tokenizer_config.json, GGUF metadata): parsing bounds the
// nesting of statements and expressions, rendering bounds evaluation steps, macro call depth,
// the nesting of the values a template builds, the bytes of strings it creates and the size of
// its output. Every failure is a Status naming the template and the line; nothing here throws
// out of the API or recurses without a bound.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rlx/status.h"

namespace rlx::text::jinja {

struct Limits {
  int max_statement_depth = 32;     // nested {% if %} / {% for %} / {% macro %} ...
  int max_expression_depth = 128;   // the depth of one expression's tree
  int max_value_depth = 64;         // nested lists / dicts, given or built
  int max_call_depth = 8;           // nested macro calls
  int64_t max_steps = 20'000'000;   // evaluation steps (expressions, statements, iterations, elements made)
  int64_t max_output_bytes = int64_t{64} << 20;
  int64_t max_string_bytes = int64_t{1} << 30;  // all strings a render creates, together
};

struct Program;  // the parsed template (jinja_internal.h)

class Template {
 public:
  // Parses `source`; `name` labels errors ("<name>:<line>: ..."). Unsupported syntax is a
  // parse_error or unsupported error naming the line and what was found.
  static Expected<Template> parse(std::string_view source, const std::string& name, const Limits& limits = {});

  // Renders with the variables of `context` (an object; keys are variable names). Errors:
  // invalid_argument with the template's message for raise_exception(...), out_of_range when
  // a limit is hit, format_error / unsupported for what the template does wrong or rlx lacks.
  // `now_seconds` fixes the clock of strftime_now (seconds since the epoch, local time zone);
  // the real clock when absent.
  Expected<std::string> render(const nlohmann::ordered_json& context,
                               std::optional<int64_t> now_seconds = std::nullopt) const;

  const std::string& name() const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace rlx::text::jinja

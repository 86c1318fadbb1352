// libFuzzer target: a chat template as jinja::Template::parse reads it (the text of
// tokenizer_config.json's chat_template or GGUF's tokenizer.chat_template) on arbitrary bytes;
// an accepted template is rendered, under small limits, with a fixed conversation with tools,
// with and without a generation prompt. Every refusal carries a message and no output is
// longer than the limit; ChatTemplate::parse accepts exactly what the engine accepts.
#include <cstdint>
#include <string_view>

#include "models/text/chat_template.h"
#include "models/text/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace jinja = rlx::text::jinja;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  jinja::Limits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_string_bytes = 16 << 20;
  auto t = jinja::Template::parse(text, "fuzz", limits);
  auto c = rlx::text::ChatTemplate::parse(text, "fuzz");
  if (t.has_value() != c.has_value()) __builtin_trap();
  if (!t) {
    if (t.status().message().empty()) __builtin_trap();
    return 0;
  }
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \u00e9 {{ x }}"},
                 {"role": "assistant", "content": "<think>\nok\n</think>\n\nHello", "tool_calls": [{"id": "call12345",
                  "function": {"name": "f", "arguments": {"a": [1, 2.5, null, true]}}}]},
                 {"role": "tool", "content": "42"}, {"role": "user", "content": ""}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true})");
  for (bool prompt : {true, false}) {
    nlohmann::ordered_json ctx = context;
    ctx["add_generation_prompt"] = prompt;
    auto r = t->render(ctx, 0);
    if (!r && r.status().message().empty()) __builtin_trap();
    if (r && r->size() > static_cast<size_t>(limits.max_output_bytes)) __builtin_trap();
  }
  return 0;
}

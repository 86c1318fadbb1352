#include "models/chat.h"

#include <sys/stat.h>

#include <algorithm>

#include "support/json_fields.h"

namespace rlx::models {

Expected<std::string> chat_prompt(const std::string& model_path, const std::vector<text::ChatMessage>& messages) {
  RLX_ASSIGN_OR_RETURN(text::ChatTemplate t, text::load_chat_template(model_path));
  return t.render(messages, /*add_generation_prompt=*/true);
}

std::vector<int64_t> end_of_generation_ids(const std::string& model_path, const DecoderConfig& c,
                                           const text::BpeTokenizer* tokenizer) {
  std::vector<int64_t> ids = c.eos_token_ids;
  if (c.eos_token_id >= 0) ids.push_back(c.eos_token_id);
  struct stat st;
  if (stat(model_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    // generation_config.json is optional; a malformed one is ignored here (config.json rules)
    if (auto g = json::read_object_file(model_path + "/generation_config.json", uint64_t{1} << 20);
        g && g->contains("eos_token_id")) {
      const nlohmann::json& e = (*g)["eos_token_id"];
      if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
      if (e.is_array())
        for (const auto& x : e)
          if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
    }
  }
  if (tokenizer) {
    if (tokenizer->eos_id >= 0) ids.push_back(tokenizer->eos_id);
    for (const char* t : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "</s>"})
      if (auto id = tokenizer->token_id(t); id && tokenizer->is_special(*id)) ids.push_back(*id);
  }
  std::erase_if(ids, [&](int64_t id) { return id < 0 || id >= c.vocab_size; });
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace rlx::models

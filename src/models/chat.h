// What a chat with a decoder model needs beyond the weights: the prompt its chat template makes
// of a conversation, and the tokens that end a turn. Used by `rlx generate --chat`.
#pragma once

#include <string>
#include <vector>

#include "models/decoder.h"
#include "models/text/bpe.h"
#include "models/text/chat_template.h"

namespace rlx::models {

// The prompt text of a conversation: the model's chat template (a folder's chat_template.jinja,
// chat_template.json or tokenizer_config.json, or a GGUF file's tokenizer.chat_template) applied
// to `messages` with the generation prompt, as transformers' apply_chat_template renders it.
// The text already holds the template's special tokens (BOS included where the template writes
// it): tokenize it without adding any. Errors name the template and what it refused.
Expected<std::string> chat_prompt(const std::string& model_path, const std::vector<text::ChatMessage>& messages);

// The ids that end generation: the configuration's eos ids (config.json's list, GGUF's eos and
// eot), a folder's generation_config.json eos_token_id (one or a list), the tokenizer's eos, and
// the end-of-turn tokens of the families' chat formats where the vocabulary has them
// (<|eot_id|>, <|eom_id|>, <|im_end|>, <end_of_turn>, <|end|>, <|endoftext|>, </s>), as llama.cpp
// also recognizes them by their text. Sorted, without repeats.
std::vector<int64_t> end_of_generation_ids(const std::string& model_path, const DecoderConfig& c,
                                           const text::BpeTokenizer* tokenizer);

}  // namespace rlx::models

// ChatML: the chat format meshrl uses for prompts (Qwen2's format, also used by the char
// tokenizer presets). Owns nothing; knows nothing about tokenizers or models: it only builds text,
// which encode() then turns into ids with <|im_start|>/<|im_end|> as single special tokens.
//
//   <|im_start|>system\nYou are...<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n
//
// No default system message is inserted. Roles and contents are copied as given; a content that
// itself contains "<|im_end|>" will be split there by the tokenizer (callers that embed untrusted
// text should be aware of it).
#pragma once

#include <string>
#include <vector>

namespace meshrl::tokenizer {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

inline constexpr const char* kImStart = "<|im_start|>";
inline constexpr const char* kImEnd = "<|im_end|>";

// add_generation_prompt: end with "<|im_start|>assistant\n" so the model writes the reply.
std::string apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace meshrl::tokenizer

#include "tokenizer/chat_template.h"

namespace meshrl::tokenizer {

std::string apply_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  size_t n = 32;
  for (const auto& m : messages) n += m.role.size() + m.content.size() + 24;
  out.reserve(n);
  for (const auto& m : messages) {
    out += kImStart;
    out += m.role;
    out += '\n';
    out += m.content;
    out += kImEnd;
    out += '\n';
  }
  if (add_generation_prompt) {
    out += kImStart;
    out += "assistant\n";
  }
  return out;
}

}  // namespace meshrl::tokenizer

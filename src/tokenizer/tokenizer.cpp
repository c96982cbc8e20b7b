#include "tokenizer/tokenizer.h"

#include <array>

namespace meshrl::tokenizer {

Result<std::string> Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    auto bytes = token_bytes(id);
    if (!bytes.is_ok()) return bytes.status();
    out.append(bytes.value());
  }
  return out;
}

void Tokenizer::guess_special_ids() {
  static constexpr std::array<std::string_view, 7> kEos = {"<|im_end|>",    "<|eot_id|>", "<|endoftext|>",
                                                           "<|end_of_text|>", "</s>",      "<|eos|>",
                                                           "<eos>"};
  static constexpr std::array<std::string_view, 5> kBos = {"<|begin_of_text|>", "<|bos|>", "<s>",
                                                           "<|startoftext|>", "<bos>"};
  eos_id_.reset();
  bos_id_.reset();
  for (auto name : kEos)
    if ((eos_id_ = token_to_id(name))) break;
  for (auto name : kBos)
    if ((bos_id_ = token_to_id(name))) break;
}

}  // namespace meshrl::tokenizer

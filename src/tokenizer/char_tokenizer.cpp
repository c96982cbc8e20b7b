#include "tokenizer/char_tokenizer.h"

#include <array>
#include <string>

#include "tokenizer/utf8.h"

namespace meshrl::tokenizer {
namespace {

constexpr std::array<std::string_view, 5> kSpecialText = {"<|bos|>", "<|eos|>", "<|pad|>", "<|im_start|>",
                                                           "<|im_end|>"};

// The 256 single bytes as views, so token_bytes() needs no storage per tokenizer.
const std::array<char, 256>& byte_table() {
  static const std::array<char, 256> t = [] {
    std::array<char, 256> a{};
    for (int i = 0; i < 256; ++i) a[i] = static_cast<char>(i);
    return a;
  }();
  return t;
}

}  // namespace

CharTokenizer::CharTokenizer(int32_t n_vocab) : n_vocab_(n_vocab) {
  std::vector<AddedToken> specials;
  for (int32_t i = 0; i < static_cast<int32_t>(kSpecialText.size()); ++i) {
    AddedToken t;
    t.id = kCharBos + i;
    t.content = std::string(kSpecialText[i]);
    t.special = true;
    specials.push_back(std::move(t));
  }
  specials_ = AddedTokens(std::move(specials));
  guess_special_ids();
}

Result<std::unique_ptr<Tokenizer>> make_char_tokenizer(int32_t n_vocab) {
  if (n_vocab < kCharMinVocab || n_vocab > kCharMaxVocab)
    return invalid_argument("[tokenizer] char tokenizer: n_vocab is " + std::to_string(n_vocab) + ", expected " +
                            std::to_string(kCharMinVocab) + ".." + std::to_string(kCharMaxVocab) +
                            " (256 bytes + 5 specials)");
  return std::unique_ptr<Tokenizer>(new CharTokenizer(n_vocab));
}

Result<std::vector<int32_t>> CharTokenizer::encode(std::string_view text) const {
  if (text.size() > kMaxEncodeBytes)
    return invalid_argument("[tokenizer] encode: text is " + std::to_string(text.size()) + " bytes, over the limit of " +
                            std::to_string(kMaxEncodeBytes));
  if (size_t bad = utf8_first_invalid(text); bad != kUtf8Valid)
    return invalid_argument("[tokenizer] encode: text is not valid UTF-8 at byte " + std::to_string(bad));
  std::vector<TextSegment> segments;
  specials_.split(text, &segments);
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (const auto& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    for (uint32_t i = seg.start; i < seg.end; ++i) ids.push_back(static_cast<unsigned char>(text[i]));
  }
  return ids;
}

Result<std::string_view> CharTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab_)
    return invalid_argument("[tokenizer] decode: id " + std::to_string(id) + " is outside the vocab [0, " +
                            std::to_string(n_vocab_) + ")");
  if (id < 256) return std::string_view(&byte_table()[id], 1);
  if (id < kCharMinVocab) return kSpecialText[id - kCharBos];
  return invalid_argument("[tokenizer] decode: id " + std::to_string(id) +
                          " is unused by the char tokenizer (only 0..260 are tokens)");
}

std::optional<int32_t> CharTokenizer::token_to_id(std::string_view token) const {
  if (auto id = specials_.find(token)) return id;
  if (token.size() == 1) return static_cast<unsigned char>(token[0]);
  return std::nullopt;
}

}  // namespace meshrl::tokenizer

// AddedTokens: the tokens a tokenizer.json lists under "added_tokens" (<|im_start|>, <|endoftext|>,
// ...), which are cut out of the text before pre-tokenization and map straight to their ids.
// Owns the token list and a first-byte index; knows nothing about BPE or regexes.
//
// Matching is leftmost, then longest: at each byte, the longest token starting there wins.
// lstrip / rstrip swallow ASCII whitespace next to the token; single_word requires that the bytes
// next to the match are not ASCII word characters ([A-Za-z0-9_]).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace meshrl::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;  // non-empty, valid UTF-8
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A stretch of the input: plain text [start, end) when id < 0, else one added token.
struct TextSegment {
  uint32_t start = 0;
  uint32_t end = 0;
  int32_t id = -1;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // Tokens with empty content are ignored; the first of two tokens with the same content wins.
  explicit AddedTokens(std::vector<AddedToken> tokens);

  // Replaces *out with the segments of `text` (at most 4 GiB), in order. Plain-text segments are
  // non-empty; concatenating all segments (tokens as their span) gives back `text`.
  void split(std::string_view text, std::vector<TextSegment>* out) const;

  std::optional<int32_t> find(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // indices into tokens_, longest first
  std::unordered_map<std::string, int32_t> by_content_;
};

}  // namespace meshrl::tokenizer

// CharTokenizer: the built-in tokenizer of the tiny/small presets and the built-in tasks. Each
// byte is its own token (id = byte value 0..255); five special tokens follow; ids from 261 up to
// n_vocab - 1 are unused (the model's vocab is sized for the preset, e.g. 512 or 8192).
// Owns nothing but its size; knows nothing about models or tasks.
//
// Special tokens written in the text ("<|im_start|>") encode to their ids, so ChatML prompts from
// apply_chatml() work unchanged. eos_id() is <|im_end|> (end of turn, see tokenizer.h), bos_id()
// is <|bos|>.
#pragma once

#include <cstdint>
#include <memory>

#include "tokenizer/added_tokens.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::tokenizer {

inline constexpr int32_t kCharBos = 256;      // <|bos|>
inline constexpr int32_t kCharEos = 257;      // <|eos|>
inline constexpr int32_t kCharPad = 258;      // <|pad|>
inline constexpr int32_t kCharImStart = 259;  // <|im_start|>
inline constexpr int32_t kCharImEnd = 260;    // <|im_end|>
inline constexpr int32_t kCharMinVocab = 261;
inline constexpr int32_t kCharMaxVocab = 1 << 24;

class CharTokenizer final : public Tokenizer {
 public:
  Result<std::vector<int32_t>> encode(std::string_view text) const override;
  // Fails for ids in [261, n_vocab) (unused) and outside [0, n_vocab).
  Result<std::string_view> token_bytes(int32_t id) const override;
  int32_t n_vocab() const override { return n_vocab_; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  bool is_special(int32_t id) const override { return id >= kCharBos && id < kCharMinVocab; }

 private:
  friend Result<std::unique_ptr<Tokenizer>> make_char_tokenizer(int32_t n_vocab);
  explicit CharTokenizer(int32_t n_vocab);
  int32_t n_vocab_;
  AddedTokens specials_;
};

// n_vocab must be in [261, 2^24].
Result<std::unique_ptr<Tokenizer>> make_char_tokenizer(int32_t n_vocab);

}  // namespace meshrl::tokenizer

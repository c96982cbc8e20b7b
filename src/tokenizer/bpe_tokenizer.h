// BpeTokenizer: byte-level BPE (GPT-2, Qwen2, Llama-3), the Tokenizer behind a tokenizer.json.
// Owns the vocab, merges, added tokens, pre-tokenizer and a cache of encoded words; knows nothing
// about JSON (tokenizer_json.cpp fills a BpeSpec) or about models.
//
// encode: validate UTF-8 -> cut out added tokens -> pre-tokenize each stretch of plain text ->
// BPE-merge each piece's raw bytes (the vocab is mapped from the byte-level alphabet back to raw
// bytes at load, so no per-byte strings are built while encoding).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::tokenizer {

// Everything a tokenizer.json says that matters for byte-level BPE, as spelled in the file.
struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;            // model.vocab, byte-level spelling
  std::vector<std::pair<std::string, std::string>> merges;       // model.merges, in rank order
  std::vector<AddedToken> added_tokens;                          // added_tokens
  std::vector<PreTokenizerStep> pre_tokenizer;                   // flattened Sequence
  bool ignore_merges = false;  // model.ignore_merges: a piece that is a whole vocab entry skips merging
};

// Transparent hashing so a std::string_view can look up a std::string key without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeTokenizer final : public Tokenizer {
 public:
  // Validates the spec: ids in range and unique, every merge's parts and result in the vocab
  // (errors name model.merges[i]), added tokens consistent with the vocab. `source` names the
  // file in errors.
  static Result<std::unique_ptr<BpeTokenizer>> create(BpeSpec spec, const std::string& source);

  Result<std::vector<int32_t>> encode(std::string_view text) const override;
  Result<std::string_view> token_bytes(int32_t id) const override;
  int32_t n_vocab() const override { return n_vocab_; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  bool is_special(int32_t id) const override;

  size_t n_merges() const { return merger_.n_merges(); }

 private:
  explicit BpeTokenizer(PreTokenizer pre) : pre_(std::move(pre)) {}
  Status encode_piece(std::string_view piece, std::vector<int32_t>* out) const;

  int32_t n_vocab_ = 0;
  StringIdMap vocab_;                     // tokenizer.json spelling -> id
  StringIdMap bytes_to_id_;               // raw bytes -> id (only filled with ignore_merges)
  std::vector<std::string> id_bytes_;     // [n_vocab] raw bytes; added tokens: their content
  std::vector<uint8_t> id_kind_;          // [n_vocab] 0 none, 1 vocab, 2 added, 3 added special
  BpeMerger merger_;
  AddedTokens added_;
  PreTokenizer pre_;
  bool ignore_merges_ = false;

  // Encoded pieces; real text repeats words a lot. Cleared when it reaches kMaxCacheEntries.
  static constexpr size_t kMaxCacheEntries = 1 << 18;
  static constexpr size_t kMaxCachedPieceBytes = 64;
  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace meshrl::tokenizer

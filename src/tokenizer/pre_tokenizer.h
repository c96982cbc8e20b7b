// PreTokenizer: cuts a stretch of text (no added tokens in it) into the pieces ("words") that BPE
// then encodes one by one, as the Hugging Face pre_tokenizer of a byte-level tokenizer.json does.
// Owns its compiled regexes; knows nothing about vocabularies, merges or JSON (tokenizer_json.cpp
// builds the steps).
//
// Supported steps, applied in order to every current piece:
//   Split{pattern, behavior, invert}: cut each piece around the regex matches.
//   ByteLevel{add_prefix_space, use_regex}: prepend " " to each piece not starting with one, then
//     (use_regex) cut with the GPT-2 pattern, behavior Isolated. The byte -> unicode mapping itself
//     is not done here: BPE works on raw bytes and the vocab was mapped back to bytes at load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace meshrl::tokenizer {

// The pattern GPT-2's ByteLevel pre-tokenizer uses when use_regex is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel };
  Kind kind = Kind::kSplit;
  std::optional<Regex> regex;  // Split's pattern; ByteLevel's GPT-2 pattern when use_regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel only
};

// Pieces as byte ranges into one buffer, so cutting text allocates no string per piece.
struct Pieces {
  std::string arena;
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // [start, end) into arena, non-empty
  std::string_view piece(size_t i) const {
    return std::string_view(arena).substr(spans[i].first, spans[i].second - spans[i].first);
  }
};

class PreTokenizer {
 public:
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  // Replaces *out with the pieces of `text` (valid UTF-8, at most 4 GiB). Fails only when a regex
  // hits its match limit or PCRE2 reports an error.
  Status apply(std::string_view text, Pieces* out) const;

  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace meshrl::tokenizer

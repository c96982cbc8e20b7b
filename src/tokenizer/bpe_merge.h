// BpeMerger: the BPE merge loop. Turns one pre-token (raw bytes) into token ids by starting from
// one token per byte and repeatedly applying the lowest-ranked merge present (leftmost first on
// ties), as Hugging Face's BPE model does. Owns the byte -> id table and the merge table; knows
// nothing about text, regexes or JSON.
//
// Cost: O(n log n) per word of n bytes (a heap of candidate merges over a linked list of symbols),
// no allocation once the thread's scratch buffers have grown.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace meshrl::tokenizer {

struct MergeRule {
  int32_t rank = 0;    // position in the merges list; lower merges first
  int32_t result = 0;  // id of the merged token
};

inline uint64_t merge_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

class BpeMerger {
 public:
  BpeMerger() { byte_ids_.fill(-1); }
  // byte_ids[b]: id of the single-byte token b, -1 when the vocab has none.
  // merges: merge_key(left, right) -> rule.
  BpeMerger(const std::array<int32_t, 256>& byte_ids, std::unordered_map<uint64_t, MergeRule> merges)
      : byte_ids_(byte_ids), merges_(std::move(merges)) {}

  // Appends the ids of `word` (non-empty) to *out. Fails when a byte has no token.
  Status encode_word(std::string_view word, std::vector<int32_t>* out) const;

  size_t n_merges() const { return merges_.size(); }

 private:
  std::array<int32_t, 256> byte_ids_;
  std::unordered_map<uint64_t, MergeRule> merges_;
};

}  // namespace meshrl::tokenizer

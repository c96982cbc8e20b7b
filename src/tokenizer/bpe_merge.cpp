#include "tokenizer/bpe_merge.h"

#include <algorithm>
#include <cstdio>

namespace meshrl::tokenizer {
namespace {

struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t pos;  // index of the left symbol
  int32_t result;
};

// Min-heap order: lowest rank first, then leftmost.
struct LaterFirst {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

}  // namespace

Status BpeMerger::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  thread_local Scratch scratch;
  auto& syms = scratch.symbols;
  auto& heap = scratch.heap;
  syms.clear();
  heap.clear();
  const int32_t n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(word[i]);
    const int32_t id = byte_ids_[b];
    if (id < 0) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      return invalid_argument(std::string("[tokenizer] byte ") + hex +
                              " has no single-byte token in the vocab, so this text cannot be encoded");
    }
    syms.push_back({id, i - 1, i + 1 < n ? i + 1 : -1, true});
  }
  if (n == 1) {
    out->push_back(syms[0].id);
    return Status::ok();
  }

  auto push_candidate = [&](int32_t pos) {
    const int32_t next = syms[pos].next;
    if (next < 0) return;
    auto it = merges_.find(merge_key(syms[pos].id, syms[next].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.result});
    std::push_heap(heap.begin(), heap.end(), LaterFirst{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterFirst{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = syms[c.pos];
    if (!left.alive || left.next < 0) continue;
    // The candidate is stale when either side has changed since it was pushed.
    auto it = merges_.find(merge_key(left.id, syms[left.next].id));
    if (it == merges_.end() || it->second.rank != c.rank || it->second.result != c.result) continue;
    Symbol& right = syms[left.next];
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = c.pos;
    right.alive = false;
    if (left.prev >= 0) push_candidate(left.prev);
    push_candidate(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
  return Status::ok();
}

}  // namespace meshrl::tokenizer

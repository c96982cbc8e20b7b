#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

namespace meshrl::tokenizer {
namespace {

bool is_ascii_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_word_byte(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) {
  for (auto& t : tokens) {
    if (t.content.empty() || by_content_.count(t.content)) continue;
    by_content_.emplace(t.content, t.id);
    tokens_.push_back(std::move(t));
  }
  for (uint32_t i = 0; i < tokens_.size(); ++i)
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  for (auto& v : by_first_byte_)
    std::stable_sort(v.begin(), v.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

std::optional<int32_t> AddedTokens::find(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

void AddedTokens::split(std::string_view text, std::vector<TextSegment>* out) const {
  out->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t seg_start = 0;
  size_t pos = 0;
  while (pos < n) {
    const auto& cands = by_first_byte_[p[pos]];
    const AddedToken* hit = nullptr;
    for (uint32_t idx : cands) {
      const AddedToken& t = tokens_[idx];
      if (t.content.size() > n - pos || std::memcmp(p + pos, t.content.data(), t.content.size()) != 0) continue;
      if (t.single_word) {
        size_t e = pos + t.content.size();
        if ((pos > 0 && is_word_byte(p[pos - 1])) || (e < n && is_word_byte(p[e]))) continue;
      }
      hit = &t;
      break;
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t s = pos, e = pos + hit->content.size();
    if (hit->lstrip)
      while (s > seg_start && is_ascii_space(p[s - 1])) --s;
    if (hit->rstrip)
      while (e < n && is_ascii_space(p[e])) ++e;
    if (s > seg_start) out->push_back({static_cast<uint32_t>(seg_start), static_cast<uint32_t>(s), -1});
    out->push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(e), hit->id});
    pos = seg_start = e;
  }
  if (n > seg_start) out->push_back({static_cast<uint32_t>(seg_start), static_cast<uint32_t>(n), -1});
}

}  // namespace meshrl::tokenizer

#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <mutex>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace meshrl::tokenizer {
namespace {

// Ids above this are refused: the id tables are dense, so a hostile id must not size them.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

enum IdKind : uint8_t { kNone = 0, kVocab = 1, kAdded = 2, kAddedSpecial = 3 };

std::string quote_token(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 64));
  if (s.size() > 64) out += "...";
  return out + "'";
}

}  // namespace

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(BpeSpec spec, const std::string& source) {
  const std::string where = "[tokenizer] " + source + ": ";
  if (spec.vocab.empty()) return invalid_argument(where + "model.vocab is empty");

  int64_t max_id = -1;
  for (const auto& [tok, id] : spec.vocab) {
    if (id < 0 || id > kMaxTokenId)
      return invalid_argument(where + "model.vocab[" + quote_token(tok) + "] has id " + std::to_string(id) +
                              ", expected 0.." + std::to_string(kMaxTokenId));
    max_id = std::max<int64_t>(max_id, id);
  }
  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const auto& t = spec.added_tokens[i];
    if (t.id < 0 || t.id > kMaxTokenId)
      return invalid_argument(where + "added_tokens[" + std::to_string(i) + "].id is " + std::to_string(t.id) +
                              ", expected 0.." + std::to_string(kMaxTokenId));
    max_id = std::max<int64_t>(max_id, t.id);
  }
  const int64_t n_entries = static_cast<int64_t>(spec.vocab.size() + spec.added_tokens.size());
  if (max_id + 1 > 2 * n_entries + 1024)
    return invalid_argument(where + "the largest id is " + std::to_string(max_id) + " but there are only " +
                            std::to_string(n_entries) + " tokens; ids must be (nearly) dense");

  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer(PreTokenizer(std::move(spec.pre_tokenizer))));
  tok->n_vocab_ = static_cast<int32_t>(max_id + 1);
  tok->id_bytes_.assign(static_cast<size_t>(tok->n_vocab_), std::string());
  tok->id_kind_.assign(static_cast<size_t>(tok->n_vocab_), kNone);
  tok->ignore_merges_ = spec.ignore_merges;
  std::vector<int32_t> owner(static_cast<size_t>(tok->n_vocab_), -1);  // id -> index in spec.vocab

  tok->vocab_.reserve(spec.vocab.size());
  for (size_t i = 0; i < spec.vocab.size(); ++i) {
    const auto& [text, id] = spec.vocab[i];
    if (owner[id] >= 0)
      return invalid_argument(where + "model.vocab: id " + std::to_string(id) + " is given to both " +
                              quote_token(spec.vocab[owner[id]].first) + " and " + quote_token(text));
    owner[id] = static_cast<int32_t>(i);
    if (!tok->vocab_.emplace(text, id).second)
      return invalid_argument(where + "model.vocab: token " + quote_token(text) + " appears twice");
    // Entries outside the byte-level alphabet cannot come out of BPE; they decode as written.
    auto bytes = byte_level_to_bytes(text);
    tok->id_bytes_[id] = bytes ? std::move(*bytes) : text;
    tok->id_kind_[id] = kVocab;
    if (spec.ignore_merges && bytes) tok->bytes_to_id_.emplace(tok->id_bytes_[id], id);
  }

  std::array<int32_t, 256> byte_ids;
  for (int b = 0; b < 256; ++b) {
    std::string spelled;
    utf8_append(byte_level_char(static_cast<unsigned char>(b)), &spelled);
    auto it = tok->vocab_.find(spelled);
    byte_ids[b] = it == tok->vocab_.end() ? -1 : it->second;
  }

  std::unordered_map<uint64_t, MergeRule> merges;
  merges.reserve(spec.merges.size());
  std::string joined;
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const std::string& a = spec.merges[i].first;
    const std::string& b = spec.merges[i].second;
    auto name = [&] { return "model.merges[" + std::to_string(i) + "] (" + quote_token(a) + ", " + quote_token(b) + ")"; };
    auto ia = tok->vocab_.find(a);
    if (ia == tok->vocab_.end()) return invalid_argument(where + name() + ": " + quote_token(a) + " is not in model.vocab");
    auto ib = tok->vocab_.find(b);
    if (ib == tok->vocab_.end()) return invalid_argument(where + name() + ": " + quote_token(b) + " is not in model.vocab");
    joined.assign(a).append(b);
    auto iab = tok->vocab_.find(joined);
    if (iab == tok->vocab_.end())
      return invalid_argument(where + name() + ": the merged token " + quote_token(joined) + " is not in model.vocab");
    // A repeated merge keeps its first (lowest) rank.
    merges.emplace(merge_key(ia->second, ib->second), MergeRule{static_cast<int32_t>(i), iab->second});
  }
  tok->merger_ = BpeMerger(byte_ids, std::move(merges));

  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const auto& t = spec.added_tokens[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (t.content.empty()) return invalid_argument(where + field + ".content is empty");
    if (utf8_first_invalid(t.content) != kUtf8Valid)
      return invalid_argument(where + field + ".content is not valid UTF-8");
    const uint8_t kind = t.special ? kAddedSpecial : kAdded;
    if (tok->id_kind_[t.id] == kVocab) {
      // GPT-2 lists <|endoftext|> both in the vocab and as an added token, with the same id.
      const std::string& spelled = spec.vocab[owner[t.id]].first;
      if (spelled != t.content && tok->id_bytes_[t.id] != t.content)
        return invalid_argument(where + field + " (" + quote_token(t.content) + ") has id " + std::to_string(t.id) +
                                ", which model.vocab gives to " + quote_token(spelled));
    } else if (tok->id_kind_[t.id] != kNone && tok->id_bytes_[t.id] != t.content) {
      return invalid_argument(where + field + " (" + quote_token(t.content) + ") has id " + std::to_string(t.id) +
                              ", already used by added token " + quote_token(tok->id_bytes_[t.id]));
    }
    tok->id_bytes_[t.id] = t.content;
    tok->id_kind_[t.id] = kind;
  }
  tok->added_ = AddedTokens(std::move(spec.added_tokens));
  tok->guess_special_ids();
  return tok;
}

Status BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    auto it = bytes_to_id_.find(piece);
    if (it != bytes_to_id_.end()) {
      out->push_back(it->second);
      return Status::ok();
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) return merger_.encode_word(piece, out);
  {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return Status::ok();
    }
  }
  const size_t first = out->size();
  MESHRL_RETURN_IF_ERROR(merger_.encode_word(piece, out));
  std::unique_lock lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::string(piece), std::vector<int32_t>(out->begin() + first, out->end()));
  return Status::ok();
}

Result<std::vector<int32_t>> BpeTokenizer::encode(std::string_view text) const {
  if (text.size() > kMaxEncodeBytes)
    return invalid_argument("[tokenizer] encode: text is " + std::to_string(text.size()) + " bytes, over the limit of " +
                            std::to_string(kMaxEncodeBytes));
  if (size_t bad = utf8_first_invalid(text); bad != kUtf8Valid)
    return invalid_argument("[tokenizer] encode: text is not valid UTF-8 at byte " + std::to_string(bad));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<TextSegment> segments;
  added_.split(text, &segments);
  Pieces pieces;
  for (const auto& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    MESHRL_RETURN_IF_ERROR(pre_.apply(text.substr(seg.start, seg.end - seg.start), &pieces));
    for (size_t i = 0; i < pieces.spans.size(); ++i) MESHRL_RETURN_IF_ERROR(encode_piece(pieces.piece(i), &ids));
  }
  return ids;
}

Result<std::string_view> BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab_)
    return invalid_argument("[tokenizer] decode: id " + std::to_string(id) + " is outside the vocab [0, " +
                            std::to_string(n_vocab_) + ")");
  if (id_kind_[id] == kNone)
    return invalid_argument("[tokenizer] decode: id " + std::to_string(id) + " has no token (a gap in the vocab)");
  return std::string_view(id_bytes_[id]);
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.find(token)) return id;
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < n_vocab_ && id_kind_[id] == kAddedSpecial;
}

}  // namespace meshrl::tokenizer

// The open round's book. See round_book.h.
#include "mesh/round_book.h"

#include <algorithm>

namespace meshrl::mesh {

namespace {

bool fresher(const store::UpdateKey& a, const store::UpdateKey& b) {
  return a.base_version != b.base_version ? a.base_version > b.base_version : a.seq > b.seq;
}

template <class F>
double mean_over(const std::vector<RoundEntry>& a, const std::vector<RoundEntry>& b, bool stats_only, F f) {
  double s = 0, n = 0;
  for (const auto* list : {&a, &b})
    for (const RoundEntry& e : *list)
      if (!stats_only || e.has_stats) s += f(e), n += 1;
  return n > 0 ? s / n : 0.0;
}

}  // namespace

const RoundEntry* RoundBook::entry_of(const std::string& node) const {
  for (const auto* list : {&counted_, &held_})
    for (const RoundEntry& e : *list)
      if (e.key.node == node) return &e;
  return nullptr;
}

BookDecision RoundBook::offer(const RoundEntry& e) const {
  BookDecision d;
  if (std::string why = check_new_base(e.key); !why.empty()) {
    d.reason = why;
    return d;
  }
  if (const RoundEntry* mine = entry_of(e.key.node)) {
    const bool is_counted = std::any_of(counted_.begin(), counted_.end(), [&](const RoundEntry& c) { return c.key == mine->key; });
    if (is_counted || !fresher(e.key, mine->key)) {
      d.reason = "'" + e.key.node + "' already has update " + mine->key.str() + " in this round" +
                 (is_counted ? "" : ", fresher than this one") + "; one vote per node per round";
      return d;
    }
    d.superseded = mine->key;
  }
  d.accepted = true;
  d.count_now = e.staleness == 0;
  return d;
}

void RoundBook::place(const RoundEntry& e, const BookDecision& d) {
  if (d.superseded)
    held_.erase(std::remove_if(held_.begin(), held_.end(), [&](const RoundEntry& h) { return h.key == *d.superseded; }), held_.end());
  (d.count_now ? counted_ : held_).push_back(e);
}

std::string RoundBook::check_new_base(const store::UpdateKey& key) const {
  auto it = last_applied_base_.find(key.node);
  if (it == last_applied_base_.end() || key.base_version > it->second) return {};
  return "'" + key.node + "' already has an update on base version " + std::to_string(it->second) +
         " applied; one update per node per base version (train on the current version)";
}

void RoundBook::set_last_applied_base(const std::string& node, int64_t base) {
  int64_t& b = last_applied_base_.try_emplace(node, base).first->second;
  b = std::max(b, base);
}

std::optional<int64_t> RoundBook::last_applied_base(const std::string& node) const {
  auto it = last_applied_base_.find(node);
  if (it == last_applied_base_.end()) return std::nullopt;
  return it->second;
}

std::vector<RoundEntry> RoundBook::entries() const {
  std::vector<RoundEntry> out = counted_;
  out.insert(out.end(), held_.begin(), held_.end());
  return out;
}

int64_t RoundBook::n_fresh_nodes() const {
  int64_t n = 0;  // one entry per node, so counting fresh entries counts nodes
  for (const auto* list : {&counted_, &held_})
    for (const RoundEntry& e : *list) n += e.staleness == 0;
  return n;
}

int64_t RoundBook::samples() const {
  int64_t s = 0;
  for (const auto* list : {&counted_, &held_})
    for (const RoundEntry& e : *list)
      if (__builtin_add_overflow(s, e.n_samples, &s)) return INT64_MAX;
  return s;
}

double RoundBook::mean_staleness() const {
  return mean_over(counted_, held_, false, [](const RoundEntry& e) { return static_cast<double>(e.staleness); });
}
double RoundBook::mean_reward() const { return mean_over(counted_, held_, true, [](const RoundEntry& e) { return e.reward_mean; }); }
double RoundBook::mean_kl() const { return mean_over(counted_, held_, true, [](const RoundEntry& e) { return e.kl; }); }
double RoundBook::mean_entropy() const { return mean_over(counted_, held_, true, [](const RoundEntry& e) { return e.entropy; }); }

void RoundBook::close() {
  for (const auto* list : {&counted_, &held_})
    for (const RoundEntry& e : *list) set_last_applied_base(e.key.node, e.key.base_version);
  counted_.clear();
  held_.clear();
}

}  // namespace meshrl::mesh

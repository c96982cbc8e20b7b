// Leaves, digests and the node's book of scored rollouts. See rollout_commitment.h.
#include "mesh/rollout_commitment.h"

#include <cstring>

#include "trust/signing_key.h"

namespace meshrl::mesh {

namespace {

void put_u64_le(std::string& out, uint64_t x) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
}

}  // namespace

std::string completion_hash(const std::string& completion) { return trust::blake2b_256(completion); }

std::string rollout_leaf(uint64_t prompt_id, const std::string& completion_hash, double claimed_reward) {
  std::string b;
  b.reserve(8 + completion_hash.size() + 8);
  put_u64_le(b, prompt_id);
  b += completion_hash;
  uint64_t bits = 0;
  std::memcpy(&bits, &claimed_reward, sizeof bits);
  put_u64_le(b, bits);
  return trust::blake2b_256(b);
}

std::string leaves_digest(const std::vector<std::string>& leaves) {
  std::string all;
  all.reserve(leaves.size() * 32);
  for (const std::string& l : leaves) all += l;
  return trust::blake2b_256(all);
}

void ScoredRolloutBook::add(ScoredRollout r) {
  std::lock_guard<std::mutex> lk(mu_);
  if (static_cast<int64_t>(open_.size()) >= kMaxScoredRollouts) return;  // beyond the bound: not committed
  if (r.completion.size() > kMaxAuditCompletionBytes) r.completion.resize(kMaxAuditCompletionBytes);
  open_.push_back(std::move(r));
}

RolloutCommitment ScoredRolloutBook::seal(int64_t base_version, int64_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  RolloutCommitment c;
  std::vector<std::string> leaves;
  double sum = 0;
  for (const ScoredRollout& r : open_) {
    leaves.push_back(rollout_leaf(r.prompt_id, completion_hash(r.completion), r.claimed_reward));
    sum += r.claimed_reward;
  }
  c.n = static_cast<int64_t>(open_.size());
  c.digest = leaves_digest(leaves);
  c.claimed_mean = c.n > 0 ? sum / static_cast<double>(c.n) : 0.0;
  sealed_.push_back({base_version, seq, std::move(open_)});
  open_.clear();
  while (sealed_.size() > keep_sealed_) sealed_.pop_front();
  return c;
}

std::optional<std::vector<ScoredRollout>> ScoredRolloutBook::sealed(int64_t base_version, int64_t seq) const {
  std::lock_guard<std::mutex> lk(mu_);
  for (const Sealed& s : sealed_)
    if (s.base_version == base_version && s.seq == seq) return s.rollouts;
  return std::nullopt;
}

}  // namespace meshrl::mesh

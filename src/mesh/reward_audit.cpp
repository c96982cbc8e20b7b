// Draws, re-scoring and the per-node tally. See reward_audit.h.
#include "mesh/reward_audit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include <xxhash.h>

#include "core/splitmix64.h"
#include "mesh/rollout_commitment.h"

namespace meshrl::mesh {

namespace {

uint64_t key_seed(uint64_t secret, const std::string& key, uint64_t purpose) {
  return splitmix64(XXH3_64bits_withSeed(key.data(), key.size(), secret) ^ purpose);
}

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

}  // namespace

bool task_is_shared(const tasks::TaskConfig& task) { return task.kind == "arithmetic" || task.kind == "countdown"; }

bool audit_drawn(uint64_t secret, const std::string& key, double rate) {
  if (rate <= 0) return false;
  if (rate >= 1) return true;
  const double u = static_cast<double>(key_seed(secret, key, 0xA0D1) >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return u < rate;
}

std::vector<int64_t> audit_indices(uint64_t secret, const std::string& key, int64_t n, int64_t k) {
  std::vector<int64_t> out;
  if (n <= 0 || k <= 0) return out;
  if (k >= n) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  // k <= 64 draws without replacement: rejection on a small set is simplest and exact.
  std::set<int64_t> picked;
  uint64_t s = key_seed(secret, key, 0x1D5);
  while (static_cast<int64_t>(picked.size()) < k) {
    s = splitmix64(s);
    picked.insert(static_cast<int64_t>(s % static_cast<uint64_t>(n)));
  }
  return {picked.begin(), picked.end()};
}

AuditOutcome check_audit_answer(const tasks::Task& task, const AuditClaim& claim, const v1::AuditAnswer& answer, double tolerance) {
  auto fail = [](std::string why) { return AuditOutcome{false, std::move(why)}; };
  // Updates always carry samples (admission refuses n_samples < 1), so an empty commitment hides them.
  if (claim.n_scored < 1) return fail("the update committed to no scored rollouts (n_scored " + std::to_string(claim.n_scored) + ")");
  const int64_t n = answer.rollouts_size();
  if (n != claim.n_scored)
    return fail("the answer holds " + std::to_string(n) + " rollouts, the update committed to " + std::to_string(claim.n_scored));
  std::vector<std::string> leaves;
  leaves.reserve(static_cast<size_t>(n));
  double sum = 0;
  for (const v1::ScoredRollout& r : answer.rollouts()) {
    if (r.completion_hash().size() != 32) return fail("a rollout's completion hash is not 32 bytes");
    if (!std::isfinite(r.claimed_reward())) return fail("a claimed reward is not finite");
    leaves.push_back(rollout_leaf(r.prompt_id(), r.completion_hash(), r.claimed_reward()));
    sum += r.claimed_reward();
  }
  if (leaves_digest(leaves) != claim.digest) return fail("the rollouts do not hash to the digest the update committed to");
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  // The header's mean is the node's own mean of the same claims: only rounding may differ.
  if (n > 0 && std::abs(mean - claim.reward_mean) > tolerance + 1e-9 * std::max(1.0, std::abs(mean)))
    return fail("the update reported reward_mean " + fmt(claim.reward_mean) + ", its committed claims average " + fmt(mean));
  for (int64_t i : claim.indices) {
    if (i < 0 || i >= n) return fail("audit index " + std::to_string(i) + " out of range");
    const v1::ScoredRollout& r = answer.rollouts(static_cast<int>(i));
    const std::string where = "rollout " + std::to_string(i) + " (prompt id " + std::to_string(r.prompt_id()) + ")";
    if (r.completion().size() > kMaxAuditCompletionBytes) return fail(where + ": completion longer than " + std::to_string(kMaxAuditCompletionBytes) + " bytes");
    if (completion_hash(r.completion()) != r.completion_hash()) return fail(where + ": the text sent is not the committed completion");
    const tasks::Problem p = task.sample(r.prompt_id());
    auto s = task.score(p, r.completion());
    if (!s.is_ok()) return fail(where + ": the verifier failed: " + s.status().message());
    // Our own verifier call failed (timed out under load, crashed): this rollout proves nothing
    // either way, so it is skipped rather than held against the node. A node never commits a
    // rollout whose verifier failed on its side.
    if (s.value().failed()) continue;
    const double truth = s.value().reward;
    if (std::abs(truth - r.claimed_reward()) > tolerance)
      return fail(where + " '" + p.prompt + "': claimed reward " + fmt(r.claimed_reward()) + ", the verifier gives " + fmt(truth) +
                  " (" + s.value().detail + ")");
  }
  return {true, ""};
}

bool AuditTally::record(const std::string& node, bool passed) {
  Counts& c = nodes_[node];
  if (passed) {
    ++c.passed;
    return false;
  }
  ++c.failed;
  if (!c.excluded && c.failed >= exclude_after_) {
    c.excluded = true;
    return true;
  }
  return false;
}

bool AuditTally::excluded(const std::string& node) const {
  auto it = nodes_.find(node);
  return it != nodes_.end() && it->second.excluded;
}

int64_t AuditTally::failures(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.failed;
}

int64_t AuditTally::passes(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.passed;
}

void AuditTally::restore_excluded(const std::string& node) { nodes_[node].excluded = true; }

}  // namespace meshrl::mesh

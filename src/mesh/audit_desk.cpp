// The audit desk: draws, held updates, tally. See audit_desk.h.
#include "mesh/audit_desk.h"

namespace meshrl::mesh {

AuditDesk::AuditDesk(const MeshSection& m, const tasks::TaskConfig& task, uint64_t secret)
    : rate_(m.audit_rate),
      deadline_s_(m.audit_deadline_s),
      tolerance_(m.audit_tolerance),
      samples_(m.audit_samples),
      exclude_after_(m.audit_exclude_after),
      on_(m.audit_rate > 0 && (task_is_shared(task) || m.audit_private)),
      secret_(secret),
      tally_(m.audit_exclude_after) {}

std::optional<v1::AuditRequest> AuditDesk::hold_if_drawn(const store::UpdateKey& key, const NamedTensors& update, double norm,
                                                         int64_t n_samples, const v1::RewardStats& stats, double now) {
  if (!on_ || !audit_drawn(secret_, key.str(), rate_)) return std::nullopt;
  HeldUpdate held{key, update, norm, n_samples, stats, {}, now + deadline_s_};
  held.claim = {stats.n_scored(), stats.scored_digest(), stats.reward_mean(), audit_indices(secret_, key.str(), stats.n_scored(), samples_)};
  v1::AuditRequest q;
  q.set_base_version(key.base_version);
  q.set_seq(key.seq);
  for (int64_t i : held.claim.indices) q.add_indices(i);
  q.set_deadline_s(deadline_s_);
  held_[key.str()] = std::move(held);
  return q;
}

std::optional<AuditClaim> AuditDesk::claim_of(const std::string& key) const {
  auto it = held_.find(key);
  if (it == held_.end()) return std::nullopt;
  return it->second.claim;
}

AuditOutcome AuditDesk::check(const tasks::Task& task, const AuditClaim& claim, const v1::AuditAnswer& answer) const {
  return check_audit_answer(task, claim, answer, tolerance_);
}

std::optional<HeldUpdate> AuditDesk::take(const std::string& key) {
  auto it = held_.find(key);
  if (it == held_.end()) return std::nullopt;
  HeldUpdate held = std::move(it->second);
  held_.erase(it);
  return held;
}

std::vector<ExpiredAudit> AuditDesk::expire(double now) {
  std::vector<ExpiredAudit> out;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    out.push_back({it->second.key, "no answer to the reward audit within " + std::to_string(static_cast<int>(deadline_s_)) + " s"});
    it = held_.erase(it);
  }
  return out;
}

}  // namespace meshrl::mesh

// The coordinator's side of reward audits: an answer checked and its held update admitted or
// rejected, unanswered audits failed at their deadline, each outcome written to the ledger and the
// node's record. The desk itself (draws, held updates, tally) is audit_desk.h. See coordinator.h.
#include "mesh/coordinator.h"

namespace meshrl::mesh {

using store::UpdateKey;

void Coordinator::record_audit(const std::string& node, bool passed, const std::string& detail) {
  const bool now_excluded = audits_->record(node, passed);
  NodeRecord& nr = members_->record(node);
  nr.name = node;
  ++(passed ? nr.audits_passed : nr.audits_failed);
  (void)store_->ledger().node_event(node, passed ? "audit_passed" : "audit_failed", detail);
  if (now_excluded) {
    nr.excluded = true;
    const std::string why = "failed " + std::to_string(audits_->failures(node)) + " reward audit(s); its updates are refused from now on";
    (void)store_->ledger().node_event(node, "excluded", why);
    log("excluded " + node + ": " + why);
  } else if (!passed) {
    log("flagged " + node + ": reward audit failed (" + std::to_string(audits_->failures(node)) + " of " +
        std::to_string(audits_->exclude_after()) + " before exclusion): " + detail);
  }
}

void Coordinator::expire_audits(double now) {
  for (const ExpiredAudit& e : audits_->expire(now)) {
    (void)reject(e.key, RejectCode::kAuditFailed, e.why, true);
    record_audit(e.key.node, false, e.key.str() + ": " + e.why);
  }
}

v1::AuditVerdict Coordinator::answer_audit(const v1::AuditAnswer& ans) {
  v1::AuditVerdict v;
  const UpdateKey key{ans.name().substr(0, 64), ans.base_version(), ans.seq()};
  std::optional<AuditClaim> claim;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!members_->session_ok(ans.name(), ans.session(), mono_seconds())) {
      v.set_reason(kNotJoinedReason);
      return v;
    }
    claim = audits_->claim_of(key.str());
    if (!claim) {
      v.set_reason("no audit is open for update " + key.str() + " (answered already, past its deadline, or never asked)");
      return v;
    }
  }
  // Re-scoring runs outside the lock: a command task's verifier may take its time limit.
  const AuditOutcome out = audits_->check(*model_.task, *claim, ans);
  std::lock_guard<std::mutex> lk(mu_);
  std::optional<HeldUpdate> held = audits_->take(key.str());
  if (!held) {
    v.set_reason("the audit of " + key.str() + " closed while it was checked (deadline or end of run)");
    return v;
  }
  if (!out.passed) {
    (void)reject(key, RejectCode::kAuditFailed, out.reason, true);
    record_audit(key.node, false, key.str() + ": " + out.reason);
    v.set_reason(out.reason);
    v.set_excluded(audits_->excluded(key.node));
    v.set_code(v.excluded() ? reject_code_name(RejectCode::kExcluded) : reject_code_name(RejectCode::kAuditFailed));
    return v;
  }
  record_audit(key.node, true, key.str() + ": " + std::to_string(claim->indices.size()) + " rollout(s) re-scored");
  v.set_passed(true);
  // The round may have moved on while the update was held: admit it as any late update.
  const Admission a = admit_update(round_->rules(), version_, key.base_version, held->n_samples);
  const RoundEntry e = round_entry(key, a, held->n_samples, &held->stats);
  const BookDecision d = a.accepted ? round_->offer(e) : BookDecision{};
  if (finished_) (void)reject(key, RejectCode::kFinished, "the run has finished at version " + std::to_string(version_), true);
  else if (!a.accepted) (void)reject(key, a.code, a.reason, true);
  else if (!d.accepted) (void)reject(key, d.code, d.reason, true);
  else if (auto st = count_in_round(e, d, held->update, held->norm); !st.is_ok())
    (void)reject(key, RejectCode::kInternal, "aggregate: " + st.message(), true);
  return v;
}

}  // namespace meshrl::mesh

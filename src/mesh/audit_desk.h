// The audit desk: the coordinator's reward audits of updates (reward_audit.h has the check of one
// answer). Decides whether audits run at all (only for a task the coordinator holds too, or with
// [mesh] audit_private), draws which updates and which of their rollouts are audited with a
// secret the nodes cannot predict, holds an audited update out of the round (its decoded tensors,
// acknowledged and spooled) until its answer or its deadline, and keeps the per-node tally that
// excludes a node after [mesh] audit_exclude_after failures.
//
// It writes nothing: the coordinator records each outcome (ledger node events, the NodeRecord),
// rejects a failed update and puts a passed one into the round (coordinator_audits.cpp).
// Not thread-safe (under the coordinator's mutex), except check(), which reads only the task and
// the tolerance and runs outside it (a command task's verifier may take its time limit).
//   build/tests/test_mesh --gtest_filter='AuditDesk*'
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "meshrl.pb.h"
#include "mesh/mesh_config.h"
#include "mesh/named_tensors.h"
#include "mesh/reward_audit.h"
#include "store/ledger.h"
#include "tasks/task.h"

namespace meshrl::mesh {

namespace v1 = ::meshrl::v1;

// An audited update, acknowledged and spooled, held out of the round until its answer passes.
struct HeldUpdate {
  store::UpdateKey key;
  NamedTensors update;
  double norm = 0;
  int64_t n_samples = 0;
  v1::RewardStats stats;
  AuditClaim claim;
  double deadline = 0;  // the caller's monotonic seconds
};

struct ExpiredAudit {
  store::UpdateKey key;
  std::string why;  // "no answer to the reward audit within N s"
};

class AuditDesk {
 public:
  // Audits run when [mesh] audit_rate > 0 and the task is shared (or audit_private). `secret`
  // seeds every draw: drawn per process, so nodes cannot predict which updates or rollouts.
  AuditDesk(const MeshSection& mesh, const tasks::TaskConfig& task, uint64_t secret);

  bool on() const { return on_; }
  // audit_rate asks for audits the task does not allow (a private task without audit_private).
  bool asked_but_off() const { return rate_ > 0 && !on_; }

  // When audits are on and `key` is drawn: holds the update until now + [mesh] audit_deadline_s
  // and returns the request for the node (the drawn rollouts of the n_scored it committed to).
  std::optional<v1::AuditRequest> hold_if_drawn(const store::UpdateKey& key, const NamedTensors& update, double norm,
                                                int64_t n_samples, const v1::RewardStats& stats, double now);
  // The claim of the held update under `key` (by key.str()); nullopt when none is held.
  std::optional<AuditClaim> claim_of(const std::string& key) const;
  // Re-scores the answer's drawn rollouts against the claim ([mesh] audit_tolerance). Thread-safe.
  AuditOutcome check(const tasks::Task& task, const AuditClaim& claim, const v1::AuditAnswer& answer) const;
  // Releases the held update (its answer was checked); nullopt when it is no longer held.
  std::optional<HeldUpdate> take(const std::string& key);
  // Releases the held updates past their deadline (an unanswered audit fails), in key order.
  std::vector<ExpiredAudit> expire(double now);
  void clear() { held_.clear(); }  // the run finished: nothing held enters a round
  int64_t n_held() const { return static_cast<int64_t>(held_.size()); }

  // One outcome into the tally; true when this failure is the one that excludes the node.
  bool record(const std::string& node, bool passed) { return tally_.record(node, passed); }
  bool excluded(const std::string& node) const { return tally_.excluded(node); }
  int64_t failures(const std::string& node) const { return tally_.failures(node); }
  int64_t exclude_after() const { return exclude_after_; }
  void restore_excluded(const std::string& node) { tally_.restore_excluded(node); }

 private:
  double rate_, deadline_s_, tolerance_;
  int64_t samples_, exclude_after_;
  bool on_;
  uint64_t secret_;
  AuditTally tally_;
  std::map<std::string, HeldUpdate> held_;  // by key.str()
};

}  // namespace meshrl::mesh

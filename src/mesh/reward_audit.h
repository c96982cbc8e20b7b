// Reward audit: the coordinator's check that a node's claimed rewards are the task verifier's.
//
// A node commits to its scored rollouts in the update header (rollout_commitment.h). For a drawn
// share of updates ([mesh] audit_rate) the coordinator asks for the rollout summaries and the
// text of k drawn rollouts, then checks, in order: the count and the digest against the
// commitment, the header's reward_mean against the mean of the claims, and for each drawn rollout
// its text against its committed hash and its claimed reward against the verifier's, on the
// problem the coordinator regenerates from the prompt id with the run's task. A failed audit
// flags the node; `exclude_after` failures exclude it (AuditTally).
//
// What it proves and what not: the claims are the verifier's rewards for the committed
// (prompt, completion) pairs. It does not prove the node generated those completions with the
// run's policy or drew the prompts its seed says. Only for tasks the coordinator holds too
// (task_is_shared). Not thread-safe (the coordinator calls it under its mutex). Knows nothing
// about the network or tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meshrl.pb.h"
#include "tasks/task.h"
#include "tasks/task_config.h"

namespace meshrl::mesh {

// Generated tasks (arithmetic, countdown) are the same on every node and the coordinator; jsonl
// and command tasks read files only their node may hold.
bool task_is_shared(const tasks::TaskConfig& task);

// Whether to audit the update `key` (a draw from secret and key, below `rate`), and which k of
// its n committed rollouts (distinct, sorted, all of them when k >= n). The coordinator's secret
// keeps a node from choosing a seq whose draw avoids its lies.
bool audit_drawn(uint64_t secret, const std::string& key, double rate);
std::vector<int64_t> audit_indices(uint64_t secret, const std::string& key, int64_t n, int64_t k);

// What the coordinator holds of an audited update: its header's commitment and reported mean,
// and the indices it asked for.
struct AuditClaim {
  int64_t n_scored = 0;
  std::string digest;
  double reward_mean = 0;
  std::vector<int64_t> indices;
};

struct AuditOutcome {
  bool passed = false;
  std::string reason;  // why not, naming the rollout: "rollout 3 (prompt 'x'): claimed 1, the verifier gives 0 (expected 7, got 8)"
};

// Re-scores the drawn rollouts of `answer` with `task` (task.sample(prompt_id) regenerates each).
// A verifier that fails to score (command task error) fails the audit with its message.
AuditOutcome check_audit_answer(const tasks::Task& task, const AuditClaim& claim, const v1::AuditAnswer& answer, double tolerance);

// Per-node audit record: failures so far and whether the node is excluded.
class AuditTally {
 public:
  explicit AuditTally(int64_t exclude_after) : exclude_after_(exclude_after) {}
  // Records one outcome; true when this failure is the one that excludes the node.
  bool record(const std::string& node, bool passed);
  bool excluded(const std::string& node) const;
  int64_t failures(const std::string& node) const;
  int64_t passes(const std::string& node) const;
  // After a restart: the node was excluded before (its ledger says so).
  void restore_excluded(const std::string& node);

 private:
  struct Counts {
    int64_t passed = 0, failed = 0;
    bool excluded = false;
  };
  int64_t exclude_after_;
  std::map<std::string, Counts> nodes_;
};

}  // namespace meshrl::mesh

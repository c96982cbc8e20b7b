// Membership: who takes part in a run, as the coordinator sees it. Owns each node's lease (the
// session it got at its join, when it was last seen), the Ed25519 key it registered at its last
// join, its NodeRecord (the counters dashboards read), and after a resume whom the run still waits
// for (the nodes of the last round count towards the quorum for one lease; nodes that joined and
// never left keep all_nodes_gone false).
//
// It decides joins (rate per name, protocol, name, run, model, key, a live lease under the same
// name) and which leases expire, and returns what happened; it writes nothing. The coordinator
// writes the ledger's node events (join_refused, join/rejoin, signing_key_changed, lease_expired).
// Knows nothing about updates, tensors or the ledger. Not thread-safe (the coordinator calls it
// under its mutex). Times are the caller's monotonic seconds.
//   build/tests/test_mesh --gtest_filter='Membership*'
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "meshrl.pb.h"
#include "mesh/update_guard.h"
#include "store/ledger.h"

namespace meshrl::mesh {

namespace v1 = ::meshrl::v1;

// What a node is told when it calls with an unknown session or after its lease expired.
inline constexpr const char* kNotJoinedReason = "not joined (unknown session or lease expired); join again";

struct NodeRecord {
  std::string name;
  int64_t updates_applied = 0;
  int64_t updates_rejected = 0;
  int64_t samples_applied = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  v1::NodeProgress last_progress;  // from its last heartbeat or leave
  bool left = false;               // left cleanly after the run finished
  int64_t audits_passed = 0;       // reward audits (reward_audit.h)
  int64_t audits_failed = 0;
  bool excluded = false;           // failed [mesh] audit_exclude_after audits: its updates are refused
};

// Who holds a lease now, and how long ago each renewed it (dashboards; read-only).
struct LeaseView {
  std::string name;
  double last_seen_age_s = 0;
  double joined_age_s = 0;
};

struct JoinDecision {
  bool accepted = false;
  bool rate_limited = false;  // refused before anything was checked: the caller writes nothing
  std::string node;           // the name to log under ("?" when none was given; at most 64 characters)
  std::string reason;         // when refused
  uint64_t session = 0;       // when accepted: odd, never 0
  bool rejoin = false;        // the name had joined before (in this process)
  std::optional<std::string> replaced_key;  // the key a rejoin replaced, when it brought another one
};

struct ExpiredLease {
  std::string name;
  double silent_s = 0;
};

class Membership {
 public:
  // Joins per minute under one name: a node restarting in a loop cannot flood the ledger.
  static constexpr int64_t kMaxJoinsPerMinute = 30;

  explicit Membership(double lease_s) : lease_s_(lease_s), join_rate_(kMaxJoinsPerMinute) {}

  // Refused in this order: over kMaxJoinsPerMinute under the name (rate_limited, counted first),
  // another protocol version, a bad name, another run id or model config hash (when the node
  // names one), no Ed25519 key, a live lease under the same name. Accepted: a new session.
  JoinDecision join(const v1::JoinRequest& req, const std::string& run_id, const std::string& model_config_hash, double now);
  // True when `session` is the live session of `name`; renews its lease.
  bool session_ok(const std::string& name, uint64_t session, double now);
  // A clean goodbye: drops the lease, keeps the record (left, its last progress).
  void leave(const std::string& name, const v1::NodeProgress& progress);
  // Drops the leases silent for more than lease_s, in name order.
  std::vector<ExpiredLease> expire(double now);

  // After a resume: the nodes of the last round (`expected`) count towards the quorum until
  // `grace_until`; `not_left` (joined and never left, says the ledger) keep all_nodes_gone false.
  void restore(std::set<std::string> expected, std::set<std::string> not_left, double grace_until);
  // The count a round's quorum is judged against: the live leases, during the grace also the
  // expected nodes not back yet, less the live nodes `excluded` says count for nothing.
  int64_t quorum_nodes(double now, const std::function<bool(const std::string&)>& excluded) const;
  // Every node that joined, was expected or never left has left cleanly, and no lease is live.
  bool all_nodes_gone() const;

  int64_t n_online() const { return static_cast<int64_t>(members_.size()); }
  std::vector<LeaseView> leases(double now) const;
  // "" when the node registered none.
  const std::string& signing_key(const std::string& name) const;
  // The node's record, created empty (name unset) when new; find_record never creates.
  NodeRecord& record(const std::string& name) { return records_[name]; }
  NodeRecord* find_record(const std::string& name);
  const std::map<std::string, NodeRecord>& records() const { return records_; }

 private:
  struct Lease {
    uint64_t session = 0;
    double last_seen = 0;
    double joined_at = 0;
  };
  double lease_s_;
  RateLimiter join_rate_;                            // joins per name per minute
  std::map<std::string, Lease> members_;             // live leases
  std::map<std::string, std::string> signing_keys_;  // node -> Ed25519 public key of its last join
  std::map<std::string, NodeRecord> records_;
  std::set<std::string> ever_joined_;                // in this process
  std::set<std::string> expected_;                   // after a resume: the last round's nodes
  std::set<std::string> not_left_;                   // after a resume: joined and not left
  double grace_until_ = 0;
};

}  // namespace meshrl::mesh

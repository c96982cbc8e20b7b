// RunSnapshot: what the dashboard, /metrics and `meshrl report` show about a run at one instant,
// as plain values. Filled by coordinator_snapshot.h from the coordinator and its ledger; rendered by
// prometheus_text.h and state_json.h. Knows nothing about tensors, gRPC or HTTP.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace meshrl::web {

// One committed version (one line of RUN_DIR/metrics.jsonl, version_log.h).
struct VersionPoint {
  int64_t version = 0;
  double seconds = 0;            // since the coordinator started
  std::string closed_by;         // quorum, deadline, async
  int64_t n_updates = 0;
  double reward_mean = 0;        // mean over the applied updates' reported rewards
  double kl_mean = 0;
  double entropy_mean = 0;
  double mean_staleness = 0;
  std::optional<double> pass_at_1;  // when the coordinator evaluated at this version
  double bytes_up = 0;           // cumulative, coordinator side
  double bytes_down = 0;
  double bytes_dataparallel = 0; // cumulative fp32 data-parallel equivalent of the applied work
};

// A node as the coordinator sees it.
struct NodeView {
  std::string name;
  std::string state;               // online | straggling | dropped | left | excluded (failed reward audits)
  int64_t version_held = -1;       // from its last heartbeat; -1 before the first
  double last_seen_age_s = -1;     // since its last heartbeat (online nodes only)
  double last_update_age_s = -1;   // since its last update arrived; -1 before the first
  double bytes_up = 0, bytes_down = 0;
  int64_t updates_applied = 0, updates_pending = 0, updates_rejected = 0;
  std::map<std::string, int64_t> rejected_by_reason;  // reason class (update_reason_class) -> count
  int64_t inner_steps = 0;
  double reward_mean = 0;          // of its last inner step
  double samples_per_s = 0;        // applied completions / its wall time
};

struct EventView {
  double at = 0;  // Unix seconds
  std::string node, event, detail;
};

struct RunSnapshot {
  std::string run_id, mode, hash;
  int64_t version = 0;
  int64_t rounds_target = 0;
  bool finished = false;
  double lease_s = 0;
  int64_t inner_steps = 0;             // H per update
  int64_t param_count = 0;
  std::map<std::string, int64_t> rounds_by_closed_by;  // committed rounds after version 0
  // Ledger update rows by (outcome, reason class); outcome applied | pending | rejected, the reason
  // empty unless rejected.
  std::map<std::pair<std::string, std::string>, int64_t> updates;
  double ledger_update_bytes = 0;       // sum of the ledger's recorded update sizes
  int64_t samples_applied = 0;
  double bytes_received = 0;            // every update payload byte received (refused ones too)
  double bytes_sent_weights = 0, bytes_sent_broadcast = 0;
  double bytes_dataparallel = 0;
  // Staleness of applied updates (applied_version - 1 - base_version), Prometheus-style buckets.
  std::vector<double> staleness_le;     // upper bounds; +Inf implied
  std::vector<int64_t> staleness_bucket_counts;  // non-cumulative, one per bound plus the +Inf one
  double staleness_sum = 0;
  int64_t staleness_count = 0;
  std::vector<NodeView> nodes;
  std::vector<VersionPoint> versions;
  std::vector<EventView> events;        // the latest, oldest first
  double now_unix = 0;
};

}  // namespace meshrl::web

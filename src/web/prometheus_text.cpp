#include "web/prometheus_text.h"

#include <map>

namespace meshrl::web {

namespace {

using Family = PrometheusFamily;

}  // namespace

std::string prometheus_text(const RunSnapshot& s) {
  std::string o;
  Family(o, "meshrl_info", "gauge", "The run this coordinator serves (always 1).").sample(1, {"run_id", s.run_id, "mode", s.mode});
  Family(o, "meshrl_policy_version", "gauge", "Current committed policy version.").sample(static_cast<double>(s.version));
  Family(o, "meshrl_run_finished", "gauge", "1 once the last version of the run is committed.").sample(s.finished ? 1 : 0);
  {
    Family f(o, "meshrl_rounds_committed_total", "counter", "Versions committed after version 0, by what closed the round.");
    for (const auto& [by, n] : s.rounds_by_closed_by) f.sample(static_cast<double>(n), {"closed_by", by});
  }
  {
    Family f(o, "meshrl_updates_total", "counter", "Updates in the ledger by outcome (applied, pending, rejected) and rejection reason.");
    for (const auto& [k, n] : s.updates) f.sample(static_cast<double>(n), {"outcome", k.first, "reason", k.second});
  }
  Family(o, "meshrl_ledger_update_bytes_total", "counter", "Payload bytes of the updates recorded in the ledger.")
      .sample(s.ledger_update_bytes);
  Family(o, "meshrl_samples_applied_total", "counter", "Completions behind the applied updates.").sample(static_cast<double>(s.samples_applied));
  Family(o, "meshrl_bytes_received_total", "counter", "Update payload bytes received from nodes, refused ones included.")
      .sample(s.bytes_received);
  {
    Family f(o, "meshrl_bytes_sent_total", "counter", "Bytes served to nodes: full weights (joins, re-syncs) and broadcast deltas.");
    f.sample(s.bytes_sent_weights, {"kind", "weights"});
    f.sample(s.bytes_sent_broadcast, {"kind", "broadcast"});
  }
  Family(o, "meshrl_bytes_dataparallel_equivalent_total", "counter",
         "Bytes synchronous fp32 data-parallel training would have moved for the applied inner steps.")
      .sample(s.bytes_dataparallel);
  {
    Family f(o, "meshrl_nodes", "gauge", "Nodes that ever joined, by state.");
    std::map<std::string, int64_t> by_state = {{"online", 0}, {"straggling", 0}, {"dropped", 0}, {"left", 0}};
    for (const NodeView& n : s.nodes) ++by_state[n.state];
    for (const auto& [state, n] : by_state) f.sample(static_cast<double>(n), {"state", state});
  }
  {
    Family f(o, "meshrl_node_policy_version", "gauge", "Version each node last reported holding.");
    for (const NodeView& n : s.nodes) f.sample(static_cast<double>(n.version_held), {"node", n.name});
  }
  {
    Family f(o, "meshrl_node_updates_total", "counter", "Each node's updates in the ledger by outcome.");
    for (const NodeView& n : s.nodes) {
      f.sample(static_cast<double>(n.updates_applied), {"node", n.name, "outcome", "applied"});
      f.sample(static_cast<double>(n.updates_pending), {"node", n.name, "outcome", "pending"});
      f.sample(static_cast<double>(n.updates_rejected), {"node", n.name, "outcome", "rejected"});
    }
  }
  {
    Family f(o, "meshrl_node_bytes_received_total", "counter", "Update bytes received from each node.");
    for (const NodeView& n : s.nodes) f.sample(n.bytes_up, {"node", n.name});
  }
  {
    Family f(o, "meshrl_node_bytes_sent_total", "counter", "Weight and broadcast bytes sent to each node.");
    for (const NodeView& n : s.nodes) f.sample(n.bytes_down, {"node", n.name});
  }
  {
    Family f(o, "meshrl_update_staleness", "histogram", "Staleness of applied updates in versions (applied at v+1 on base b: v - b).");
    f.histogram(s.staleness_le, s.staleness_bucket_counts, s.staleness_sum);
  }
  if (!s.versions.empty()) {
    const VersionPoint& last = s.versions.back();
    Family(o, "meshrl_reward_mean", "gauge", "Mean reward reported with the updates of the latest version.").sample(last.reward_mean);
    Family(o, "meshrl_kl_mean", "gauge", "Mean KL to the reference reported with the updates of the latest version.").sample(last.kl_mean);
    Family(o, "meshrl_entropy_mean", "gauge", "Mean policy entropy reported with the updates of the latest version.").sample(last.entropy_mean);
  }
  for (auto it = s.versions.rbegin(); it != s.versions.rend(); ++it) {
    if (!it->pass_at_1) continue;
    Family(o, "meshrl_pass_at_1", "gauge", "Held-out pass@1 at the latest evaluated version.").sample(*it->pass_at_1);
    break;
  }
  return o;
}

}  // namespace meshrl::web

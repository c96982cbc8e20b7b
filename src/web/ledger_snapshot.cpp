#include "web/ledger_snapshot.h"

#include <chrono>
#include <map>

namespace meshrl::web {

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

constexpr size_t kEventsShown = 40;

}  // namespace

std::string update_reason_class(const std::string& reason) {
  auto has = [&](const char* s) { return reason.find(s) != std::string::npos; };
  // Reward audits (mesh/reward_audit.h) write their typed code first.
  if (reason.rfind("audit_failed:", 0) == 0) return "audit_failed";
  if (reason.rfind("excluded:", 0) == 0) return "excluded";
  if (has("too old")) return "stale";
  if (has("does not exist yet")) return "future_base";
  if (has("finished")) return "run_finished";
  if (has("n_samples")) return "bad_samples";
  if (has("spooled payload lost")) return "lost_payload";
  return "invalid_payload";
}

RunSnapshot ledger_snapshot(const store::Ledger& ledger, const mesh::MeshSection& m, int64_t param_count,
                            std::vector<VersionPoint> versions) {
  RunSnapshot s;
  s.now_unix = unix_now();
  s.mode = m.mode;
  s.rounds_target = m.rounds;
  s.lease_s = m.lease_s;
  s.inner_steps = m.inner_steps;
  s.param_count = param_count;
  s.version = ledger.current_version();
  s.hash = ledger.current_hash();
  s.finished = s.version >= m.rounds;
  for (const store::RoundRow& r : ledger.rounds())
    if (r.version > 0) ++s.rounds_by_closed_by[r.closed_by];

  // Synchronous fp32 data parallelism for the same work: each applied update stands for H inner
  // steps of one node, and each step would send the gradient up and the average down (2 x 4P bytes).
  const double dp_per_update = static_cast<double>(m.inner_steps) * 2.0 * 4.0 * static_cast<double>(param_count);
  s.staleness_le = {0, 1, 2, 3, 5, 10};
  s.staleness_bucket_counts.assign(s.staleness_le.size() + 1, 0);
  std::map<std::string, NodeView> nodes;
  std::map<int64_t, int64_t> applied_at;           // version -> updates applied there
  for (const store::UpdateRow& u : ledger.updates()) {
    NodeView& n = nodes[u.key.node];
    n.name = u.key.node;
    n.last_update_age_s = s.now_unix - u.received_at;  // rows come in arrival order: the last one wins
    s.ledger_update_bytes += static_cast<double>(u.bytes);
    n.bytes_up += static_cast<double>(u.bytes);
    if (u.state == store::UpdateState::kApplied) {
      ++s.updates[{"applied", ""}];
      ++n.updates_applied;
      s.samples_applied += u.n_samples;
      n.samples_per_s += static_cast<double>(u.n_samples);  // a count until the caller knows the node's wall time
      const int64_t v = u.applied_version.value_or(0);
      ++applied_at[v];
      const int64_t staleness = v - 1 - u.key.base_version;
      size_t b = 0;
      while (b < s.staleness_le.size() && static_cast<double>(staleness) > s.staleness_le[b]) ++b;
      ++s.staleness_bucket_counts[b];
      s.staleness_sum += static_cast<double>(staleness);
      ++s.staleness_count;
    } else if (u.state == store::UpdateState::kReceived) {
      ++s.updates[{"pending", ""}];
      ++n.updates_pending;
    } else {
      const std::string why = update_reason_class(u.reason);
      ++s.updates[{"rejected", why}];
      ++n.updates_rejected;
      ++n.rejected_by_reason[why];
    }
  }
  int64_t applied_total = 0;
  for (const auto& [v, k] : applied_at) applied_total += k;
  s.bytes_dataparallel = static_cast<double>(applied_total) * dp_per_update;

  s.versions = std::move(versions);
  int64_t cum = 0;
  auto it = applied_at.begin();
  for (VersionPoint& p : s.versions) {
    for (; it != applied_at.end() && it->first <= p.version; ++it) cum += it->second;
    p.bytes_dataparallel = static_cast<double>(cum) * dp_per_update;
  }

  std::vector<store::NodeEvent> ev = ledger.node_events();
  for (const store::NodeEvent& e : ev) {
    if (e.event != "join" && e.event != "rejoin" && e.event != "leave" && e.event != "lease_expired") continue;
    NodeView& n = nodes[e.node];
    n.name = e.node;
    n.state = e.event == "leave" ? "left" : e.event == "lease_expired" ? "dropped" : "online";
  }
  // A node excluded by reward audits stays excluded whatever its connection does.
  for (const store::NodeEvent& e : ev)
    if (e.event == "excluded") {
      nodes[e.node].name = e.node;
      nodes[e.node].state = "excluded";
    }
  for (auto& [name, n] : nodes) {
    if (n.state.empty()) n.state = "dropped";
    s.nodes.push_back(n);
  }
  const size_t from = ev.size() > kEventsShown ? ev.size() - kEventsShown : 0;
  for (size_t i = from; i < ev.size(); ++i) s.events.push_back({ev[i].at, ev[i].node, ev[i].event, ev[i].detail});
  return s;
}

}  // namespace meshrl::web

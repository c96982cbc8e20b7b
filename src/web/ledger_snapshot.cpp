#include "web/ledger_snapshot.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

namespace meshrl::web {

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A sum of node-claimed counts, as a counter: clamped rather than wrapped.
int64_t clamp_count(double x) {
  if (!(x > 0)) return 0;
  return x >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(x);
}

}  // namespace

const store::Ledger::ReasonClasses& update_reason_classes() {
  static const store::Ledger::ReasonClasses kClasses = [] {
    store::Ledger::ReasonClasses c;
    // The coordinator writes "<code>: <detail>" (mesh/reject_code.h); the code is the class. Listed
    // here rather than parsed, so that the labels stay a fixed, known set.
    for (const char* code : {"protocol", "size", "truncated", "wrong_run", "bad_signature", "replay", "stale", "malformed",
                             "shape", "not_finite", "norm", "rate_limited", "internal", "audit_failed", "excluded", "claim",
                             "one_vote", "superseded", "seq_ahead"})
      c.rules.push_back({std::string(code) + ":", true, code});
    c.rules.push_back({"finished:", true, "run_finished"});
    // Reasons without a code (a run finished under a pending update; older ledgers), by their words.
    c.rules.push_back({"too old", false, "stale"});
    c.rules.push_back({"does not exist yet", false, "future_base"});
    c.rules.push_back({"finished", false, "run_finished"});
    c.rules.push_back({"n_samples", false, "bad_samples"});
    c.rules.push_back({"spooled payload lost", false, "lost_payload"});
    c.otherwise = "invalid_payload";
    return c;
  }();
  return kClasses;
}

std::string update_reason_class(const std::string& reason) {
  for (const auto& r : update_reason_classes().rules)
    if (r.prefix ? reason.rfind(r.text, 0) == 0 : reason.find(r.text) != std::string::npos) return r.label;
  return update_reason_classes().otherwise;
}

std::string bounded_text(std::string s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  static constexpr std::string_view kMark = "...";
  size_t cut = max_bytes > kMark.size() ? max_bytes - kMark.size() : 0;
  // Back off continuation bytes (10xxxxxx) so that no character is split.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  return s.append(kMark.substr(0, std::min(kMark.size(), max_bytes)));
}

RunSnapshot ledger_snapshot(const store::Ledger& ledger, const RunShape& run, std::vector<VersionPoint> versions) {
  RunSnapshot s;
  s.now_unix = unix_now();
  s.mode = run.mode;
  s.rounds_target = run.rounds;
  s.lease_s = run.lease_s;
  s.inner_steps = run.inner_steps;
  s.param_count = run.param_count;
  s.version = ledger.current_version();
  s.hash = ledger.current_hash();
  s.finished = s.version >= run.rounds;
  for (const auto& [closed_by, n] : ledger.rounds_by_closed_by()) s.rounds_by_closed_by[closed_by] = n;

  std::map<std::string, NodeView> nodes;
  auto node = [&](const std::string& name) -> NodeView& {
    NodeView& n = nodes[name];
    n.name = bounded_text(name);
    return n;
  };
  std::map<std::string, double> last_received;  // node -> its latest update's arrival
  for (const store::Ledger::UpdateTally& t : ledger.update_tallies(update_reason_classes())) {
    NodeView& n = node(t.node);
    double& last = last_received[t.node];
    last = std::max(last, t.last_received_at);
    s.ledger_update_bytes += t.bytes;
    n.bytes_up += t.bytes;
    if (t.state == store::UpdateState::kApplied) {
      s.updates[{"applied", ""}] += t.count;
      n.updates_applied += t.count;
      s.samples_applied = clamp_count(static_cast<double>(s.samples_applied) + t.n_samples);
      n.samples_per_s += t.n_samples;  // a count until the caller knows the node's wall time
    } else if (t.state == store::UpdateState::kReceived) {
      s.updates[{"pending", ""}] += t.count;
      n.updates_pending += t.count;
    } else {
      s.updates[{"rejected", t.reason_class}] += t.count;
      n.updates_rejected += t.count;
      n.rejected_by_reason[t.reason_class] += t.count;
    }
  }
  for (const auto& [name, at] : last_received) nodes[name].last_update_age_s = s.now_unix - at;

  s.staleness_le = {0, 1, 2, 3, 5, 10};
  s.staleness_bucket_counts.assign(s.staleness_le.size() + 1, 0);
  for (const auto& [staleness, k] : ledger.applied_staleness_counts()) {
    size_t b = 0;
    while (b < s.staleness_le.size() && static_cast<double>(staleness) > s.staleness_le[b]) ++b;
    s.staleness_bucket_counts[b] += k;
    s.staleness_sum += static_cast<double>(staleness) * static_cast<double>(k);
    s.staleness_count += k;
  }

  // Synchronous fp32 data parallelism for the same work: each applied update stands for H inner
  // steps of one node, and each step would send the gradient up and the average down (2 x 4P bytes).
  const double dp_per_update = static_cast<double>(run.inner_steps) * 2.0 * 4.0 * static_cast<double>(run.param_count);
  const auto applied_total = s.updates.find({"applied", ""});
  s.bytes_dataparallel = applied_total == s.updates.end() ? 0 : static_cast<double>(applied_total->second) * dp_per_update;
  s.versions = std::move(versions);
  std::vector<int64_t> at;
  for (const VersionPoint& p : s.versions) at.push_back(p.version);
  const std::vector<int64_t> applied = ledger.applied_through(at);
  for (size_t i = 0; i < s.versions.size(); ++i) s.versions[i].bytes_dataparallel = static_cast<double>(applied[i]) * dp_per_update;

  for (const store::NodeEvent& e : ledger.latest_event_per_node({"join", "rejoin", "leave", "lease_expired"}))
    node(e.node).state = e.event == "leave" ? "left" : e.event == "lease_expired" ? "dropped" : "online";
  // A node excluded by reward audits stays excluded whatever its connection does.
  for (const store::NodeEvent& e : ledger.latest_event_per_node({"excluded"})) node(e.node).state = "excluded";
  for (auto& [name, n] : nodes) {
    if (n.state.empty()) n.state = "dropped";
    s.nodes.push_back(n);
  }
  // One more character than shown, so that bounded_text sees (and marks) every cut.
  for (store::NodeEvent& e : ledger.latest_node_events(kEventsShown, static_cast<int64_t>(kTextShownBytes) + 1))
    s.events.push_back({e.at, bounded_text(std::move(e.node)), bounded_text(std::move(e.event)), bounded_text(std::move(e.detail))});
  return s;
}

}  // namespace meshrl::web

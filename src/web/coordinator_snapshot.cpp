#include "web/coordinator_snapshot.h"

#include <map>

#include "web/ledger_snapshot.h"

namespace meshrl::web {

VersionPoint version_point(const mesh::VersionReport& r) {
  VersionPoint p;
  p.version = r.version;
  p.seconds = r.seconds;
  p.closed_by = r.closed_by;
  p.n_updates = r.n_updates;
  p.reward_mean = r.reward_mean;
  p.kl_mean = r.kl_mean;
  p.entropy_mean = r.entropy_mean;
  p.mean_staleness = r.mean_staleness;
  p.pass_at_1 = r.pass_at_1;
  p.bytes_up = static_cast<double>(r.bytes_up);
  p.bytes_down = static_cast<double>(r.bytes_down);
  return p;
}

RunShape run_shape(const mesh::MeshSection& m, int64_t param_count) {
  return {m.mode, m.rounds, m.lease_s, m.inner_steps, param_count};
}

RunSnapshot coordinator_snapshot(mesh::Coordinator& c, const VersionLog& log) {
  // The coordinator's lock spans commit_round and the on_version callback that appends to the log,
  // so every version up to c.version() is in the log; a round closing meanwhile adds v + 1 to the
  // ledger (and maybe the log) and is left out, so the curves and the version always agree.
  const int64_t v = c.version();
  const std::string hash = c.hash();
  std::vector<VersionPoint> points = log.points();
  std::erase_if(points, [v](const VersionPoint& p) { return p.version > v; });
  points = thin_points(std::move(points), kVersionsLatest, kVersionsHistory);
  RunSnapshot s = ledger_snapshot(c.store().ledger(), run_shape(c.config().mesh, c.param_count()), std::move(points));
  s.version = v;
  s.hash = hash;
  s.run_id = c.run_id();
  s.finished = c.finished();
  s.bytes_received = static_cast<double>(c.bytes_up());
  s.bytes_sent_weights = static_cast<double>(c.bytes_down_full());
  s.bytes_sent_broadcast = static_cast<double>(c.bytes_down()) - s.bytes_sent_weights;

  // Membership from the coordinator: who holds a lease now, what each last reported.
  std::map<std::string, mesh::Coordinator::LeaseView> leases;
  for (const auto& l : c.leases()) leases[l.name] = l;
  const auto records = c.nodes();
  for (NodeView& n : s.nodes) {
    const double samples = n.samples_per_s;  // ledger_snapshot left the applied count here
    n.samples_per_s = 0;
    if (auto r = records.find(n.name); r != records.end()) {
      const v1::NodeProgress& p = r->second.last_progress;
      n.bytes_up = static_cast<double>(r->second.bytes_up);
      n.bytes_down = static_cast<double>(r->second.bytes_down);
      n.inner_steps = p.inner_steps();
      n.reward_mean = p.reward_mean();
      if (p.wall_seconds() > 0) {  // it has reported at least once
        n.version_held = p.version();
        n.samples_per_s = samples / p.wall_seconds();
      }
      n.state = r->second.left ? "left" : "dropped";
    } else {
      n.state = "dropped";  // known to the ledger from before a restart, not back yet
    }
    if (auto l = leases.find(n.name); l != leases.end()) {
      n.last_seen_age_s = l->second.last_seen_age_s;
      // Online, but silent for half a lease or more than a version behind: it holds rounds back.
      const bool behind = n.version_held >= 0 && n.version_held < s.version - 1;
      n.state = (n.last_seen_age_s > s.lease_s / 2 || behind) ? "straggling" : "online";
    }
    if (auto r = records.find(n.name); r != records.end() && r->second.excluded) n.state = "excluded";  // reward audits
  }
  // Joined but nothing in the ledger yet (no update, no event written yet): still a node.
  for (const auto& [name, r] : records) {
    bool known = false;
    for (const NodeView& n : s.nodes) known = known || n.name == name;
    if (known) continue;
    NodeView n;
    n.name = name;
    n.state = leases.count(name) ? "online" : (r.left ? "left" : "dropped");
    n.bytes_down = static_cast<double>(r.bytes_down);
    s.nodes.push_back(n);
  }
  return s;
}

}  // namespace meshrl::web

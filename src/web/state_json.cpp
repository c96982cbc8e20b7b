#include "web/state_json.h"

namespace meshrl::web {

nlohmann::json version_point_json(const VersionPoint& p) {
  nlohmann::json j = {{"version", p.version},       {"seconds", p.seconds},
                      {"closed_by", p.closed_by},   {"n_updates", p.n_updates},
                      {"reward_mean", p.reward_mean}, {"kl_mean", p.kl_mean},
                      {"entropy_mean", p.entropy_mean}, {"mean_staleness", p.mean_staleness},
                      {"bytes_up", p.bytes_up},     {"bytes_down", p.bytes_down},
                      {"bytes_dataparallel", p.bytes_dataparallel}};
  j["pass_at_1"] = p.pass_at_1 ? nlohmann::json(*p.pass_at_1) : nlohmann::json();
  return j;
}

nlohmann::json state_json(const RunSnapshot& s) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeView& n : s.nodes)
    nodes.push_back({{"name", n.name},
                     {"state", n.state},
                     {"version_held", n.version_held},
                     {"last_seen_age_s", n.last_seen_age_s},
                     {"last_update_age_s", n.last_update_age_s},
                     {"bytes_up", n.bytes_up},
                     {"bytes_down", n.bytes_down},
                     {"updates_applied", n.updates_applied},
                     {"updates_pending", n.updates_pending},
                     {"updates_rejected", n.updates_rejected},
                     {"rejected_by_reason", n.rejected_by_reason},
                     {"inner_steps", n.inner_steps},
                     {"reward_mean", n.reward_mean},
                     {"samples_per_s", n.samples_per_s}});
  nlohmann::json versions = nlohmann::json::array();
  for (const VersionPoint& p : s.versions) versions.push_back(version_point_json(p));
  nlohmann::json events = nlohmann::json::array();
  for (const EventView& e : s.events) events.push_back({{"at", e.at}, {"node", e.node}, {"event", e.event}, {"detail", e.detail}});
  nlohmann::json updates = nlohmann::json::array();
  for (const auto& [k, n] : s.updates) updates.push_back({{"outcome", k.first}, {"reason", k.second}, {"count", n}});
  nlohmann::json staleness = nlohmann::json::array();
  for (size_t i = 0; i < s.staleness_bucket_counts.size(); ++i)
    staleness.push_back({{"le", i < s.staleness_le.size() ? nlohmann::json(s.staleness_le[i]) : nlohmann::json("+Inf")},
                         {"count", s.staleness_bucket_counts[i]}});
  return {{"run_id", s.run_id},
          {"mode", s.mode},
          {"version", s.version},
          {"hash", s.hash},
          {"rounds_target", s.rounds_target},
          {"finished", s.finished},
          {"lease_s", s.lease_s},
          {"inner_steps", s.inner_steps},
          {"param_count", s.param_count},
          {"rounds_by_closed_by", s.rounds_by_closed_by},
          {"updates", updates},
          {"samples_applied", s.samples_applied},
          {"bytes_received", s.bytes_received},
          {"bytes_sent_weights", s.bytes_sent_weights},
          {"bytes_sent_broadcast", s.bytes_sent_broadcast},
          {"bytes_dataparallel", s.bytes_dataparallel},
          {"staleness", staleness},
          {"nodes", nodes},
          {"versions", versions},
          {"events", events},
          {"now_unix", s.now_unix}};
}

}  // namespace meshrl::web

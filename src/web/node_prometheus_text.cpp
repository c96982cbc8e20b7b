#include "web/node_prometheus_text.h"

#include "web/prometheus_family.h"

namespace meshrl::web {

std::string node_prometheus_text(const mesh::NodeCounters& c) {
  using F = PrometheusFamily;
  const std::string& n = c.name;
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  std::string o;
  F(o, "meshrl_node_info", "gauge", "The node and the run it joined (always 1).").sample(1, {"node", n, "run_id", c.run_id});
  F(o, "meshrl_node_policy_version", "gauge", "Version this node's weights are on (-1 before the first download).")
      .sample(d(c.policy_version), {"node", n});
  F(o, "meshrl_node_rounds_total", "counter", "Updates this node cut, sent and had answered (accepted + rejected).")
      .sample(d(c.rounds), {"node", n});
  F(o, "meshrl_node_updates_accepted_total", "counter", "Updates the coordinator accepted when they were submitted.").sample(d(c.updates_accepted), {"node", n});
  {
    F f(o, "meshrl_node_updates_rejected_total", "counter", "Updates the coordinator refused, by its reject code.");
    for (const auto& [reason, k] : c.updates_rejected) f.sample(d(k), {"node", n, "reason", reason});
  }
  F(o, "meshrl_node_inner_steps_total", "counter", "Inner GRPO steps taken.").sample(d(c.inner_steps), {"node", n});
  F(o, "meshrl_node_rollouts_total", "counter", "Completions sampled and scored in inner steps.").sample(d(c.rollouts), {"node", n});
  F(o, "meshrl_node_bytes_uploaded_total", "counter", "Update payload bytes sent to the coordinator and answered (retries not counted).")
      .sample(c.bytes_uploaded, {"node", n});
  {
    F f(o, "meshrl_node_bytes_downloaded_total", "counter", "Bytes received from the coordinator: full weights and broadcast deltas.");
    f.sample(c.bytes_downloaded_weights, {"node", n, "kind", "weights"});
    f.sample(c.bytes_downloaded_broadcast, {"node", n, "kind", "broadcast"});
  }
  F(o, "meshrl_node_full_downloads_total", "counter", "Full-weight downloads (join, or when the broadcast path failed).")
      .sample(d(c.full_downloads), {"node", n});
  F(o, "meshrl_node_broadcasts_applied_total", "counter", "Broadcast deltas applied and verified by hash.")
      .sample(d(c.broadcasts_applied), {"node", n});
  F(o, "meshrl_node_reward_mean", "gauge", "Mean reward of the last inner step.").sample(c.reward_mean, {"node", n});
  F(o, "meshrl_node_kl", "gauge", "KL to the reference in the last inner step.").sample(c.kl, {"node", n});
  F(o, "meshrl_node_entropy", "gauge", "Policy entropy (nats/token) in the last inner step.").sample(c.entropy, {"node", n});
  F(o, "meshrl_node_tokens_per_second", "gauge", "Completion tokens per second of the last inner step.").sample(c.tokens_per_s, {"node", n});
  F(o, "meshrl_node_compute_seconds_total", "counter", "Seconds spent in inner steps.").sample(c.compute_seconds, {"node", n});
  F(o, "meshrl_node_idle_seconds_total", "counter", "Seconds waiting on the network (uploads, the next version).")
      .sample(c.idle_seconds, {"node", n});
  F(o, "meshrl_node_inner_step_seconds", "histogram", "Wall time of one inner step (generation, scoring, update).")
      .histogram(c.step_seconds_le, c.step_seconds_counts, c.step_seconds_sum, {"node", n});
  return o;
}

}  // namespace meshrl::web

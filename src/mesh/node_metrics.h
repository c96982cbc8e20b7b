// NodeMetrics: what a running node counts for its /metrics endpoint (`meshrl node --http PORT`,
// rendered by web/node_prometheus_text.h): rounds, updates accepted and rejected by reason, bytes
// up and down, rollouts, inner steps and their duration, the version held, the last step's reward.
// The node loop (node.cpp) writes it from the trainer, uploader and fetcher threads; the HTTP
// thread reads a copy. Torch-free and HTTP-free: plain values behind one mutex.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace meshrl::mesh {

struct NodeCounters {
  std::string name, run_id;
  int64_t policy_version = -1;          // the version the node's weights are on (-1 before the first download)
  // A round, from the node's side: one update cut, sent and answered by the coordinator. So
  // rounds == updates_accepted + the sum of updates_rejected.
  int64_t rounds = 0;
  int64_t updates_accepted = 0;
  std::map<std::string, int64_t> updates_rejected;  // by the reply's reject code (mesh/reject_code.h)
  int64_t inner_steps = 0;
  int64_t rollouts = 0;                 // completions sampled and scored in inner steps
  double bytes_uploaded = 0;            // update payloads the coordinator answered (each counted once, retries not)
  double bytes_downloaded_weights = 0;  // full-weight downloads (join, re-sync)
  double bytes_downloaded_broadcast = 0;  // broadcast deltas applied
  int64_t full_downloads = 0, broadcasts_applied = 0;
  double reward_mean = 0, kl = 0, entropy = 0, tokens_per_s = 0;  // of the last inner step
  double compute_seconds = 0;           // in inner steps
  double idle_seconds = 0;              // waiting on the network (uploads, the next version)
  // Inner-step wall time as a histogram: counts per upper bound, the last one for +Inf (not cumulative).
  std::vector<double> step_seconds_le = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  std::vector<int64_t> step_seconds_counts = std::vector<int64_t>(12, 0);
  double step_seconds_sum = 0;

  void add_step_seconds(double s) {
    size_t b = 0;
    while (b < step_seconds_le.size() && s > step_seconds_le[b]) ++b;
    ++step_seconds_counts[b];
    step_seconds_sum += s;
  }
};

class NodeMetrics {
 public:
  NodeCounters read() const {
    std::lock_guard<std::mutex> lk(mu_);
    return c_;
  }
  // f(NodeCounters&) under the lock; keep it to a few assignments.
  template <class F>
  void update(F&& f) {
    std::lock_guard<std::mutex> lk(mu_);
    f(c_);
  }

 private:
  mutable std::mutex mu_;
  NodeCounters c_;
};

}  // namespace meshrl::mesh

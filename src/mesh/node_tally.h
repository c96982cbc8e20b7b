// NodeTally: what a running node counts, in one place behind one lock: its report (NodeReport,
// returned by run_node), the /metrics counters (node_metrics.h, when the caller keeps them), the
// progress its heartbeats and its leave carry, and the inner steps' statistics since the last
// update was cut (KL, entropy, verifier failures: signed into the next update's header).
// Written from the trainer, uploader, fetcher and heartbeat threads; every method is thread-safe.
// Knows nothing about the network, codecs or the weights.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "meshrl.pb.h"
#include "mesh/node_metrics.h"
#include "rl/trainer.h"
#include "tasks/verifier_failures.h"

namespace meshrl::mesh {

namespace v1 = ::meshrl::v1;

// Seconds on the steady clock: every duration and deadline a node measures.
inline double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct NodeReport {
  int64_t final_version = -1;
  std::string final_hash;              // this node's own content hash of its final version
  int64_t inner_steps = 0;
  int64_t updates_sent = 0;
  int64_t updates_accepted = 0;
  int64_t full_downloads = 0;
  int64_t broadcasts_applied = 0;
  uint64_t bytes_up = 0, bytes_down = 0;
  double compute_seconds = 0;          // in inner steps
  double wall_seconds = 0;
  std::string base_source;             // [lora] runs: "held", "cache" or "downloaded" (base_weights.h)
  nlohmann::json to_json() const;
};

// The inner steps' statistics since the last cut, as an update's header reports them.
struct CutStats {
  double kl_mean = 0, entropy_mean = 0;        // over those steps (0 when there were none)
  tasks::VerifierFailureCounts failures;       // completions masked from the loss, by kind
};

class NodeTally {
 public:
  // metrics: the /metrics counters to keep up to date, or null. The wall clock of progress()
  // starts now.
  explicit NodeTally(std::shared_ptr<NodeMetrics> metrics);

  // f(NodeCounters&) on the /metrics counters, when they are kept; keep it to a few assignments.
  template <class F>
  void count(F&& f) {
    if (metrics_) metrics_->update(std::forward<F>(f));
  }

  // One inner step of `dt` seconds; schedule_step: the trainer's lr schedule step after it.
  void record_step(const rl::StepMetrics& m, double dt, int64_t schedule_step);
  void set_schedule_step(int64_t step);
  void add_idle(double dt);                    // waiting on the network
  void add_full_download(uint64_t bytes);
  void add_broadcast(uint64_t bytes);
  // An update the coordinator answered; code: its reject code when refused.
  void add_update(uint64_t bytes, bool accepted, const std::string& code);
  void set_held(int64_t version, const std::string& hash);
  void set_base_source(const std::string& source);

  // The statistics since the last call (or the start), and a fresh start for the next cut.
  CutStats take_cut_stats();
  double tokens_per_s() const;                 // of the last inner step (0 before the first)
  v1::NodeProgress progress() const;           // for heartbeats and the leave
  NodeReport report() const;

 private:
  std::shared_ptr<NodeMetrics> metrics_;
  const double started_at_;
  mutable std::mutex mu_;
  NodeReport rep_;
  int64_t schedule_step_ = 0;                  // the trainer's lr schedule step
  double last_reward_ = 0, tokens_per_s_ = 0;  // of the last inner step
  double kl_sum_ = 0, entropy_sum_ = 0;        // since the last cut
  tasks::VerifierFailureCounts failures_;      // since the last cut
  int64_t cut_steps_ = 0;                      // inner steps since the last cut
};

}  // namespace meshrl::mesh

// What a node counts. See node_tally.h.
#include "mesh/node_tally.h"

#include <algorithm>

namespace meshrl::mesh {

nlohmann::json NodeReport::to_json() const {
  return {{"final_version", final_version},       {"final_hash", final_hash},
          {"inner_steps", inner_steps},           {"updates_sent", updates_sent},
          {"updates_accepted", updates_accepted}, {"full_downloads", full_downloads},
          {"broadcasts_applied", broadcasts_applied}, {"bytes_up", bytes_up},
          {"bytes_down", bytes_down},             {"compute_seconds", compute_seconds},
          {"wall_seconds", wall_seconds},         {"base_source", base_source},
          {"compute_share", wall_seconds > 0 ? compute_seconds / wall_seconds : 0.0}};
}

NodeTally::NodeTally(std::shared_ptr<NodeMetrics> metrics) : metrics_(std::move(metrics)), started_at_(steady_now_s()) {}

void NodeTally::record_step(const rl::StepMetrics& m, double dt, int64_t schedule_step) {
  count([&](NodeCounters& c) {
    ++c.inner_steps;
    c.rollouts += m.samples;
    c.reward_mean = m.reward_mean;
    c.kl = m.train.kl;
    c.entropy = m.train.entropy;
    c.tokens_per_s = m.tokens_per_s;
    c.compute_seconds += dt;
    c.add_step_seconds(dt);
  });
  std::lock_guard<std::mutex> lk(mu_);
  rep_.compute_seconds += dt;
  ++rep_.inner_steps;
  schedule_step_ = schedule_step;
  last_reward_ = m.reward_mean;
  tokens_per_s_ = m.tokens_per_s;
  kl_sum_ += m.train.kl;
  entropy_sum_ += m.train.entropy;
  failures_ += m.verifier_failures;
  ++cut_steps_;
}

void NodeTally::set_schedule_step(int64_t step) {
  std::lock_guard<std::mutex> lk(mu_);
  schedule_step_ = step;
}

void NodeTally::add_idle(double dt) {
  count([&](NodeCounters& c) { c.idle_seconds += dt; });
}

void NodeTally::add_full_download(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    rep_.bytes_down += bytes;
    ++rep_.full_downloads;
  }
  count([&](NodeCounters& c) {
    c.bytes_downloaded_weights += static_cast<double>(bytes);
    ++c.full_downloads;
  });
}

void NodeTally::add_broadcast(uint64_t bytes) {
  count([&](NodeCounters& c) {
    c.bytes_downloaded_broadcast += static_cast<double>(bytes);
    ++c.broadcasts_applied;
  });
  std::lock_guard<std::mutex> lk(mu_);
  rep_.bytes_down += bytes;
  ++rep_.broadcasts_applied;
}

void NodeTally::add_update(uint64_t bytes, bool accepted, const std::string& code) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++rep_.updates_sent;
    rep_.bytes_up += bytes;
    if (accepted) ++rep_.updates_accepted;
  }
  count([&](NodeCounters& c) {
    ++c.rounds;
    c.bytes_uploaded += static_cast<double>(bytes);
    if (accepted) ++c.updates_accepted;
    else ++c.updates_rejected[code.empty() ? "unknown" : code];
  });
}

void NodeTally::set_held(int64_t version, const std::string& hash) {
  count([&](NodeCounters& c) { c.policy_version = version; });
  std::lock_guard<std::mutex> lk(mu_);
  rep_.final_version = version;
  rep_.final_hash = hash;
}

void NodeTally::set_base_source(const std::string& source) {
  std::lock_guard<std::mutex> lk(mu_);
  rep_.base_source = source;
}

CutStats NodeTally::take_cut_stats() {
  std::lock_guard<std::mutex> lk(mu_);
  CutStats s;
  const double n = static_cast<double>(std::max<int64_t>(1, cut_steps_));
  s.kl_mean = kl_sum_ / n;
  s.entropy_mean = entropy_sum_ / n;
  s.failures = failures_;
  kl_sum_ = entropy_sum_ = 0;
  failures_ = {};
  cut_steps_ = 0;
  return s;
}

double NodeTally::tokens_per_s() const {
  std::lock_guard<std::mutex> lk(mu_);
  return tokens_per_s_;
}

v1::NodeProgress NodeTally::progress() const {
  std::lock_guard<std::mutex> lk(mu_);
  v1::NodeProgress p;
  p.set_version(rep_.final_version);
  p.set_hash(rep_.final_hash);
  p.set_inner_steps(rep_.inner_steps);
  p.set_reward_mean(last_reward_);
  p.set_compute_seconds(rep_.compute_seconds);
  p.set_wall_seconds(steady_now_s() - started_at_);
  p.set_schedule_step(schedule_step_);
  return p;
}

NodeReport NodeTally::report() const {
  std::lock_guard<std::mutex> lk(mu_);
  return rep_;
}

}  // namespace meshrl::mesh

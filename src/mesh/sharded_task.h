// ShardedTask: one city's slice of a task's training problems, as real sites hold different data.
// Wraps a task and keeps only the training problems whose prompt hashes to shard `index` of
// `count` (xxh3 of the prompt text, mod count), so the slices are disjoint and together cover the
// training split; the held-out split is the inner task's, unchanged, so every node and the
// coordinator evaluate on the same problems. Knows nothing about the network.
#pragma once

#include <memory>

#include "tasks/task.h"

namespace meshrl::mesh {

class ShardedTask : public tasks::Task {
 public:
  // count >= 1, index < count (MESHRL_CHECK).
  ShardedTask(std::shared_ptr<const tasks::Task> inner, uint64_t index, uint64_t count);

  std::string name() const override;
  // Redraws from the inner task with derived seeds until a problem of this shard comes up
  // (count draws on average); deterministic in seed. After 10000 misses (a task with very few
  // distinct prompts) it returns the last draw rather than loop forever.
  tasks::Problem sample(uint64_t seed) const override;
  // The seed of the inner (whole) task that sample(seed) draws from: inner.sample(inner_seed(s))
  // is sample(s), so a coordinator holding the whole task regenerates a node's prompt from it.
  uint64_t inner_seed(uint64_t seed) const;
  size_t n_eval() const override { return inner_->n_eval(); }
  tasks::Problem eval_problem(size_t i) const override { return inner_->eval_problem(i); }
  Result<tasks::Score> score(const tasks::Problem& p, std::string_view completion) const override {
    return inner_->score(p, completion);
  }
  std::optional<std::string> solution(const tasks::Problem& p) const override { return inner_->solution(p); }
  std::vector<std::string> stop_strings() const override { return inner_->stop_strings(); }

  static uint64_t shard_of(const std::string& prompt, uint64_t count);

 private:
  std::shared_ptr<const tasks::Task> inner_;
  uint64_t index_, count_;
};

}  // namespace meshrl::mesh

// GeneratedTask: the shared skeleton of tasks whose problems come from a seeded generator
// (arithmetic, countdown). It owns the train/eval split: a problem is held out when its canonical
// text (Problem::id) hashes below eval_fraction (split.h); sample() redraws until it gets a
// training problem, and the eval set is the first n_eval distinct held-out problems of a fixed
// stream. Knows nothing about any particular problem format.
#pragma once

#include <optional>

#include "tasks/split.h"
#include "tasks/task.h"

namespace meshrl::tasks {

class GeneratedTask : public Task {
 public:
  Problem sample(uint64_t seed) const override;
  size_t n_eval() const override { return eval_.size(); }
  Problem eval_problem(size_t i) const override;

  // Whether a problem id lies in the held-out split (for tests and for callers that import
  // problems from elsewhere).
  bool is_eval_id(const std::string& id) const { return in_eval_split(id, cfg_.split_seed, cfg_.eval_fraction); }

 protected:
  explicit GeneratedTask(TaskConfig cfg) : cfg_(std::move(cfg)) {}
  // One random problem (train or eval); Problem::id must be its canonical text. nullopt when
  // this draw could not make a problem (the caller draws again, boundedly).
  virtual std::optional<Problem> draw(Rng& rng) const = 0;
  // Builds the eval set and checks that both splits are reachable; the factory calls it once.
  // In a small problem space (1-digit addition has 100 problems) the eval set may hold fewer
  // than n_eval problems; it fails when it holds none.
  Status init_splits();

  TaskConfig cfg_;

 private:
  std::optional<Problem> try_sample(uint64_t seed, int max_draws) const;
  std::vector<Problem> eval_;
};

}  // namespace meshrl::tasks

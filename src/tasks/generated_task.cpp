// Train/eval split for generated tasks. See generated_task.h.
#include "tasks/generated_task.h"

#include <unordered_set>

#include "core/check.h"

namespace meshrl::tasks {
namespace {
constexpr uint64_t kTrainSalt = 0x7472'6169'6E00'0001ull;  // separates the train stream from the eval stream
constexpr uint64_t kEvalSalt = 0x6576'616C'0000'0002ull;
// With eval_fraction < 1 a training draw succeeds with probability >= 1 - eval_fraction per
// try; this many failures in a row means the config makes training problems (nearly) impossible.
constexpr int kMaxSampleDraws = 100000;
}  // namespace

std::optional<Problem> GeneratedTask::try_sample(uint64_t seed, int max_draws) const {
  Rng rng(mix_seed(seed, kTrainSalt));
  for (int i = 0; i < max_draws; ++i) {
    std::optional<Problem> p = draw(rng);
    if (p && !is_eval_id(p->id)) return p;
  }
  return std::nullopt;
}

Problem GeneratedTask::sample(uint64_t seed) const {
  std::optional<Problem> p = try_sample(seed, kMaxSampleDraws);
  // init_splits() proved training problems reachable, so this is a broken invariant, not input.
  MESHRL_CHECK(p.has_value(), "[tasks] " << name() << ": no training problem after " << kMaxSampleDraws << " draws (seed " << seed << ")");
  return *p;
}

Problem GeneratedTask::eval_problem(size_t i) const {
  MESHRL_CHECK(i < eval_.size(), "[tasks] eval_problem(" << i << ") but n_eval() = " << eval_.size());
  return eval_[i];
}

Status GeneratedTask::init_splits() {
  Rng rng(mix_seed(cfg_.split_seed, kEvalSalt));
  std::unordered_set<std::string> seen;
  const int64_t max_draws = int64_t{200} * cfg_.n_eval + 20000;
  for (int64_t d = 0; d < max_draws && eval_.size() < size_t(cfg_.n_eval); ++d) {
    std::optional<Problem> p = draw(rng);
    if (p && is_eval_id(p->id) && seen.insert(p->id).second) eval_.push_back(std::move(*p));
  }
  if (eval_.empty())
    return invalid_argument("[tasks] " + name() + ": could not find any held-out problem; the problem space is too small or "
                            "the generator cannot meet the config (raise eval_fraction or widen the ranges)");
  if (!try_sample(0, 20000))
    return invalid_argument("[tasks] " + name() + ": could not generate a training problem; widen the ranges or lower eval_fraction");
  return Status::ok();
}

}  // namespace meshrl::tasks

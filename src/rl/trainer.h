// GrpoTrainer: the inner GRPO loop of one node, as named steps —
//   sample_prompts -> generate_rollouts -> score -> compute_advantages -> train_step
// — so that `meshrl train` runs it for a whole run and a mesh node runs it H steps at a time
// between synchronisations. Owns the policy being trained, its AdamW state, the frozen reference
// (only when kl_coef > 0) and the step counter; knows nothing about run directories, the CLI or
// the network.
//
// Randomness: step s draws prompt i from task.sample(mix_seed(seed, s, i)) and samples completion
// g of prompt i with row seed mix_seed(seed, s, i, g), so a step is reproducible from
// (config, weights, s) alone — a mesh node sets a distinct seed per node.
//
// Log-probs: the importance ratio uses the behaviour log-probs recorded while sampling when the
// sampler's distribution is the model's own (temperature 1); at another temperature the recorded
// ones belong to a different distribution, so the old log-probs are recomputed at temperature 1
// before the first update (the ratio then starts at 1).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "rl/evaluate.h"
#include "rl/optimizer.h"
#include "rl/run_config.h"
#include "rollout/generate.h"
#include "rollout/policy.h"
#include "tasks/task.h"
#include "tasks/verifier_failures.h"

namespace meshrl::rl {

// One step's rollouts. Groups are contiguous: rows i*G .. i*G+G-1 answer problems[i].
struct Rollouts {
  int64_t step = 0;                               // the trainer step that made them (0-based)
  std::vector<tasks::Problem> problems;           // [N]
  std::vector<uint64_t> prompt_seeds;             // [N] task.sample(prompt_seeds[i]) drew problems[i] (set by step())
  std::vector<std::vector<int64_t>> prompt_ids;   // [N]
  std::vector<rollout::Completion> completions;   // [N*G]
  std::vector<tasks::Score> scores;               // [N*G], filled by score()
  std::vector<std::string> scored_texts;          // [N*G] what the verifier saw, filled by score()
  torch::Tensor rewards;                          // [N*G] float32, filled by score(); 0 where not scored
  // [N*G] bool, filled by score(): false where the verifier failed on the completion (scores[i].
  // failure says how). Such a row has no reward: it is left out of its group's mean and std and
  // of the loss, and out of the reward statistics. Undefined = every row scored.
  torch::Tensor scored;
  tasks::VerifierFailureCounts verifier_failures;  // the failed rows by kind, filled by score()
  double seconds = 0;                             // generation wall time
};

struct TrainStats {
  int64_t groups_kept = 0;     // groups with a learning signal that entered the loss
  int64_t rows = 0;            // sequences in the loss
  int64_t tokens = 0;          // completion tokens in the loss
  int64_t updates = 0;         // optimizer steps taken (ppo_epochs * minibatches, minus skipped)
  double loss = 0;             // mean over updates
  double kl = 0;               // mean k3 to the reference (0 without one)
  double clip_fraction = 0;
  double ratio_mean = 1;
  double entropy = 0;          // mean per-token entropy of the policy on the completions (first pass)
  double grad_norm = 0;        // mean pre-clip gradient norm
  double lr = 0;
  double seconds = 0;
};

struct StepMetrics {
  int64_t step = 0;            // 1-based: the number of steps done after this one
  double reward_mean = 0;      // over the scored completions (a failed verifier call has no reward)
  double reward_std = 0;       // population std over the scored rewards
  double correct_rate = 0;     // share of completions the verifier marked correct (failed = not)
  double format_rate = 0;
  double completion_len = 0;   // mean completion tokens
  double truncated = 0;        // share cut at max_new_tokens
  int64_t groups_total = 0;
  int64_t samples = 0;         // completions this step (N*G)
  int64_t scored = 0;          // of them, those the verifier gave a reward: samples - failures
  // Completions whose verifier call failed, by kind (timeout / crash / garbage): masked from the
  // loss and from their groups' statistics. Scoring stops the step with an error only past
  // [task] max_failure_rate (tasks/verifier_failures.h).
  tasks::VerifierFailureCounts verifier_failures;
  int64_t completion_tokens = 0;
  double tokens_per_s = 0;     // completion tokens sampled / step wall time (generation + training)
  TrainStats train;
  double seconds = 0;
  std::optional<double> pass_at_1;  // set by the caller when it evaluated after this step
};

nlohmann::json step_metrics_to_json(const StepMetrics& m);

class GrpoTrainer {
 public:
  // Trains policy.model in place. eval_defaults supplies evaluate()'s options.
  GrpoTrainer(rollout::Policy policy, std::shared_ptr<const tasks::Task> task, const GrpoSection& config,
              const EvalSection& eval = {});

  // One whole step: the named steps below in order. Fails only when scoring fails as a whole (the
  // verifier cannot start, or fails past [task] max_failure_rate); one failed completion is masked.
  Result<StepMetrics> step();

  // --- the named steps (public so tests and a mesh node can drive them one by one) ---
  std::vector<tasks::Problem> sample_prompts() const;  // N problems for the current step
  Result<Rollouts> generate_rollouts(std::vector<tasks::Problem> problems);  // no_grad; weights unchanged
  Status score(Rollouts& rollouts) const;
  torch::Tensor compute_advantages(const Rollouts& rollouts) const;  // [N*G] float32
  TrainStats train_step(const Rollouts& rollouts, const torch::Tensor& advantages);

  // Held-out pass@1 (and pass@k) of the current policy, with the [eval] options; on_progress
  // (may be empty) gets generated rows of the total, as EvalOptions::on_progress.
  Result<EvalResult> evaluate(std::function<void(int64_t rows_done, int64_t rows_total)> on_progress = {});
  EvalOptions eval_options() const;

  // Called by step() with each step's scored rollouts, before training on them (a mesh node
  // keeps them for reward audits). Empty = none.
  void set_on_scored(std::function<void(const Rollouts&)> f) { on_scored_ = std::move(f); }

  int64_t step_count() const { return step_; }
  // For a mesh node that loads new weights and continues the schedule where the run is.
  void set_step_count(int64_t s) { step_ = s; }
  // The inner AdamW's moments and schedule step, for a mesh node that persists its local state.
  OptimizerState optimizer_state() const { return optimizer_.state(); }
  Status set_optimizer_state(const OptimizerState& s) { return optimizer_.set_state(s); }
  rollout::Policy& policy() { return policy_; }
  const GrpoSection& config() const { return config_; }
  const tasks::Task& task() const { return *task_; }
  bool has_reference() const { return !ref_.is_empty(); }

 private:
  rollout::Policy policy_;
  std::shared_ptr<const tasks::Task> task_;
  GrpoSection config_;
  EvalSection eval_;
  Optimizer optimizer_;
  model::Transformer ref_{nullptr};
  int64_t step_ = 0;
  std::function<void(const Rollouts&)> on_scored_;
  uint64_t prompt_seed(int64_t i) const;  // the seed of prompt i at the current step
};

// A frozen copy of `m` on the same device (requires_grad false), for the KL reference.
model::Transformer clone_frozen(const model::Transformer& m);

}  // namespace meshrl::rl

// SFT warm start: supervised training of a policy on a task's own worked solutions
// (task.solution(problem), e.g. "37+45=" -> "82\n"), so that a model trained from scratch has a
// policy worth reinforcing. Cross-entropy on the completion tokens only (the stop newline
// included, so the model learns to stop); prompt tokens and padding have mask 0.
// Knows nothing about GRPO, run directories or the network.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/transformer.h"
#include "rl/run_config.h"
#include "tasks/task.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::rl {

struct SftBatch {
  torch::Tensor tokens;  // [B, T] int64, prompt + solution, right-padded with 0
  torch::Tensor mask;    // [B, T-1] float32: 1 where tokens[:, t+1] is a solution token
};

// Builds one batch; a problem without a solution is an error naming the task and the problem.
Result<SftBatch> make_sft_batch(const tokenizer::Tokenizer& tok, const tasks::Task& task,
                                const std::vector<tasks::Problem>& problems);

// Mean cross-entropy over the masked positions (nats per solution token). Differentiable.
torch::Tensor sft_loss(model::TransformerImpl& model, const SftBatch& batch);

struct SftProgress {
  int64_t step = 0;      // 1-based, after the update
  int64_t steps = 0;
  double loss = 0;       // this step's batch loss (before the update)
  double lr = 0;
  double seconds = 0;    // since the start
  double check_pass1 = -1;  // greedy accuracy on the check problems, on the steps that checked; else -1
};

// "loss 0.5734 lr 0.002" plus " check 23.4%" on a step that ran the stop check.
std::string describe(const SftProgress& p);

struct SftResult {
  std::vector<double> losses;  // one per step (fewer than config.steps when stopped early)
  std::vector<std::pair<int64_t, double>> checks;  // (step, greedy accuracy) of each stop check
  bool reached_target = false;  // stop_at_pass1 reached (the run stopped there)
  double first_loss = 0;       // mean of the first min(10, steps) losses
  double final_loss = 0;       // mean of the last min(10, steps) losses
  double seconds = 0;
  int64_t tokens = 0;          // solution tokens trained on
};

// The stop check's problems: config.check_problems fixed training problems (never the held-out
// split), the same for every run with this config.seed.
std::vector<tasks::Problem> sft_check_problems(const tasks::Task& task, const SftSection& config);

// "1050 steps, loss 4.5086 -> 0.4875 in 143 s; stopped at 43.8% greedy accuracy on training problems".
std::string summarize(const SftResult& r);

// Runs config.steps AdamW steps on batches of config.batch_size problems; batch s draws problem b
// with seed mix_seed(config.seed, s, b), so the run is reproducible. With config.stop_at_pass1 > 0
// it greedy-decodes config.check_problems fixed training problems every check_every steps (stop_ids
// end a completion, as in evaluation) and stops once their accuracy reaches the target. on_step
// is called after each step (progress display); it may be empty.
Result<SftResult> run_sft(model::TransformerImpl& model, const tokenizer::Tokenizer& tok, const tasks::Task& task,
                          const SftSection& config, const std::function<void(const SftProgress&)>& on_step = {},
                          const std::vector<int64_t>& stop_ids = {});

}  // namespace meshrl::rl

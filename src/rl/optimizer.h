// The inner optimizer of SFT and GRPO: AdamW (torch::optim::AdamW) with a learning-rate schedule
// (linear warm-up, then cosine decay to a floor) and gradient clipping by global norm.
// Owns the optimizer state; knows nothing about losses, tasks, models' structure or the network.
//
// Weight decay applies to matrices only (dim >= 2): decaying RMSNorm gains pulls them toward 0
// and hurts, as the usual recipes (nanoGPT, HF Trainer) also exclude them.
//
// Pooled second moment (pooled_batches K > 1, for mesh nodes). A mesh averages the AdamW steps of
// K nodes, each normalised by the second moment of its own batch, E[g^2] = mu^2 + s^2; one AdamW
// step on the K batches pooled would use mu^2 + s^2 / K. Where the gradient is mostly noise, each
// node's step (the signal it carries included) is then up to sqrt(K) times smaller than the pooled
// step's, so the mean of the K steps is not one pooled step even when averaged after every step.
// With K > 1 the caller also passes, per parameter, d = sqrt(wA wB) (gA - gB) from the two halves
// of its batch (weights wA + wB = 1, g = wA gA + wB gB), an unbiased estimate of the noise:
// E[d^2] = s^2. The step then divides by
//   v = max(EMA(g^2) - (1 - 1/K) EMA(d^2), EMA(g^2) / K)
// (the floor is the pure-noise case), and is otherwise AdamW's own formula, so that the mean of K
// such steps preconditions like one AdamW step on the pooled batch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/status.h"

namespace meshrl::rl {

struct ScheduleConfig {
  double lr = 1e-3;           // peak learning rate
  int64_t warmup_steps = 0;   // steps 0 .. warmup-1 ramp linearly: lr * (s + 1) / warmup
  int64_t total_steps = 1;    // the cosine reaches lr * min_lr_ratio at step total_steps - 1
  double min_lr_ratio = 0.1;  // floor as a share of lr
};

// Learning rate for 0-based optimizer step s. After warm-up, with p = (s - warmup) /
// max(1, total - warmup - 1) clamped to [0, 1]:
//   lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2,   lr_min = lr * min_lr_ratio.
// So the first post-warm-up step runs at the peak and the last at the floor; steps past the end
// stay at the floor (a mesh node may run a few more inner steps than planned).
double scheduled_lr(const ScheduleConfig& config, int64_t step);

// Scales every gradient by min(1, max_norm / (norm + 1e-6)) where norm is the L2 norm of all
// gradients together; returns that norm (before clipping). Parameters without a gradient are
// skipped. max_norm <= 0: no clipping, only the norm. A non-finite norm leaves the gradients alone
// (the caller decides: the trainer skips the update).
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

struct OptimizerConfig {
  ScheduleConfig schedule;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double eps = 1e-8;
  double grad_clip = 1.0;  // max global norm; <= 0 = off
  double pooled_batches = 1;  // K of the pooled second moment (above); 1 = plain AdamW
  // With the pooled second moment: clip by the norm the K pooled batches' gradient would have,
  // sqrt(max(|g|^2 - (1 - 1/K) |d|^2, |g|^2 / K)), rather than by this batch's own (noisier) norm.
  bool pooled_clip = false;
};

struct OptimizerStepInfo {
  double lr = 0;         // the learning rate this step used
  double grad_norm = 0;  // global gradient norm before clipping (the pooled estimate with pooled_clip)
  bool skipped = false;  // true when the gradient was not finite: no update, step not counted
};

// One parameter's AdamW moments; absent (nullopt) until that parameter's first update.
struct AdamMoments {
  int64_t step = 0;          // AdamW's own per-parameter count (bias correction)
  torch::Tensor exp_avg;     // first moment, the parameter's shape
  torch::Tensor exp_avg_sq;  // second moment, the parameter's shape
  torch::Tensor noise_sq;    // EMA of d^2 (pooled second moment only; undefined otherwise)
};

// Everything step() depends on besides the parameters and config: a mesh node saves it after an
// acknowledged update so that a restarted process continues with the same moments and schedule.
struct OptimizerState {
  int64_t step = 0;                               // the schedule's step (step_count())
  std::vector<std::optional<AdamMoments>> params;  // one per parameter, in construction order
};

class Optimizer {
 public:
  Optimizer(std::vector<torch::Tensor> params, const OptimizerConfig& config);

  // Clips, sets the scheduled lr for the current step, applies AdamW, zeroes the gradients and
  // advances the step counter. Call after backward().
  OptimizerStepInfo step();
  // The pooled-second-moment step (pooled_batches > 1): half_spread[i] is d for parameter i (an
  // undefined tensor where the parameter has no gradient). Clipping scales d, in place, with the
  // gradient. With pooled_batches == 1 the spread is ignored and this is step().
  OptimizerStepInfo step(const std::vector<torch::Tensor>& half_spread);
  bool pools_second_moment() const { return config_.pooled_batches > 1; }
  void zero_grad();

  int64_t step_count() const { return step_; }
  // Lets a caller that reloads weights (a mesh node after a broadcast) continue the schedule.
  void set_step_count(int64_t s) { step_ = s; }
  double current_lr() const { return scheduled_lr(config_.schedule, step_); }
  // Deep CPU copies of the moments (later steps do not change them; a CUDA optimizer's come over).
  OptimizerState state() const;
  // Restores state(): fails (kInvalidArgument, naming the parameter index and both shapes) when the
  // parameter count or a moment's shape differs, and then changes nothing.
  Status set_state(const OptimizerState& state);
  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> adam_;  // plain AdamW; with pooling its state holds m and EMA(g^2)
  std::vector<torch::Tensor> noise_sq_;         // per parameter, EMA(d^2); empty without pooling
  int64_t step_ = 0;

  void pooled_adamw_update(double lr, const std::vector<torch::Tensor>& half_spread);
  double pooled_grad_norm(const std::vector<torch::Tensor>& half_spread) const;
};

}  // namespace meshrl::rl

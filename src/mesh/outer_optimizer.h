// The coordinator's outer optimizer (DiLoCo: Douillard et al. 2023, "DiLoCo: Distributed
// Low-Communication Training of Language Models"): SGD with Nesterov momentum applied to the
// aggregated pseudo-gradient g = mean over nodes of (theta_v - theta_local). Owns the momentum
// buffers; knows nothing about codecs, the network or where g came from.
//
// One step, per element, in float32 (PyTorch's torch.optim.SGD with dampening 0, as DiLoCo uses):
//   m <- momentum * m + g
//   delta = -lr * (g + momentum * m)    Nesterov
//   delta = -lr * m                     plain momentum
// and the caller sets theta_{v+1} = theta_v + delta. delta is returned rather than applied because
// the coordinator encodes it, decodes it, and applies exactly the decoded bytes it broadcasts
// (apply_delta in named_tensors.h), so every node lands on the same bits.
// DiLoCo's defaults: lr 0.7, momentum 0.9, Nesterov. With lr 1 and momentum 0 the step is plain
// averaging (FedAvg): delta = -g, theta_{v+1} = mean of the nodes' theta_local.
#pragma once

#include "core/status.h"
#include "mesh/named_tensors.h"

namespace meshrl::mesh {

struct OuterOptimizerConfig {
  double lr = 0.7;
  double momentum = 0.9;
  bool nesterov = true;
};

class OuterOptimizer {
 public:
  // Checks nothing here; step() refuses a config with lr <= 0 or momentum outside [0, 1).
  explicit OuterOptimizer(OuterOptimizerConfig c);

  // pseudo_gradient: [P] float32 CPU tensors (any layout), the aggregated theta_v - theta_local.
  // Returns delta (new contiguous float32 tensors, same names and shapes) to ADD to theta_v.
  // Momentum buffers are created (zeros) on the first step, or come from set_state. Fails
  // (kInvalidArgument) changing nothing on an invalid set, a layout different from the buffers'
  // (names, order, shapes), a non-finite value, or an invalid config.
  Result<NamedTensors> step(const NamedTensors& pseudo_gradient);

  // Momentum buffers (clones), in the pseudo-gradient's layout; empty before the first step.
  NamedTensors state() const;
  // Restores buffers saved by state() (e.g. from outer_state.safetensors after a restart); an empty
  // set resets to "no step yet". Fails (kInvalidArgument) on an invalid set or a non-finite value.
  Status set_state(const NamedTensors& s);

  const OuterOptimizerConfig& config() const { return config_; }
  int64_t n_steps() const { return n_steps_; }  // steps since construction (not persisted)

 private:
  OuterOptimizerConfig config_;
  NamedTensors momentum_;  // empty until the first step or set_state
  int64_t n_steps_ = 0;
};

}  // namespace meshrl::mesh

// InnerLoop: the node's H inner GRPO steps between two updates, the one loop both modes train
// in. Sync mode (and async without overlap) runs a window of H steps and then cuts; async with
// overlap passes a before_step hook that takes a fetched version between two steps (the rebase,
// version_follower.h) and ends the window early when the run is over. Each step is counted in
// the tally (node_tally.h). Knows nothing about the network, codecs or versions.
#pragma once

#include <cstdint>
#include <functional>

#include "core/status.h"
#include "mesh/node_tally.h"
#include "rl/trainer.h"

namespace meshrl::mesh {

// The inner steps since the last cut: what the next update is made of.
struct InnerWindow {
  int64_t steps = 0;
  // Scored completions (a failed verifier call is masked from the loss): the update's n_samples,
  // which is also what its rollout commitment holds (audits require the two to agree).
  int64_t samples = 0;
  double reward_sum = 0;  // sum of the steps' reward_mean
  double reward_mean() const { return steps > 0 ? reward_sum / static_cast<double>(steps) : 0.0; }
};

class InnerLoop {
 public:
  // inner_steps: H ([mesh] inner_steps). stopping: the node is shutting down.
  InnerLoop(rl::GrpoTrainer& trainer, NodeTally& tally, int64_t inner_steps, std::function<bool()> stopping);

  // Steps until `window` holds H steps. Before each step: returns (window short) when stopping,
  // then runs before_step (when set), which returns false to end the window early or fails.
  // A failed step fails the loop. The window is left as far as it got.
  Status run(InnerWindow& window, const std::function<Result<bool>()>& before_step = {});

 private:
  rl::GrpoTrainer& trainer_;
  NodeTally& tally_;
  const int64_t inner_steps_;
  const std::function<bool()> stopping_;
};

}  // namespace meshrl::mesh

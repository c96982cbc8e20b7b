// The inner steps between two updates. See inner_loop.h.
#include "mesh/inner_loop.h"

namespace meshrl::mesh {

InnerLoop::InnerLoop(rl::GrpoTrainer& trainer, NodeTally& tally, int64_t inner_steps, std::function<bool()> stopping)
    : trainer_(trainer), tally_(tally), inner_steps_(inner_steps), stopping_(std::move(stopping)) {}

Status InnerLoop::run(InnerWindow& window, const std::function<Result<bool>()>& before_step) {
  while (window.steps < inner_steps_) {
    if (stopping_ && stopping_()) return Status::ok();
    if (before_step) {
      MESHRL_ASSIGN_OR_RETURN(const bool go_on, before_step());
      if (!go_on) return Status::ok();
    }
    const double t = steady_now_s();
    MESHRL_ASSIGN_OR_RETURN(rl::StepMetrics m, trainer_.step());
    tally_.record_step(m, steady_now_s() - t, trainer_.step_count());
    window.samples += m.scored;
    window.reward_sum += m.reward_mean;
    ++window.steps;
  }
  return Status::ok();
}

}  // namespace meshrl::mesh

#include "mesh/outer_optimizer.h"

#include <cmath>

namespace meshrl::mesh {
namespace {

Status check_finite(const NamedTensors& set, const char* what) {
  for (size_t i = 0; i < set.size(); ++i)
    if (!torch::isfinite(set.tensors[i]).all().item<bool>())
      return invalid_argument(std::string("[outer_optimizer] ") + what + ": tensor '" + set.names[i] +
                              "' has a non-finite value");
  return Status::ok();
}

}  // namespace

OuterOptimizer::OuterOptimizer(OuterOptimizerConfig c) : config_(c) {}

Result<NamedTensors> OuterOptimizer::step(const NamedTensors& g) {
  const auto& c = config_;
  if (!(c.lr > 0) || !std::isfinite(c.lr) || !(c.momentum >= 0 && c.momentum < 1))
    return invalid_argument("[outer_optimizer] lr must be > 0 and momentum in [0, 1), got lr " + std::to_string(c.lr) +
                            ", momentum " + std::to_string(c.momentum));
  MESHRL_RETURN_IF_ERROR(check_named_tensors(g, "outer step pseudo-gradient"));
  if (momentum_.size() > 0) MESHRL_RETURN_IF_ERROR(check_same_layout(momentum_, g, "outer step (momentum vs pseudo-gradient)"));
  MESHRL_RETURN_IF_ERROR(check_finite(g, "pseudo-gradient"));

  torch::NoGradGuard no_grad;
  if (momentum_.size() == 0) {
    momentum_.names = g.names;
    for (const auto& t : g.tensors) momentum_.tensors.push_back(torch::zeros(t.sizes(), torch::kFloat32));
  }
  const float mu = static_cast<float>(c.momentum), lr = static_cast<float>(c.lr);
  NamedTensors delta;
  delta.names = g.names;
  delta.tensors.reserve(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    auto& m = momentum_.tensors[i];
    const auto gi = g.tensors[i].detach();
    m.mul_(mu).add_(gi);  // m <- mu m + g
    auto d = c.nesterov ? torch::add(gi, m, mu) : m.clone();
    delta.tensors.push_back(d.mul_(-lr).contiguous());
  }
  ++n_steps_;
  return delta;
}

NamedTensors OuterOptimizer::state() const { return clone_named_tensors(momentum_); }

Status OuterOptimizer::set_state(const NamedTensors& s) {
  MESHRL_RETURN_IF_ERROR(check_named_tensors(s, "outer optimizer state"));
  MESHRL_RETURN_IF_ERROR(check_finite(s, "state"));
  momentum_ = clone_named_tensors(s);
  return Status::ok();
}

}  // namespace meshrl::mesh

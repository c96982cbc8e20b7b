#include "mesh/error_feedback.h"

#include <cmath>

#include "core/check.h"

namespace meshrl::mesh {

NamedTensors ErrorFeedback::compensate(const NamedTensors& delta) const {
  MESHRL_CHECK(delta.names.size() == delta.tensors.size(),
               "[error_feedback] " << delta.names.size() << " names for " << delta.tensors.size() << " tensors");
  torch::NoGradGuard no_grad;
  NamedTensors out;
  out.names = delta.names;
  out.tensors.reserve(delta.size());
  for (size_t i = 0; i < delta.size(); ++i) {
    auto it = residual_.find(delta.names[i]);
    if (it == residual_.end()) {
      out.tensors.push_back(delta.tensors[i].detach().clone(at::MemoryFormat::Contiguous));
      continue;
    }
    MESHRL_CHECK(it->second.sizes() == delta.tensors[i].sizes(),
                 "[error_feedback] residual of '" << delta.names[i] << "' is " << it->second.sizes()
                                                  << ", the delta " << delta.tensors[i].sizes());
    out.tensors.push_back(delta.tensors[i].detach() + it->second);
  }
  return out;
}

Status ErrorFeedback::update(const NamedTensors& compensated, const NamedTensors& decoded) {
  MESHRL_RETURN_IF_ERROR(check_same_layout(compensated, decoded, "error_feedback.update"));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < compensated.size(); ++i)
    residual_[compensated.names[i]] = compensated.tensors[i].detach() - decoded.tensors[i].detach();
  return Status::ok();
}

NamedTensors ErrorFeedback::residual() const {
  NamedTensors out;
  for (const auto& [name, t] : residual_) {
    out.names.push_back(name);
    out.tensors.push_back(t.clone());
  }
  return out;
}

Status ErrorFeedback::set_residual(const NamedTensors& residual) {
  MESHRL_RETURN_IF_ERROR(check_named_tensors(residual, "error_feedback.set_residual"));
  std::map<std::string, torch::Tensor> next;
  for (size_t i = 0; i < residual.size(); ++i) next[residual.names[i]] = residual.tensors[i].detach().clone();
  residual_ = std::move(next);
  return Status::ok();
}

double ErrorFeedback::residual_norm() const {
  double sq = 0;
  for (const auto& [name, t] : residual_) sq += t.to(torch::kFloat64).square().sum().item<double>();
  return std::sqrt(sq);
}

}  // namespace meshrl::mesh

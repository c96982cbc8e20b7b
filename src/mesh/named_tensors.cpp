#include "mesh/named_tensors.h"

#include <sstream>
#include <unordered_set>

namespace meshrl::mesh {

int64_t NamedTensors::numel() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.defined() ? t.numel() : 0;
  return n;
}

Status check_named_tensors(const NamedTensors& set, std::string_view what) {
  const std::string w = "[named_tensors] " + std::string(what);
  if (set.names.size() != set.tensors.size())
    return invalid_argument(w + ": " + std::to_string(set.names.size()) + " names for " +
                            std::to_string(set.tensors.size()) + " tensors");
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < set.size(); ++i) {
    const auto& name = set.names[i];
    const auto& t = set.tensors[i];
    const std::string at = w + ": tensor " + std::to_string(i) + " '" + name + "'";
    if (name.empty()) return invalid_argument(at + ": empty name");
    if (!seen.insert(name).second) return invalid_argument(at + ": duplicate name");
    if (!t.defined()) return invalid_argument(at + ": undefined tensor");
    if (t.scalar_type() != torch::kFloat32)
      return invalid_argument(at + ": dtype must be float32, got " + std::string(c10::toString(t.scalar_type())));
    if (!t.device().is_cpu()) return invalid_argument(at + ": must be on the CPU, got " + t.device().str());
  }
  return Status::ok();
}

Status check_same_layout(const NamedTensors& a, const NamedTensors& b, std::string_view what) {
  MESHRL_RETURN_IF_ERROR(check_named_tensors(a, what));
  MESHRL_RETURN_IF_ERROR(check_named_tensors(b, what));
  const std::string w = "[named_tensors] " + std::string(what);
  if (a.size() != b.size())
    return invalid_argument(w + ": " + std::to_string(a.size()) + " tensors vs " + std::to_string(b.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.names[i] != b.names[i])
      return invalid_argument(w + ": tensor " + std::to_string(i) + " is '" + a.names[i] + "' vs '" + b.names[i] + "'");
    if (a.tensors[i].sizes() != b.tensors[i].sizes()) {
      std::ostringstream os;
      os << w << ": tensor '" << a.names[i] << "' has shape " << a.tensors[i].sizes() << " vs " << b.tensors[i].sizes();
      return invalid_argument(os.str());
    }
  }
  return Status::ok();
}

NamedTensors clone_named_tensors(const NamedTensors& set) {
  torch::NoGradGuard no_grad;
  NamedTensors out;
  out.names = set.names;
  out.tensors.reserve(set.size());
  // .to(kCPU, copy) then contiguous: a CPU tensor is cloned, a device tensor (a node training on
  // CUDA) is brought to the CPU, where every NamedTensors lives.
  for (const auto& t : set.tensors) out.tensors.push_back(t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous());
  return out;
}

Result<NamedTensors> subtract_named_tensors(const NamedTensors& a, const NamedTensors& b) {
  MESHRL_RETURN_IF_ERROR(check_same_layout(a, b, "subtract"));
  torch::NoGradGuard no_grad;
  NamedTensors out;
  out.names = a.names;
  for (size_t i = 0; i < a.size(); ++i) out.tensors.push_back(a.tensors[i].detach() - b.tensors[i].detach());
  return out;
}

Status apply_delta(NamedTensors& params, const NamedTensors& delta) {
  MESHRL_RETURN_IF_ERROR(check_same_layout(params, delta, "apply_delta"));
  torch::NoGradGuard no_grad;
  // add_ with the default alpha of 1: alpha * b is exact, so even a fused multiply-add kernel
  // rounds once, to the correctly rounded a + b.
  for (size_t i = 0; i < params.size(); ++i) params.tensors[i].add_(delta.tensors[i]);
  return Status::ok();
}

}  // namespace meshrl::mesh

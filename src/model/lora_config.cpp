#include "model/lora_config.h"

#include <algorithm>
#include <cmath>

namespace meshrl::model {

bool LoraConfig::has_target(LoraTarget t) const { return std::find(targets.begin(), targets.end(), t) != targets.end(); }

std::string_view lora_target_name(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return "q_proj";
    case LoraTarget::kK: return "k_proj";
    case LoraTarget::kV: return "v_proj";
    case LoraTarget::kO: return "o_proj";
    case LoraTarget::kGate: return "gate_proj";
    case LoraTarget::kUp: return "up_proj";
    case LoraTarget::kDown: return "down_proj";
  }
  return "?";
}

std::optional<LoraTarget> lora_target_from_name(std::string_view name) {
  for (LoraTarget t : kAllLoraTargets) {
    std::string_view full = lora_target_name(t);
    if (name == full || name == full.substr(0, full.size() - 5)) return t;  // "q_proj" or "q"
  }
  return std::nullopt;
}

Result<std::vector<LoraTarget>> parse_lora_targets(const std::vector<std::string>& names, const std::string& source) {
  std::vector<LoraTarget> out;
  for (const auto& n : names) {
    auto t = lora_target_from_name(n);
    if (!t)
      return invalid_argument("[lora] " + source + ": unknown target module '" + n +
                              "'; known: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj (or q k v o gate up down)");
    if (std::find(out.begin(), out.end(), *t) != out.end())
      return invalid_argument("[lora] " + source + ": target module '" + n + "' is listed twice");
    out.push_back(*t);
  }
  // Canonical order, so the adapter's parameter order does not depend on how the list was written.
  std::sort(out.begin(), out.end());
  return out;
}

Status check_lora_config(const LoraConfig& lora, const std::string& source) {
  if (lora.rank < 1) return invalid_argument("[lora] " + source + ": rank must be >= 1, got " + std::to_string(lora.rank));
  if (!(lora.alpha > 0) || !std::isfinite(lora.alpha))
    return invalid_argument("[lora] " + source + ": alpha must be a finite number > 0, got " + std::to_string(lora.alpha));
  if (lora.targets.empty()) return invalid_argument("[lora] " + source + ": no target modules");
  for (size_t i = 0; i < lora.targets.size(); ++i)
    for (size_t j = i + 1; j < lora.targets.size(); ++j)
      if (lora.targets[i] == lora.targets[j])
        return invalid_argument("[lora] " + source + ": target module '" + std::string(lora_target_name(lora.targets[i])) +
                                "' is listed twice");
  return Status::ok();
}

LinearDims lora_linear_dims(const ModelConfig& c, LoraTarget t) {
  const int64_t E = c.n_embd, D = c.head_dim(), F = c.n_ff;
  switch (t) {
    case LoraTarget::kQ: return {E, c.n_heads * D};
    case LoraTarget::kK:
    case LoraTarget::kV: return {E, c.n_kv_heads * D};
    case LoraTarget::kO: return {c.n_heads * D, E};
    case LoraTarget::kGate:
    case LoraTarget::kUp: return {E, F};
    case LoraTarget::kDown: return {F, E};
  }
  return {};
}

}  // namespace meshrl::model

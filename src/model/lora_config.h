// LoraConfig: which linear layers of a Llama / Qwen2 decoder carry a low-rank adapter, of what rank
// and scale, and the seed of the frozen A matrices. Torch-free (the planner uses it without a
// model); lora.h builds the adapters from it. Knows nothing about tensors, training or the mesh.
//
// A target is one of the seven per-layer linears, named as PEFT's target_modules name them:
//   q_proj k_proj v_proj o_proj gate_proj up_proj down_proj
// (the short forms q k v o gate up down are accepted on input). A linear with `in` inputs and
// `out` outputs gets A [r, in] and B [out, r]: r * (in + out) values, of which only B (out * r) is
// trained and exchanged on the mesh (lora.h says why A is frozen).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace meshrl::model {

enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };

inline constexpr LoraTarget kAllLoraTargets[] = {LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,   LoraTarget::kO,
                                                 LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};

struct LoraConfig {
  int64_t rank = 8;     // r >= 1
  double alpha = 16.0;  // the update is scaled by alpha / r (PEFT's lora_alpha)
  std::vector<LoraTarget> targets = {std::begin(kAllLoraTargets), std::end(kAllLoraTargets)};  // no duplicates
  uint64_t seed = 0;    // A's initialisation; every node of a run uses the same one

  double scale() const { return alpha / static_cast<double>(rank); }
  bool has_target(LoraTarget t) const;
};

std::string_view lora_target_name(LoraTarget t);  // "q_proj", ...
std::optional<LoraTarget> lora_target_from_name(std::string_view name);  // "q_proj" or "q"

// Targets from names (PEFT or short form), in canonical order (q k v o gate up down), without
// duplicates. An unknown or repeated name is an error naming `source` and the name.
Result<std::vector<LoraTarget>> parse_lora_targets(const std::vector<std::string>& names, const std::string& source);

// Rank >= 1, alpha finite and > 0, at least one target, no duplicate target.
Status check_lora_config(const LoraConfig& lora, const std::string& source);

// The (in, out) features of a target's linear for this model: q [E -> H D], k and v [E -> Hkv D],
// o [H D -> E], gate and up [E -> F], down [F -> E].
struct LinearDims {
  int64_t in = 0;
  int64_t out = 0;
};
LinearDims lora_linear_dims(const ModelConfig& config, LoraTarget t);

}  // namespace meshrl::model

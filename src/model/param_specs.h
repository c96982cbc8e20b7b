// The names and shapes of a model's parameters, computed from its config alone (no tensors): what
// TransformerImpl::named_parameters() lists, in the same order and with the same names, and what a
// LoRA adapter adds. The planner (src/plan) counts parameters and wire bytes from these; unit tests
// pin them to the real modules so a change to either shows up. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora_config.h"

namespace meshrl::model {

enum class ParamKind { kEmbedding, kLmHead, kAttention, kMlp, kNorm, kLoraA, kLoraB };

struct ParamSpec {
  std::string name;            // as named_parameters() names it ("layers.3.w_qkv", "lora.layers.3.q_proj_B")
  std::vector<int64_t> shape;
  ParamKind kind = ParamKind::kAttention;
  int64_t numel() const;
};

// The Transformer's own parameters (fused layout, transformer.h), registration order: embed, norm,
// lm_head (untied only), then per layer attn_norm, w_qkv, b_qkv (biased models only), w_o,
// mlp_norm, w_gate_up, w_down.
std::vector<ParamSpec> transformer_param_specs(const ModelConfig& config);

// The adapter's parameters (lora.h), in registration order: per layer, per target in canonical
// order, "lora.layers.N.<target>_A" [r, in] (kLoraA, frozen) then "..._B" [out, r] (kLoraB).
std::vector<ParamSpec> lora_param_specs(const ModelConfig& config, const LoraConfig& lora);

int64_t total_numel(const std::vector<ParamSpec>& specs);

}  // namespace meshrl::model

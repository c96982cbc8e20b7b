#include "model/param_specs.h"

namespace meshrl::model {

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ParamSpec> transformer_param_specs(const ModelConfig& c) {
  const int64_t E = c.n_embd, D = c.head_dim(), qkv_rows = (c.n_heads + 2 * c.n_kv_heads) * D;
  std::vector<ParamSpec> out;
  out.push_back({"embed", {c.n_vocab, E}, ParamKind::kEmbedding});
  out.push_back({"norm", {E}, ParamKind::kNorm});
  if (!c.tie_word_embeddings) out.push_back({"lm_head", {c.n_vocab, E}, ParamKind::kLmHead});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    out.push_back({p + "attn_norm", {E}, ParamKind::kNorm});
    out.push_back({p + "w_qkv", {qkv_rows, E}, ParamKind::kAttention});
    if (c.attention_bias) out.push_back({p + "b_qkv", {qkv_rows}, ParamKind::kAttention});
    out.push_back({p + "w_o", {E, c.n_heads * D}, ParamKind::kAttention});
    out.push_back({p + "mlp_norm", {E}, ParamKind::kNorm});
    out.push_back({p + "w_gate_up", {2 * c.n_ff, E}, ParamKind::kMlp});
    out.push_back({p + "w_down", {E, c.n_ff}, ParamKind::kMlp});
  }
  return out;
}

std::vector<ParamSpec> lora_param_specs(const ModelConfig& c, const LoraConfig& lora) {
  std::vector<ParamSpec> out;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "lora.layers." + std::to_string(l) + ".";
    for (LoraTarget t : kAllLoraTargets) {
      if (!lora.has_target(t)) continue;
      const auto dims = lora_linear_dims(c, t);
      const std::string base = p + std::string(lora_target_name(t));
      out.push_back({base + "_A", {lora.rank, dims.in}, ParamKind::kLoraA});
      out.push_back({base + "_B", {dims.out, lora.rank}, ParamKind::kLoraB});
    }
  }
  return out;
}

int64_t total_numel(const std::vector<ParamSpec>& specs) {
  int64_t n = 0;
  for (const auto& s : specs) n += s.numel();
  return n;
}

}  // namespace meshrl::model

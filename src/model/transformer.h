// Transformer: the Llama / Qwen2 decoder-only language model in libtorch (HF math, fp32 compute).
// Owns its parameters; knows nothing about tokenizers, sampling, tasks or the network.
//
// Parameters are stored fused for speed — q, k and v projections as one [(H + 2 Hkv) D, E] matrix,
// gate and up as one [2 F, E] matrix — so a layer runs 4 matrix products instead of 7. Hugging
// Face names (model.layers.N.self_attn.q_proj.weight, ...) are views into the fused tensors:
// hf_tensors() lists them, load_hf_tensors() copies into them.
//
// Grouped-query attention never expands k/v to H heads: the G = H / Hkv query heads that share a
// kv head are stacked along the query axis ([B, Hkv, G*T, D]), so one batched product serves them.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/lora.h"
#include "model/rope.h"

namespace meshrl::model {

struct DecoderLayerImpl : torch::nn::Module {
  DecoderLayerImpl(const ModelConfig& c);
  torch::Tensor attn_norm;  // [E]       input_layernorm.weight
  torch::Tensor w_qkv;      // [(H+2Hkv)D, E]
  torch::Tensor b_qkv;      // [(H+2Hkv)D] or undefined (Qwen2 only)
  torch::Tensor w_o;        // [E, H D]
  torch::Tensor mlp_norm;   // [E]       post_attention_layernorm.weight
  torch::Tensor w_gate_up;  // [2F, E]   gate rows first, then up
  torch::Tensor w_down;     // [E, F]
};
TORCH_MODULE(DecoderLayer);

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }

  // tokens [B, T] int64. Without a cache: full causal attention over the T tokens, with an
  // optional key_mask [B, T] bool (false = padding, never attended to). With a cache: the tokens
  // occupy slots cache.length .. +T, attend to every earlier unmasked slot, and cache.length
  // advances by T. Returns logits [B, T, V] float32.
  torch::Tensor forward(const torch::Tensor& tokens, KVCache* cache = nullptr,
                        const torch::Tensor& key_mask = {});

  // As forward, but stops before the final norm + lm_head: hidden states [B, T, E].
  torch::Tensor forward_hidden(const torch::Tensor& tokens, KVCache* cache = nullptr,
                               const torch::Tensor& key_mask = {});
  // Final norm + lm_head on hidden states [..., E] -> logits [..., V].
  torch::Tensor logits_from_hidden(const torch::Tensor& hidden);

  KVCache make_cache(int64_t batch, int64_t max_len) const;

  // Hugging Face (name, tensor) pairs in HF order; tensors are views into the fused parameters.
  std::vector<std::pair<std::string, torch::Tensor>> hf_tensors() const;
  // Copies HF-named tensors (any float dtype; converted) into the parameters. Every expected name
  // must be present with its shape; an unexpected name is an error naming it.
  Status load_hf_tensors(const std::map<std::string, torch::Tensor>& tensors);

  // Seeded initialisation: normal(0, std) for matrices, ones for norms, zeros for biases.
  void init_weights(uint64_t seed, double std = 0.02);

  int64_t n_params() const;

  // Training on the CPU takes the one-node causal attention (attention_train.h) unless this is
  // off (tests compare the two; MESHRL_TRAIN_ATTENTION=plain turns it off for benchmarks).
  void set_fused_train_attention(bool on) { use_train_attention_ = on; }

  // LoRA (lora.h). attach_lora adds adapters as submodule "lora" (parameter names
  // "lora.layers.N.q_proj_B", ...) and freezes every base parameter, so that only the adapters' B
  // matrices require grad: optimizers and the mesh's trainable set (mesh/policy_params.h) then see
  // only B. Fails on an invalid config or when adapters are already attached.
  Status attach_lora(const LoraConfig& lora);
  LoraAdapters lora() const { return lora_; }  // an empty holder when none is attached
  // Folds W += (alpha / r) B A into the base weights, removes the adapters and makes the base
  // trainable again. Fails when none is attached.
  Status merge_lora();

 private:
  // x [B*T, E] normed -> attention output before o_proj, [B*T, H*D].
  torch::Tensor attention(DecoderLayerImpl& layer, const torch::Tensor& x, int64_t B, int64_t T, int64_t layer_index,
                          KVCache* cache, const torch::Tensor& key_mask, bool fused);
  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const;

  ModelConfig config_;
  torch::Tensor embed_;    // [V, E]
  torch::Tensor norm_;     // [E]
  torch::Tensor lm_head_;  // [V, E], or undefined when tied to embed_
  torch::nn::ModuleList layers_;
  LoraAdapters lora_{nullptr};
  RopeTable rope_;
  bool use_train_attention_ = true;
};
TORCH_MODULE(Transformer);

}  // namespace meshrl::model

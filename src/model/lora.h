// LoRA adapters for the Transformer: per decoder layer and target linear (lora_config.h), a frozen
// A [r, in] and a trained B [out, r], so the linear computes
//   y = x W^T + (alpha / r) (x A^T) B^T      ==  x (W + (alpha / r) B A)^T
// without ever forming B A. Owns the adapter tensors; knows nothing about training, files or the mesh.
//
// Why A is frozen, drawn from a seed the whole run shares, and only B trained (and exchanged):
// the mesh averages what nodes send. With A fixed and common, node i's change to the weight is
// s B_i A, and mean_i(s B_i A) = s (mean_i B_i) A exactly: averaging the B's IS averaging the
// weight updates, so every codec, error-feedback, hash and version rule of the mesh applies to B
// unchanged. Training A as well would make the mean of the products differ from the product of the
// means by a cross term (docs/ARCHITECTURE.md, "Adapters on the mesh", compares the alternatives).
// A random A of rank r is full rank with probability 1, and LoRA-FA-style studies find freezing
// it costs little; what it costs here is measured in BENCHMARKS.md when that run is done.
//
// A's values: uniform(-1/sqrt(in), 1/sqrt(in)) (PEFT's kaiming-uniform bound), each element from a
// counter-based hash of (seed, layer, target, index), so every machine, libtorch version and device
// draws the same A without sending it. B starts at zero: the adapted model equals the base.
#pragma once

#include <torch/torch.h>

#include <array>

#include "model/config.h"
#include "model/lora_config.h"

namespace meshrl::model {

struct LoraLayerImpl : torch::nn::Module {
  LoraLayerImpl(const ModelConfig& model, const LoraConfig& lora, int64_t layer);
  // Indexed by LoraTarget; undefined for a linear without an adapter.
  std::array<torch::Tensor, 7> a;  // [r, in]  frozen (requires_grad false), registered "<target>_A"
  std::array<torch::Tensor, 7> b;  // [out, r] trained, registered "<target>_B"
};
TORCH_MODULE(LoraLayer);

class LoraAdaptersImpl : public torch::nn::Module {
 public:
  LoraAdaptersImpl(const ModelConfig& model, const LoraConfig& lora);

  const LoraConfig& config() const { return lora_; }
  int64_t n_layers() const { return static_cast<int64_t>(layers_->size()); }
  bool has(LoraTarget t) const { return lora_.has_target(t); }
  torch::Tensor& a(int64_t layer, LoraTarget t);
  torch::Tensor& b(int64_t layer, LoraTarget t);

  // x [N, in] -> (alpha / r) (x A^T) B^T, [N, out]. The target must be present (MESHRL_CHECK).
  torch::Tensor apply(int64_t layer, LoraTarget t, const torch::Tensor& x);
  // (alpha / r) B A, [out, in]: the adapter's change to the base weight.
  torch::Tensor merged_delta(int64_t layer, LoraTarget t);

  // Redraws every A from lora.seed (as the constructor does) and zeroes every B.
  void reset_parameters();

 private:
  ModelConfig model_;
  LoraConfig lora_;
  torch::nn::ModuleList layers_;
};
TORCH_MODULE(LoraAdapters);

// The seeded A of one (layer, target), [r, in] float32 on the CPU (what reset_parameters writes).
torch::Tensor lora_a_init(const ModelConfig& model, const LoraConfig& lora, int64_t layer, LoraTarget t);

}  // namespace meshrl::model

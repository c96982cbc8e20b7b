#include "model/lora.h"

#include <cmath>

#include "core/check.h"
#include "core/splitmix64.h"

namespace meshrl::model {
namespace {

std::string param_name(LoraTarget t, const char* which) { return std::string(lora_target_name(t)) + "_" + which; }

}  // namespace

torch::Tensor lora_a_init(const ModelConfig& model, const LoraConfig& lora, int64_t layer, LoraTarget t) {
  const auto dims = lora_linear_dims(model, t);
  auto a = torch::empty({lora.rank, dims.in}, torch::kFloat32);
  float* p = a.data_ptr<float>();
  const double bound = 1.0 / std::sqrt(static_cast<double>(dims.in));
  // One stream per (seed, layer, target); element i is the i-th draw, independent of the others.
  const uint64_t stream = splitmix64(splitmix64(splitmix64(lora.seed) ^ static_cast<uint64_t>(layer)) ^
                                     static_cast<uint64_t>(static_cast<int>(t) + 1));
  for (int64_t i = 0; i < a.numel(); ++i) {
    const uint64_t bits = splitmix64(stream + static_cast<uint64_t>(i));
    const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;  // [0, 1)
    p[i] = static_cast<float>((2.0 * u - 1.0) * bound);
  }
  return a;
}

LoraLayerImpl::LoraLayerImpl(const ModelConfig& model, const LoraConfig& lora, int64_t layer) {
  for (LoraTarget t : kAllLoraTargets) {
    if (!lora.has_target(t)) continue;
    const auto dims = lora_linear_dims(model, t);
    const auto i = static_cast<size_t>(t);
    a[i] = register_parameter(param_name(t, "A"), lora_a_init(model, lora, layer, t), /*requires_grad=*/false);
    b[i] = register_parameter(param_name(t, "B"), torch::zeros({dims.out, lora.rank}));
  }
}

LoraAdaptersImpl::LoraAdaptersImpl(const ModelConfig& model, const LoraConfig& lora) : model_(model), lora_(lora) {
  MESHRL_CHECK(lora.rank >= 1 && !lora.targets.empty(), "[lora] rank must be >= 1 with at least one target");
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < model.n_layers; ++l) layers_->push_back(LoraLayer(model, lora, l));
}

torch::Tensor& LoraAdaptersImpl::a(int64_t layer, LoraTarget t) {
  auto& x = layers_[static_cast<size_t>(layer)]->as<LoraLayerImpl>()->a[static_cast<size_t>(t)];
  MESHRL_CHECK(x.defined(), "[lora] layer " << layer << " has no adapter on " << lora_target_name(t));
  return x;
}

torch::Tensor& LoraAdaptersImpl::b(int64_t layer, LoraTarget t) {
  auto& x = layers_[static_cast<size_t>(layer)]->as<LoraLayerImpl>()->b[static_cast<size_t>(t)];
  MESHRL_CHECK(x.defined(), "[lora] layer " << layer << " has no adapter on " << lora_target_name(t));
  return x;
}

torch::Tensor LoraAdaptersImpl::apply(int64_t layer, LoraTarget t, const torch::Tensor& x) {
  // Two thin products, r columns wide: never the [out, in] matrix B A.
  return torch::mm(torch::mm(x, a(layer, t).t()), b(layer, t).t()) * lora_.scale();
}

torch::Tensor LoraAdaptersImpl::merged_delta(int64_t layer, LoraTarget t) {
  return torch::mm(b(layer, t), a(layer, t)) * lora_.scale();
}

void LoraAdaptersImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < n_layers(); ++l)
    for (LoraTarget t : lora_.targets) {
      a(l, t).copy_(lora_a_init(model_, lora_, l, t));
      b(l, t).zero_();
    }
}

}  // namespace meshrl::model

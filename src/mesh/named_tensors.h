// NamedTensors: the parameter set the mesh exchanges, and the arithmetic on it that must be
// bit-exact across machines (apply_delta). The set is whatever the trainer trains (all weights
// now, LoRA adapters later): nothing here assumes full weights or a model's structure.
// Knows nothing about codecs, the network or the model.
#pragma once

#include <torch/torch.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace meshrl::mesh {

// names[i] names tensors[i]; tensors are float32 on the CPU (any shape, contiguous or not).
// The order is part of the value: content hashes and encodings follow it.
struct NamedTensors {
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;

  size_t size() const { return names.size(); }
  int64_t numel() const;  // P: total values over all tensors
};

// names.size() == tensors.size(); names non-empty and unique; tensors defined, float32, CPU.
// Fails (kInvalidArgument) naming `what`, the tensor and the problem.
Status check_named_tensors(const NamedTensors& set, std::string_view what);

// Both sets valid, with the same names in the same order and equal shapes.
Status check_same_layout(const NamedTensors& a, const NamedTensors& b, std::string_view what);

// Deep copy (contiguous CPU clones, also of tensors on a device); shares no memory with `set`.
NamedTensors clone_named_tensors(const NamedTensors& set);

// a - b elementwise (e.g. the pseudo-gradient theta_v - theta_local). Layouts must match.
Result<NamedTensors> subtract_named_tensors(const NamedTensors& a, const NamedTensors& b);

// params[i] += delta[i] in place, one IEEE float32 addition per element and nothing else (no
// scaling, no fused multiply-add), so every machine that applies the same decoded delta to the same
// params gets the same bits. Whoever scales a delta (the outer learning rate) must do it before
// encoding, and apply exactly what it sends. Works through views (e.g. model parameters, under
// no-grad). Fails (kInvalidArgument) before touching anything when the layouts differ.
Status apply_delta(NamedTensors& params, const NamedTensors& delta);

}  // namespace meshrl::mesh

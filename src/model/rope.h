// Rotary position embeddings in the Hugging Face convention: the head dimension is split in two
// halves (rotate_half), not interleaved pairs; inv_freq[i] = theta^(-2i/D).
// Owns a cos/sin table; knows nothing about attention.
#pragma once

#include <torch/torch.h>

namespace meshrl::model {

struct RopeTable {
  torch::Tensor cos;  // [T_max, D/2] float32
  torch::Tensor sin;  // [T_max, D/2] float32
};

RopeTable rope_table_make(int64_t max_len, int64_t head_dim, double theta, torch::Device device);

// x: [B, T, n, D] (any n heads); positions start..start+T-1. Returns a new tensor, same shape,
// multiplied by scale (the attention's 1/sqrt(D) folded in for q). Under autograd one node whose
// backward is the inverse rotation.
torch::Tensor rope_apply(const torch::Tensor& x, const RopeTable& table, int64_t start, double scale = 1.0);

}  // namespace meshrl::model

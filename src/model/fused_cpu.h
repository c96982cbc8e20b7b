// Fused element-wise kernels for inference on the CPU (no autograd): RMSNorm, rotary embedding
// applied in place to the fused q/k/v buffer, and SiLU(gate) * up.
//
// Why by hand: a decode step of the tiny model is ~200 small libtorch ops on [64, 256] tensors,
// each allocating its output and walking memory once; fusing each chain into one pass cuts the
// non-matmul part of a step by several times. TransformerImpl picks these only under NoGradGuard
// on float32 CPU tensors; for training, RMSNorm is a single autograd node with a hand-written
// backward (rms_norm_autograd below).
// Knows nothing about the model's structure.
#pragma once

#include <torch/torch.h>

namespace meshrl::model {

// x [N, E] float32 contiguous, weight [E] -> x * rsqrt(mean(x^2) + eps) * weight, [N, E].
torch::Tensor rms_norm_cpu(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// The same RMSNorm for training (any device/dtype): one autograd node with a hand-written
// backward, values as x * rsqrt(mean(x^2) + eps) * weight.
torch::Tensor rms_norm_autograd(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// qkv [B, T, H + 2 Hkv, D] float32 contiguous, modified in place: the first H + Hkv heads (q, k)
// are rotated for positions start..start+T-1 (HF rotate_half convention, cos/sin tables
// [T_max, D/2]), and q is multiplied by q_scale.
void rope_qk_inplace_cpu(torch::Tensor& qkv, int64_t n_heads, int64_t n_kv_heads, const torch::Tensor& cos,
                         const torch::Tensor& sin, int64_t start, float q_scale);

// gate_up [N, 2F] float32 contiguous (gate columns first) -> silu(gate) * up, [N, F].
torch::Tensor silu_mul_cpu(const torch::Tensor& gate_up);

}  // namespace meshrl::model

// Causal self-attention for training on the CPU as one autograd node: from the fused q/k/v
// projection's output (before the rotary embedding) to the [B*T, H*D] input of o_proj.
//
// Why by hand: under autograd the plain path is a chain of ~12 nodes per layer (split, two
// rotations, a permuted copy of q, the causal mask, softmax, the output's permuted copy), and its
// backward adds their mirror copies and a cat of the three gradients; those copies and mask passes
// were about a sixth of a tiny train step (BENCHMARKS.md "train"). Here the products read q, k and
// v where they lie in the rotated qkv buffer (strided batched products, no copies), forward writes
// each head's output in place in the result, and backward writes dq, dk, dv straight into one
// gradient of qkv's shape and rotates it back in place.
// Knows nothing about projections or the KV cache.
#pragma once

#include <torch/torch.h>

namespace meshrl::model {

// qkv [B, T, H + 2 Hkv, D] float32 on the CPU, q/k not yet rotated; positions 0..T-1, causal, no
// padding mask. q is rotated and multiplied by q_scale (the 1/sqrt(D) of the scores), k rotated,
// with cos/sin tables [T_max, D/2] (rope.h). Returns [B*T, H*D], head-major within a row, with
// the values of the plain path (TransformerImpl::attention without a cache).
torch::Tensor causal_attention_train_cpu(const torch::Tensor& qkv, int64_t n_heads, int64_t n_kv_heads,
                                         const torch::Tensor& cos, const torch::Tensor& sin, double q_scale);

// True when causal_attention_train_cpu can serve this qkv (CPU, float32, T >= 2).
bool causal_attention_train_cpu_supported(const torch::Tensor& qkv);

}  // namespace meshrl::model

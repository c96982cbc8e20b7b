// Single-token attention over the KV cache on the CPU, written as plain loops.
//
// Why by hand: for one new token per row, libtorch's batched matmul runs one small BLAS call per
// (row, kv head) — 256 calls of a [2 x 32] x [32 x t] product per layer for the tiny rollout —
// and that call overhead was 80% of a decode step. Here each (row, kv head) pair reads its keys
// and values once for all G query heads that share them, with no intermediate tensors.
// Knows nothing about projections or rotary embeddings (q and the cache arrive rotated).
#pragma once

#include <torch/torch.h>

namespace meshrl::model {

// q [B, H, D] float32 contiguous, already scaled by 1/sqrt(D); k_cache, v_cache [B, Hkv, T_max, D]
// float32 contiguous; keys 0..t-1 are read; key_mask [B, T_max] bool (false = padding) or
// undefined. Returns [B, H, D]. CPU only: callers use the matmul path elsewhere.
torch::Tensor attention_decode_cpu(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                   int64_t t, const torch::Tensor& key_mask);

// True when attention_decode_cpu can serve these tensors (CPU, float32, contiguous).
bool attention_decode_cpu_supported(const torch::Tensor& q, const torch::Tensor& k_cache);

}  // namespace meshrl::model

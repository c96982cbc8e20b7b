// KVCache: preallocated keys and values for incremental decoding, one pair of buffers per layer.
// Owns its tensors; knows nothing about how they are filled (see transformer.cpp).
//
// Layout per layer: k, v [B, Hkv, T_max, D], so attention reads k[:, :, :t] as a strided view
// without copies, and a grouped-query read needs no expansion to H heads.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace meshrl::model {

struct KVCache {
  std::vector<torch::Tensor> k;  // L x [B, Hkv, T_max, D]
  std::vector<torch::Tensor> v;  // L x [B, Hkv, T_max, D]
  torch::Tensor key_mask;        // [B, T_max] bool, false for padding slots never attended to
  int64_t length = 0;            // slots filled so far (same for every sequence: prompts are left-padded)
  bool padded = false;           // some key_mask entry is false (lets attention skip the mask when not)

  int64_t capacity() const { return k.empty() ? 0 : k[0].size(2); }
  int64_t batch() const { return k.empty() ? 0 : k[0].size(0); }
};

KVCache kv_cache_make(int64_t n_layers, int64_t batch, int64_t n_kv_heads, int64_t max_len, int64_t head_dim,
                      torch::Device device, torch::ScalarType dtype = torch::kFloat32);

// Forget the contents, keep the buffers (so a sampler can reuse one cache across batches).
void kv_cache_reset(KVCache& cache);

}  // namespace meshrl::model

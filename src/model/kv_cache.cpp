#include "model/kv_cache.h"

namespace meshrl::model {

KVCache kv_cache_make(int64_t n_layers, int64_t batch, int64_t n_kv_heads, int64_t max_len, int64_t head_dim,
                      torch::Device device, torch::ScalarType dtype) {
  KVCache c;
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  for (int64_t l = 0; l < n_layers; ++l) {
    c.k.push_back(torch::empty({batch, n_kv_heads, max_len, head_dim}, opts));
    c.v.push_back(torch::empty({batch, n_kv_heads, max_len, head_dim}, opts));
  }
  c.key_mask = torch::ones({batch, max_len}, torch::TensorOptions().dtype(torch::kBool).device(device));
  return c;
}

void kv_cache_reset(KVCache& cache) {
  cache.length = 0;
  cache.key_mask.fill_(true);
  cache.padded = false;
}

}  // namespace meshrl::model

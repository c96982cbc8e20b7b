#include "model/attention_decode.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"

namespace meshrl::model {

namespace {

// On x86-64 with GCC, compile AVX2 and baseline versions and pick at load time: the binary stays
// portable while machines with AVX2 get 8-wide loops. Not under ThreadSanitizer: the clones' ifunc
// resolver runs while the dynamic loader relocates, before TSan's runtime is up, and its
// instrumentation crashed every binary of the TSan build at start.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define MESHRL_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MESHRL_SIMD_CLONES
#endif

// One (row, kv head): G queries against t keys. scores is scratch of G*t floats.
MESHRL_SIMD_CLONES
void attend_one(const float* __restrict q, const float* __restrict k, const float* __restrict v,
                const bool* __restrict key_ok, int64_t G, int64_t t, int64_t D, float* __restrict scores,
                float* __restrict out) {
  for (int64_t g = 0; g < G; ++g) {
    const float* qg = q + g * D;
    float* sg = scores + g * t;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t s = 0; s < t; ++s) {
      if (key_ok && !key_ok[s]) {
        sg[s] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const float* ks = k + s * D;
      // 8 partial sums so the reduction vectorises without -ffast-math.
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t d = 0;
      for (; d + 8 <= D; d += 8)
        for (int i = 0; i < 8; ++i) acc[i] += qg[d + i] * ks[d + i];
      float dot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      for (; d < D; ++d) dot += qg[d] * ks[d];
      sg[s] = dot;
      mx = dot > mx ? dot : mx;
    }
    float sum = 0;
    for (int64_t s = 0; s < t; ++s) {
      float e = std::exp(sg[s] - mx);
      sg[s] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t s = 0; s < t; ++s) sg[s] *= inv;
  }
  for (int64_t i = 0; i < G * D; ++i) out[i] = 0;
  // Each value row is read once and added into all G outputs.
  for (int64_t s = 0; s < t; ++s) {
    const float* vs = v + s * D;
    for (int64_t g = 0; g < G; ++g) {
      const float p = scores[g * t + s];
      if (p == 0.0f) continue;
      float* og = out + g * D;
      for (int64_t d = 0; d < D; ++d) og[d] += p * vs[d];
    }
  }
}

}  // namespace

bool attention_decode_cpu_supported(const torch::Tensor& q, const torch::Tensor& k_cache) {
  return q.device().is_cpu() && k_cache.device().is_cpu() && q.scalar_type() == torch::kFloat32 &&
         k_cache.scalar_type() == torch::kFloat32 && k_cache.is_contiguous();
}

torch::Tensor attention_decode_cpu(const torch::Tensor& q_in, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                   int64_t t, const torch::Tensor& key_mask) {
  MESHRL_CHECK(q_in.dim() == 3 && k_cache.dim() == 4, "[attention_decode] q must be [B, H, D] and the cache [B, Hkv, T_max, D]");
  auto q = q_in.contiguous();
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2), Hkv = k_cache.size(1), T_max = k_cache.size(2);
  MESHRL_CHECK(k_cache.size(0) == B && k_cache.size(3) == D && H % Hkv == 0 && t <= T_max && t > 0,
               "[attention_decode] shapes disagree: q [" << B << "," << H << "," << D << "], cache [" << k_cache.size(0)
                                                        << "," << Hkv << "," << T_max << "," << k_cache.size(3) << "], t " << t);
  MESHRL_CHECK(v_cache.is_contiguous() && v_cache.sizes() == k_cache.sizes(), "[attention_decode] v cache must match k cache");
  const int64_t G = H / Hkv;
  auto out = torch::empty({B, H, D}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = k_cache.data_ptr<float>();
  const float* vp = v_cache.data_ptr<float>();
  float* op = out.data_ptr<float>();
  torch::Tensor mask = key_mask.defined() ? key_mask.contiguous() : torch::Tensor();
  const bool* mp = mask.defined() ? mask.data_ptr<bool>() : nullptr;
  at::parallel_for(0, B * Hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(G * t);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / Hkv, j = i % Hkv;
      const int64_t kv_off = (b * Hkv + j) * T_max * D;
      attend_one(qp + (b * H + j * G) * D, kp + kv_off, vp + kv_off, mp ? mp + b * T_max : nullptr, G, t, D,
                 scores.data(), op + (b * H + j * G) * D);
    }
  });
  return out;
}

}  // namespace meshrl::model

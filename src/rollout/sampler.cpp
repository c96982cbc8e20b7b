#include "rollout/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/splitmix64.h"

namespace meshrl::rollout {

double uniform_from(uint64_t seed, uint64_t counter) {
  uint64_t r = splitmix64(splitmix64(seed) ^ (counter * 0xD1B54A32D192ED03ull));
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

uint64_t mix_seed(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x243F6A8885A308D3ull;
  for (uint64_t p : parts) h = splitmix64(h ^ splitmix64(p));
  return h;
}

SampleResult sample_tokens(const torch::Tensor& logits, const SamplingConfig& config,
                           const std::vector<uint64_t>& row_seeds, int64_t step) {
  MESHRL_CHECK(logits.dim() == 2, "[sampler] logits must be [B, V], got dim " << logits.dim());
  const int64_t B = logits.size(0), V = logits.size(1);
  MESHRL_CHECK(static_cast<int64_t>(row_seeds.size()) == B,
               "[sampler] need one seed per row: " << row_seeds.size() << " seeds for B = " << B);
  auto x = logits.to(torch::kFloat32);
  if (config.temperature <= 0.0) {
    auto ids = x.argmax(-1);
    auto lp = torch::log_softmax(x, -1).gather(1, ids.unsqueeze(1)).squeeze(1);
    return {ids, lp};
  }
  x = x / config.temperature;
  if (config.top_k > 0 && config.top_k < V) {
    auto kth = std::get<0>(x.topk(config.top_k, -1)).narrow(1, config.top_k - 1, 1);  // [B, 1]
    x = x.masked_fill(x < kth, -std::numeric_limits<float>::infinity());
  }
  if (config.top_p < 1.0) {
    // Keep the smallest prefix of tokens (by descending prob) whose mass reaches top_p; the top
    // token is always kept.
    auto [sorted, order] = x.sort(-1, /*descending=*/true);
    auto cum = torch::softmax(sorted, -1).cumsum(-1);
    auto drop_sorted = (cum - torch::softmax(sorted, -1)) >= config.top_p;  // mass before this token
    auto drop = torch::zeros_like(drop_sorted).scatter(1, order, drop_sorted);
    x = x.masked_fill(drop, -std::numeric_limits<float>::infinity());
  }
  auto logp = torch::log_softmax(x, -1);  // [B, V]
  auto cdf = logp.exp().cumsum(-1);       // [B, V]
  std::vector<float> u(B);
  auto total = cdf.select(1, V - 1);
  auto total_a = total.to(torch::kCPU).contiguous();
  for (int64_t b = 0; b < B; ++b) {
    const float t = total_a.data_ptr<float>()[b];
    // u < total strictly, so some cdf entry exceeds it even after float rounding.
    u[b] = std::min(static_cast<float>(uniform_from(row_seeds[b], static_cast<uint64_t>(step)) * t), std::nextafter(t, 0.0f));
  }
  auto ut = torch::from_blob(u.data(), {B, 1}, torch::kFloat32).to(cdf.device());
  // First index whose cdf exceeds u: a zero-probability token has the same cdf as its
  // predecessor, so it can never be chosen.
  auto ids = torch::searchsorted(cdf, ut, /*out_int32=*/false, /*right=*/true).squeeze(1).clamp_max(V - 1);
  auto lp = logp.gather(1, ids.unsqueeze(1)).squeeze(1);
  return {ids, lp};
}

}  // namespace meshrl::rollout

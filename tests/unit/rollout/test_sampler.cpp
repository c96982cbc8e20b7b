// Sampler checks on distributions small enough to verify by hand:
//   ctest --test-dir build -R Sampler
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "rollout/sampler.h"

using namespace meshrl::rollout;

namespace {
std::vector<uint64_t> seeds_for(int64_t n, uint64_t base) {
  std::vector<uint64_t> s;
  for (int64_t i = 0; i < n; ++i) s.push_back(mix_seed({base, uint64_t(i)}));
  return s;
}
}  // namespace

TEST(Sampler, FrequenciesMatchFourProbabilities) {
  // p = [0.1, 0.2, 0.3, 0.4]; 40000 draws: each frequency within 5 standard errors.
  const int64_t N = 40000;
  auto p = torch::tensor({0.1f, 0.2f, 0.3f, 0.4f});
  auto logits = p.log().unsqueeze(0).expand({N, 4}).contiguous();
  auto r = sample_tokens(logits, {}, seeds_for(N, 11), 0);
  auto counts = torch::bincount(r.ids, {}, 4).to(torch::kFloat64) / N;
  for (int i = 0; i < 4; ++i) {
    double pi = p[i].item<double>(), se = std::sqrt(pi * (1 - pi) / N);
    EXPECT_NEAR(counts[i].item<double>(), pi, 5 * se) << "token " << i;
  }
  // Log-probs are those of the chosen tokens.
  EXPECT_TRUE(torch::allclose(r.logprobs, p.log().index_select(0, r.ids), 1e-5, 1e-6));
}

TEST(Sampler, GreedyTakesArgmaxWithItsLogProb) {
  auto logits = torch::tensor({{0.0f, 3.0f, 1.0f}, {5.0f, -1.0f, 4.9f}});
  SamplingConfig c;
  c.temperature = 0;
  auto r = sample_tokens(logits, c, seeds_for(2, 1), 0);
  EXPECT_EQ(r.ids[0].item<int64_t>(), 1);
  EXPECT_EQ(r.ids[1].item<int64_t>(), 0);
  EXPECT_NEAR(r.logprobs[0].item<float>(), torch::log_softmax(logits[0], 0)[1].item<float>(), 1e-6);
}

TEST(Sampler, TopKAndTopPNeverPickFilteredTokens) {
  const int64_t N = 5000;
  auto p = torch::tensor({0.05f, 0.5f, 0.15f, 0.3f});
  auto logits = p.log().unsqueeze(0).expand({N, 4}).contiguous();
  SamplingConfig k2;
  k2.top_k = 2;  // keeps tokens 1 and 3: renormalised 0.625 / 0.375
  auto r = sample_tokens(logits, k2, seeds_for(N, 2), 0);
  auto counts = torch::bincount(r.ids, {}, 4);
  EXPECT_EQ(counts[0].item<int64_t>() + counts[2].item<int64_t>(), 0);
  EXPECT_NEAR(r.logprobs[0].item<float>(), std::log(r.ids[0].item<int64_t>() == 1 ? 0.625 : 0.375), 1e-5);
  SamplingConfig p07;
  p07.top_p = 0.7;  // sorted 0.5, 0.3 (cum 0.8 >= 0.7) -> keep tokens 1 and 3
  r = sample_tokens(logits, p07, seeds_for(N, 3), 0);
  counts = torch::bincount(r.ids, {}, 4);
  EXPECT_EQ(counts[0].item<int64_t>() + counts[2].item<int64_t>(), 0);
  EXPECT_GT(counts[1].item<int64_t>(), 0);
  EXPECT_GT(counts[3].item<int64_t>(), 0);
}

TEST(Sampler, RowDependsOnlyOnItsSeedAndStep) {
  auto logits = torch::randn({6, 50});
  auto seeds = seeds_for(6, 9);
  auto all = sample_tokens(logits, {}, seeds, 4);
  // Row 4 alone, with its seed, draws the same token as inside the batch.
  auto one = sample_tokens(logits.narrow(0, 4, 1), {}, {seeds[4]}, 4);
  EXPECT_EQ(one.ids[0].item<int64_t>(), all.ids[4].item<int64_t>());
  // A different step gives a different stream: over 200 steps the choices are not all equal.
  int differ = 0;
  for (int s = 0; s < 200; ++s)
    differ += sample_tokens(logits, {}, seeds, s).ids[0].item<int64_t>() != all.ids[0].item<int64_t>();
  EXPECT_GT(differ, 0);
}

TEST(Sampler, UniformIsInUnitIntervalAndRoughlyFlat) {
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    double u = uniform_from(5, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 5 * std::sqrt(1.0 / 12 / 100000));
}

// Schedule values, gradient clipping, AdamW's decoupled decay and the pooled second moment,
// checked by hand and, for the pooling, statistically on seeded noise.
//   OMP_NUM_THREADS=1 build/tests/test_rl --gtest_filter='Optimizer*:Schedule*:ClipGrad*:PooledSecondMoment*'
#include <gtest/gtest.h>

#include <cmath>

#include "rl/optimizer.h"

namespace meshrl::rl {
namespace {

TEST(Schedule, WarmupThenCosineToTheFloor) {
  // lr 1, 4 warm-up steps, 13 steps in all: the cosine spans steps 4 .. 12 (8 intervals).
  const ScheduleConfig c{1.0, 4, 13, 0.1};
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 0), 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 3), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 4), 1.0);                                     // p = 0: the peak
  EXPECT_NEAR(scheduled_lr(c, 6), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4)), 1e-12);  // p = 1/4
  EXPECT_NEAR(scheduled_lr(c, 8), 0.55, 1e-12);                                  // p = 1/2: halfway
  EXPECT_NEAR(scheduled_lr(c, 12), 0.1, 1e-12);                                  // last step: the floor
  EXPECT_NEAR(scheduled_lr(c, 100), 0.1, 1e-12);                                 // past the end: stays
}

TEST(Schedule, NoWarmupStartsAtThePeak) {
  const ScheduleConfig c{2e-3, 0, 3, 0.0};
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 0), 2e-3);
  EXPECT_NEAR(scheduled_lr(c, 1), 1e-3, 1e-15);
  EXPECT_NEAR(scheduled_lr(c, 2), 0.0, 1e-15);
}

TEST(ClipGrad, ScalesAllGradientsByOneGlobalFactor) {
  auto a = torch::zeros({2}, torch::requires_grad());
  auto b = torch::zeros({2, 1}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({{0.0f}, {4.0f}});
  const double norm = clip_grad_norm({a, b}, 1.0);
  EXPECT_NEAR(norm, 5.0, 1e-6);  // sqrt(9 + 16)
  EXPECT_NEAR(a.grad()[0].item<float>(), 0.6, 1e-5);
  EXPECT_NEAR(b.grad()[1][0].item<float>(), 0.8, 1e-5);
}

TEST(ClipGrad, LeavesSmallGradientsAndOffAlone) {
  auto a = torch::zeros({2}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({3.0f, 4.0f});
  EXPECT_NEAR(clip_grad_norm({a}, 10.0), 5.0, 1e-6);
  EXPECT_FLOAT_EQ(a.grad()[1].item<float>(), 4.0f);
  EXPECT_NEAR(clip_grad_norm({a}, 0.0), 5.0, 1e-6);  // 0 = off, norm still reported
  EXPECT_FLOAT_EQ(a.grad()[1].item<float>(), 4.0f);
}

TEST(Optimizer, FirstAdamStepMovesByLrTimesSignAndDecaysOnlyMatrices) {
  auto w = torch::ones({2, 2}, torch::requires_grad());
  auto g = torch::ones({2}, torch::requires_grad());
  OptimizerConfig c;
  c.schedule = {0.1, 0, 10, 1.0};  // constant lr 0.1
  c.weight_decay = 0.5;
  c.grad_clip = 0;
  c.eps = 1e-12;
  Optimizer opt({w, g}, c);
  w.mutable_grad() = torch::tensor({{1.0f, -1.0f}, {0.0f, 2.0f}});
  g.mutable_grad() = torch::tensor({-3.0f, 0.0f});
  const auto info = opt.step();
  EXPECT_DOUBLE_EQ(info.lr, 0.1);
  EXPECT_FALSE(info.skipped);
  // AdamW: p *= 1 - lr * wd (matrices only), then p -= lr * m_hat / sqrt(v_hat) = lr * sign(grad).
  const float decayed = 1.0f - 0.1f * 0.5f;
  EXPECT_NEAR(w[0][0].item<float>(), decayed - 0.1f, 1e-6);
  EXPECT_NEAR(w[0][1].item<float>(), decayed + 0.1f, 1e-6);
  EXPECT_NEAR(w[1][0].item<float>(), decayed, 1e-6);  // zero gradient: only the decay
  EXPECT_NEAR(w[1][1].item<float>(), decayed - 0.1f, 1e-6);
  EXPECT_NEAR(g[0].item<float>(), 1.1f, 1e-6);  // a norm gain: no decay
  EXPECT_NEAR(g[1].item<float>(), 1.0f, 1e-6);
  EXPECT_EQ(opt.step_count(), 1);
  EXPECT_FLOAT_EQ(w.grad().abs().sum().item<float>(), 0.0f);  // gradients zeroed
}

TEST(Optimizer, NonFiniteGradientSkipsTheUpdate) {
  auto w = torch::ones({2, 2}, torch::requires_grad());
  OptimizerConfig c;
  c.schedule = {0.1, 0, 10, 1.0};
  Optimizer opt({w}, c);
  w.mutable_grad() = torch::full({2, 2}, std::nanf(""));
  const auto info = opt.step();
  EXPECT_TRUE(info.skipped);
  EXPECT_EQ(opt.step_count(), 0);
  EXPECT_FLOAT_EQ(w.sum().item<float>(), 4.0f);
}

TEST(Optimizer, ClipsBeforeTheStep) {
  // Adam's first step is lr * g / (|g| + eps): scale-free but for eps, so eps = 1 makes the step's
  // size show the gradient's and hence the clip. Clipped to norm 1, g = (30, 40) / 50 = (0.6, 0.8):
  // w = -0.1 * (0.6 / 1.6, 0.8 / 1.8). Unclipped it would be -0.1 * (30 / 31, 40 / 41) = (-0.097, -0.098).
  auto w = torch::zeros({1, 2}, torch::requires_grad());
  OptimizerConfig c;
  c.schedule = {0.1, 0, 10, 1.0};  // constant lr 0.1
  c.grad_clip = 1.0;
  c.eps = 1.0;
  Optimizer opt({w}, c);
  w.mutable_grad() = torch::tensor({{30.0f, 40.0f}});
  EXPECT_NEAR(opt.step().grad_norm, 50.0, 1e-4);  // reported before clipping
  EXPECT_NEAR(w[0][0].item<float>(), -0.1 * 0.6 / 1.6, 1e-6);
  EXPECT_NEAR(w[0][1].item<float>(), -0.1 * 0.8 / 1.8, 1e-6);
}

OptimizerConfig pooled_config(double K) {
  OptimizerConfig c;
  c.schedule = {0.1, 0, 1000, 1.0};  // constant lr 0.1
  c.grad_clip = 0;
  c.eps = 1e-12;
  c.pooled_batches = K;
  return c;
}

TEST(PooledSecondMoment, FirstStepDividesByTheNoiseCorrectedMomentByHand) {
  // Step 1 (bias corrections undo the EMAs): p -= lr * g / sqrt(max(g^2 - (1 - 1/K) d^2, g^2 / K)).
  auto p = torch::zeros({3}, torch::requires_grad());
  Optimizer opt({p}, pooled_config(4));
  p.mutable_grad() = torch::tensor({2.0f, 2.0f, 1.0f});
  const auto d = torch::tensor({2.0f, 0.0f, 2.0f});
  opt.step({d});
  EXPECT_NEAR(p[0].item<float>(), -0.1f * 2 / 1, 1e-5);     // 4 - 0.75 * 4 = 1 (= the floor 4 / 4)
  EXPECT_NEAR(p[1].item<float>(), -0.1f * 2 / 2, 1e-5);     // no spread: AdamW's lr * sign
  EXPECT_NEAR(p[2].item<float>(), -0.1f * 1 / 0.5f, 1e-5);  // 1 - 3 < 0: the floor 1 / 4
}

TEST(PooledSecondMoment, WithoutSpreadItIsTorchAdamW) {
  // d = 0 leaves EMA(g^2) as the denominator: the hand-written update must then be AdamW's own,
  // decay and bias corrections included, over several steps.
  torch::manual_seed(3);
  auto a = torch::randn({4, 3}).requires_grad_(), b = a.detach().clone().requires_grad_();
  OptimizerConfig plain = pooled_config(1), pooled = pooled_config(4);
  plain.weight_decay = pooled.weight_decay = 0.3;
  Optimizer oa({a}, plain), ob({b}, pooled);
  for (int s = 0; s < 5; ++s) {
    const auto g = torch::randn({4, 3});
    a.mutable_grad() = g.clone();
    b.mutable_grad() = g.clone();
    oa.step();
    ob.step({torch::zeros({4, 3})});
  }
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6)) << (a - b).abs().max().item<float>();
  const auto sa = oa.state(), sb = ob.state();
  EXPECT_EQ(sb.params[0]->step, 5);
  EXPECT_TRUE(torch::allclose(sa.params[0]->exp_avg_sq, sb.params[0]->exp_avg_sq));
  ASSERT_TRUE(sb.params[0]->noise_sq.defined());
  EXPECT_FALSE(sa.params[0]->noise_sq.defined()) << "plain AdamW keeps no noise EMA";
}

// K simulated nodes see gradients mu + noise from batches of n samples, split into halves; one
// pooled node sees all K n samples. Returns RMS(mean of the K nodes' last steps) / RMS(the pooled
// node's last step) over coordinates where mu = 0, so only the preconditioner's scale is compared.
double noise_step_ratio(double K_in_optimizer, uint64_t seed) {
  const int K = 4, n = 8, D = 4000, T = 150;
  torch::manual_seed(seed);
  std::vector<torch::Tensor> nodes;
  std::vector<std::unique_ptr<Optimizer>> opts;
  for (int k = 0; k < K; ++k) {
    nodes.push_back(torch::zeros({D}, torch::requires_grad()));
    opts.push_back(std::make_unique<Optimizer>(std::vector<torch::Tensor>{nodes.back()}, pooled_config(K_in_optimizer)));
  }
  auto pooled = torch::zeros({D}, torch::requires_grad());
  Optimizer pooled_opt({pooled}, pooled_config(1));
  torch::Tensor node_step, pooled_step;
  for (int t = 0; t < T; ++t) {
    const auto samples = torch::randn({K, n, D});  // one sample's gradient: pure noise, sd 1
    node_step = torch::zeros({D});
    for (int k = 0; k < K; ++k) {
      const auto ga = samples[k].narrow(0, 0, n / 2).mean(0), gb = samples[k].narrow(0, n / 2, n / 2).mean(0);
      const auto before = nodes[k].detach().clone();
      nodes[k].mutable_grad() = 0.5 * (ga + gb);
      if (K_in_optimizer > 1) opts[k]->step({0.5 * (ga - gb)});  // sqrt(wA wB) = 1/2
      else opts[k]->step();
      node_step += (nodes[k].detach() - before) / K;
    }
    const auto before = pooled.detach().clone();
    pooled.mutable_grad() = samples.reshape({K * n, D}).mean(0);
    pooled_opt.step();
    pooled_step = pooled.detach() - before;
  }
  return node_step.pow(2).mean().sqrt().item<double>() / pooled_step.pow(2).mean().sqrt().item<double>();
}

TEST(PooledSecondMoment, MeanOfKNodeStepsMatchesOnePooledStepWherePlainAdamWIsHalfAsLarge) {
  // Pure noise: each node's EMA(g^2) is K times the pooled batch's, so plain AdamW steps are
  // 1/sqrt(K) = 0.5 of the pooled step's size; the noise-corrected moment restores ~1 (0.93: where
  // the noisy estimate dips, the floor max(., EMA(g^2) / K) lifts it). Seeds 1-5, replayed in
  // PyTorch: plain 0.500-0.501, pooled 0.930-0.934; the margins leave room for float rounding only.
  for (uint64_t seed : {1u, 2u}) {
    const double plain = noise_step_ratio(1, seed), pooled = noise_step_ratio(4, seed);
    EXPECT_NEAR(plain, 0.5, 0.03) << "seed " << seed;
    EXPECT_NEAR(pooled, 0.93, 0.03) << "seed " << seed;
  }
}

TEST(PooledSecondMoment, ClippingScalesTheSpreadWithTheGradient) {
  // A clipped gradient with its spread scaled alike gives the step of the unclipped pair: both
  // moments scale by the same factor, which Adam's ratio cancels (eps aside).
  auto a = torch::zeros({2}, torch::requires_grad()), b = torch::zeros({2}, torch::requires_grad());
  OptimizerConfig clipped = pooled_config(4);
  clipped.grad_clip = 1.0;
  Optimizer oa({a}, clipped), ob({b}, pooled_config(4));
  a.mutable_grad() = torch::tensor({30.0f, 40.0f});
  b.mutable_grad() = torch::tensor({30.0f, 40.0f});
  oa.step({torch::tensor({30.0f, 10.0f})});
  ob.step({torch::tensor({30.0f, 10.0f})});
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6)) << a << b;
  EXPECT_NEAR(a[1].item<float>(), -0.1f * 40 / std::sqrt(1600 - 0.75f * 100), 1e-5);
}

TEST(PooledSecondMoment, PooledClipUsesThePooledBatchsEstimatedNorm) {
  // |g|^2 = 2500, |d|^2 = 1000, K = 4: the pooled batch's norm is sqrt(2500 - 0.75 * 1000) = 41.83,
  // not this batch's 50, so with clip 10 both g and d scale by 10 / 41.83 instead of 10 / 50.
  for (const bool pooled_clip : {false, true}) {
    auto p = torch::zeros({2}, torch::requires_grad());
    OptimizerConfig c = pooled_config(4);
    c.grad_clip = 10.0;
    c.pooled_clip = pooled_clip;
    Optimizer opt({p}, c);
    p.mutable_grad() = torch::tensor({30.0f, 40.0f});
    auto d = torch::tensor({30.0f, 10.0f});
    const auto info = opt.step({d});
    const double norm = pooled_clip ? std::sqrt(2500.0 - 0.75 * 1000.0) : 50.0;
    EXPECT_NEAR(info.grad_norm, norm, 1e-4) << "pooled_clip " << pooled_clip;
    EXPECT_NEAR(d[0].item<float>(), 30.0 * 10.0 / norm, 1e-4) << "pooled_clip " << pooled_clip;
    // One step of Adam is scale-free: the clip factor shows only in the moments' scale.
    EXPECT_NEAR(p[1].item<float>(), -0.1f * 40 / std::sqrt(1600 - 0.75f * 100), 1e-5);
  }
  // Pure noise (|g|^2 = |d|^2): the estimate's floor |g| / sqrt(K), as v's.
  auto p = torch::zeros({1}, torch::requires_grad());
  OptimizerConfig c = pooled_config(4);
  c.pooled_clip = true;
  Optimizer opt({p}, c);
  p.mutable_grad() = torch::tensor({6.0f});
  EXPECT_NEAR(opt.step({torch::tensor({6.0f})}).grad_norm, 3.0, 1e-6);
}

}  // namespace
}  // namespace meshrl::rl

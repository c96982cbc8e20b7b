// Schedule values, gradient clipping and AdamW's decoupled decay, checked by hand.
//   OMP_NUM_THREADS=1 build/tests/test_rl --gtest_filter='Optimizer*:Schedule*:ClipGrad*'
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
  auto w = torch::zeros({1, 2}, torch::requires_grad());
  OptimizerConfig c;
  c.schedule = {0.1, 0, 10, 1.0};
  c.grad_clip = 1.0;
  Optimizer opt({w}, c);
  w.mutable_grad() = torch::tensor({{30.0f, 40.0f}});
  EXPECT_NEAR(opt.step().grad_norm, 50.0, 1e-4);
}

}  // namespace
}  // namespace meshrl::rl

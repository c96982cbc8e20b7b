// The GRPO clipped surrogate on tensors written out by hand, and its gradient against central
// finite differences:
//   ctest --test-dir build -R 'GrpoLoss' --output-on-failure
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/check.h"
#include "rl/grpo_loss.h"

using namespace meshrl::rl;

namespace {

// Two sequences of three tokens, logp_old = 0 so ratio = exp(logp_new). Clip 0.8 .. 1.28.
//   row 0, A = +1: ratios 1.0, 1.5, 0.5, all masked in.
//     1.0 -> -1.0; 1.5 > 1.28 -> clipped -1.28 (clip active); 0.5 -> -0.5 (A > 0: no floor)
//   row 1, A = -2: ratios 0.5, 1.5, (2.0, masked out and given a huge log-prob).
//     0.5 < 0.8 -> clipped +1.6 (clip active); 1.5 -> +3.0 (A < 0: no ceiling)
//   sum 1.82 over 5 tokens.
struct HandCase {
  torch::Tensor logp_new, logp_old, adv, mask;
  HandCase() {
    logp_new = torch::log(torch::tensor({{1.0, 1.5, 0.5}, {0.5, 1.5, 2.0}}, torch::kFloat64));
    logp_new[1][2] = 500.0;  // exp would overflow: masked tokens must not leak inf or NaN
    logp_new.requires_grad_();
    logp_old = torch::zeros({2, 3}, torch::kFloat64);
    adv = torch::tensor({1.0, -2.0}, torch::kFloat64);
    mask = torch::tensor({{1.0, 1.0, 1.0}, {1.0, 1.0, 0.0}}, torch::kFloat64);
  }
};

GrpoLossConfig config_with(LossNormalization n, int64_t max_len = 0) {
  GrpoLossConfig c;
  c.clip_low = 0.2;
  c.clip_high = 0.28;
  c.normalization = n;
  c.max_len = max_len;
  return c;
}

}  // namespace

TEST(GrpoLoss, TokenNormalisationByHand) {
  HandCase h;
  auto out = grpo_loss(h.logp_new, h.logp_old, h.adv, h.mask, config_with(LossNormalization::kToken));
  EXPECT_NEAR(out.loss.item<double>(), 1.82 / 5, 1e-12);
  EXPECT_NEAR(out.clip_fraction, 2.0 / 5, 1e-12);
  EXPECT_NEAR(out.ratio_mean, (1.0 + 1.5 + 0.5 + 0.5 + 1.5) / 5, 1e-12);
  EXPECT_EQ(out.kl, 0.0);
  // d loss / d logp_new = -ratio * A / 5 where unclipped, 0 where clipped or masked
  out.loss.backward();
  auto expected = torch::tensor({{-1.0, 0.0, -0.5}, {0.0, 3.0, 0.0}}, torch::kFloat64) / 5;
  EXPECT_TRUE(torch::allclose(h.logp_new.grad(), expected, 1e-12, 1e-12)) << h.logp_new.grad();
}

TEST(GrpoLoss, SequenceNormalisationByHand) {
  HandCase h;
  auto out = grpo_loss(h.logp_new, h.logp_old, h.adv, h.mask, config_with(LossNormalization::kSequence));
  // row 0: (-1 - 1.28 - 0.5) / 3 = -0.926667; row 1: (1.6 + 3.0) / 2 = 2.3; mean 0.686667
  EXPECT_NEAR(out.loss.item<double>(), (-2.78 / 3 + 2.3) / 2, 1e-12);
}

TEST(GrpoLoss, ConstantNormalisationByHand) {
  HandCase h;
  auto out = grpo_loss(h.logp_new, h.logp_old, h.adv, h.mask, config_with(LossNormalization::kConstant, 4));
  EXPECT_NEAR(out.loss.item<double>(), 1.82 / (2 * 4), 1e-12);
}

TEST(GrpoLoss, SymmetricClipChangesWhichTokensClip) {
  // With clip_high = 0.2 the 1.5 ratio of row 0 still clips at 1.2: -1 - 1.2 - 0.5 + 1.6 + 3.0 = 1.9
  HandCase h;
  auto c = config_with(LossNormalization::kToken);
  c.clip_high = 0.2;
  EXPECT_NEAR(grpo_loss(h.logp_new, h.logp_old, h.adv, h.mask, c).loss.item<double>(), 1.9 / 5, 1e-12);
}

TEST(GrpoLoss, KlK3ByHand) {
  // A = 0, ratio 1: only the KL term. ref - new = ln 2, 0, -ln 2, (masked: 7)
  //   k3 = 2 - ln 2 - 1 = 0.306853, 0, 0.5 + ln 2 - 1 = 0.193147; mean over 3 masked tokens
  auto logp_new = torch::zeros({1, 4}, torch::kFloat64).requires_grad_();
  auto logp_ref = torch::tensor({{std::log(2.0), 0.0, -std::log(2.0), 7.0}}, torch::kFloat64);
  auto mask = torch::tensor({{1.0, 1.0, 1.0, 0.0}}, torch::kFloat64);
  auto c = config_with(LossNormalization::kToken);
  c.kl_coef = 0.1;
  auto out = grpo_loss(logp_new, torch::zeros({1, 4}, torch::kFloat64), torch::zeros({1}, torch::kFloat64), mask, c, logp_ref);
  const double k3_mean = ((2 - std::log(2.0) - 1) + 0 + (0.5 + std::log(2.0) - 1)) / 3;
  EXPECT_NEAR(out.kl, k3_mean, 1e-12);
  EXPECT_NEAR(out.kl, 0.5 / 3, 1e-12);  // the two ln 2 cancel: (1 + -0.5) / 3
  EXPECT_NEAR(out.loss.item<double>(), 0.1 * k3_mean, 1e-12);
  // kl_coef 0: the metric is still reported, the loss ignores it
  c.kl_coef = 0.0;
  auto off = grpo_loss(logp_new, torch::zeros({1, 4}, torch::kFloat64), torch::zeros({1}, torch::kFloat64), mask, c, logp_ref);
  EXPECT_NEAR(off.kl, k3_mean, 1e-12);
  EXPECT_EQ(off.loss.item<double>(), 0.0);
}

TEST(GrpoLoss, AllMaskedGivesZeroNotNaN) {
  HandCase h;
  for (auto n : {LossNormalization::kToken, LossNormalization::kSequence}) {
    auto out = grpo_loss(h.logp_new, h.logp_old, h.adv, torch::zeros({2, 3}, torch::kFloat64), config_with(n));
    EXPECT_EQ(out.loss.item<double>(), 0.0);
    EXPECT_EQ(out.clip_fraction, 0.0);
  }
}

TEST(GrpoLoss, GradientMatchesFiniteDifferences) {
  torch::manual_seed(11);
  const int64_t B = 3, T = 5;
  auto base = (-2.0 + 0.5 * torch::randn({B, T}, torch::kFloat64));
  auto logp_old = base + 0.3 * torch::randn({B, T}, torch::kFloat64);  // ratios spread across both clips
  auto logp_ref = base + 0.2 * torch::randn({B, T}, torch::kFloat64);
  auto adv = torch::tensor({1.3, -0.7, 0.4}, torch::kFloat64);
  auto mask = torch::tensor({{1, 1, 1, 1, 0}, {1, 1, 1, 0, 0}, {0, 1, 1, 1, 1}}, torch::kFloat64);
  for (auto n : {LossNormalization::kToken, LossNormalization::kSequence, LossNormalization::kConstant}) {
    auto c = config_with(n, 6);
    c.kl_coef = 0.05;
    auto x = base.clone().requires_grad_();
    auto out = grpo_loss(x, logp_old, adv, mask, c, logp_ref);
    EXPECT_GT(out.clip_fraction, 0.0);  // the check covers clipped tokens too
    auto g = torch::autograd::grad({out.loss}, {x})[0];
    const double h = 1e-6;
    auto fd = torch::zeros_like(base);
    for (int64_t i = 0; i < B * T; ++i) {
      auto xp = base.clone(), xm = base.clone();
      xp.view({-1})[i] += h;
      xm.view({-1})[i] -= h;
      fd.view({-1})[i] = (grpo_loss(xp, logp_old, adv, mask, c, logp_ref).loss.item<double>() -
                          grpo_loss(xm, logp_old, adv, mask, c, logp_ref).loss.item<double>()) / (2 * h);
    }
    EXPECT_TRUE(torch::allclose(g, fd, 1e-6, 1e-8)) << "normalization " << int(n) << "\n" << g << "\n" << fd;
    EXPECT_TRUE(torch::equal(g * (1 - mask), torch::zeros_like(g)));  // masked tokens get no gradient
  }
}

TEST(GrpoLoss, RejectsBadShapes) {
  HandCase h;
  auto c = config_with(LossNormalization::kToken);
  auto expect_msg = [](auto fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected " << what;
    } catch (const meshrl::CheckFailure& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { grpo_loss(h.logp_new, h.logp_old, h.mask, h.mask, c); }, "advantages must be [B] = [2], got [2, 3]");
  expect_msg([&] { grpo_loss(h.logp_new, h.logp_old.narrow(1, 0, 2), h.adv, h.mask, c); }, "logp_old must be [B, T]");
  expect_msg([&] { grpo_loss(h.logp_new, h.logp_old, h.adv, h.mask.view({-1}), c); }, "mask must be [B, T]");
  expect_msg([&] { grpo_loss(h.logp_new, h.logp_old, h.adv, h.mask, c, torch::zeros({3, 3})); }, "logp_ref must be [B, T]");
  expect_msg([&] { grpo_loss(h.logp_new, h.logp_old, h.adv, h.mask, config_with(LossNormalization::kConstant, 0)); },
             "needs max_len > 0");
}

// Token log-probs against log_softmax + gather of the model's full forward, values and gradients:
//   ctest --test-dir build -R 'TokenLogprobs' --output-on-failure
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/check.h"
#include "model/transformer.h"
#include "rl/token_logprobs.h"
#include "support/small_model.h"

using namespace meshrl;
using namespace meshrl::rl;

namespace {

model::Transformer make_model() {
  model::Transformer m(test_support::small_model_config());
  m->init_weights(5, 0.2);  // large std: peaked distributions, so errors would show
  return m;
}

// The plain reference: full forward, log_softmax over V, gather the next token.
torch::Tensor reference_logprobs(model::TransformerImpl& m, const torch::Tensor& tokens, const torch::Tensor& key_mask = {}) {
  const int64_t T = tokens.size(1);
  auto logits = m.forward(tokens, nullptr, key_mask);                      // [B, T, V]
  auto logp = torch::log_softmax(logits.narrow(1, 0, T - 1), -1);          // [B, T-1, V]
  return logp.gather(-1, tokens.narrow(1, 1, T - 1).unsqueeze(-1)).squeeze(-1);  // [B, T-1]
}

std::vector<torch::Tensor> param_grads(model::TransformerImpl& m, const torch::Tensor& loss) {
  auto params = m.parameters();
  return torch::autograd::grad({loss}, params);
}

}  // namespace

TEST(TokenLogprobs, MatchesLogSoftmaxGatherOfForward) {
  auto m = make_model();
  auto gen = at::detail::createCPUGenerator(3);
  auto tokens = torch::randint(61, {3, 10}, gen, torch::kInt64);
  auto got = token_logprobs(*m, tokens);
  auto ref = reference_logprobs(*m, tokens);
  ASSERT_EQ(got.logprobs.sizes(), (std::vector<int64_t>{3, 9}));
  EXPECT_EQ(got.logprobs.scalar_type(), torch::kFloat32);
  EXPECT_FALSE(got.entropy.defined());
  EXPECT_TRUE(torch::allclose(got.logprobs, ref, 1e-5, 1e-5)) << (got.logprobs - ref).abs().max();
  EXPECT_LT(ref.min().item<float>(), -1.0f);  // not a degenerate, near-zero case
}

TEST(TokenLogprobs, GradientMatchesReference) {
  auto m = make_model();
  auto gen = at::detail::createCPUGenerator(4);
  auto tokens = torch::randint(61, {2, 8}, gen, torch::kInt64);
  auto w = torch::randn({2, 7}, gen);  // an arbitrary downstream loss
  auto got = param_grads(*m, (token_logprobs(*m, tokens).logprobs * w).sum());
  auto ref = param_grads(*m, (reference_logprobs(*m, tokens) * w).sum());
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_GT(ref[i].abs().max().item<float>(), 0.f) << "parameter " << i;
    EXPECT_TRUE(torch::allclose(got[i], ref[i], 1e-4, 1e-5)) << "parameter " << i << ": " << (got[i] - ref[i]).abs().max();
  }
}

TEST(TokenLogprobs, FusedHeadMatchesLogSoftmaxInFloat64) {
  auto gen = at::detail::createCPUGenerator(9);
  auto logits = (3 * torch::randn({4, 5, 7}, gen, torch::kFloat64)).requires_grad_();
  auto targets = torch::randint(7, {4, 5}, gen, torch::kInt64);
  auto w = torch::randn({4, 5}, gen, torch::kFloat64);
  auto got = target_logprobs(logits, targets);
  auto ref = torch::log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  EXPECT_TRUE(torch::allclose(got, ref, 1e-12, 1e-12));
  auto g_got = torch::autograd::grad({(got * w).sum()}, {logits})[0];
  auto g_ref = torch::autograd::grad({(ref * w).sum()}, {logits})[0];
  EXPECT_TRUE(torch::allclose(g_got, g_ref, 1e-12, 1e-12)) << (g_got - g_ref).abs().max();
}

TEST(TokenLogprobs, EntropyMatchesDefinition) {
  auto m = make_model();
  auto gen = at::detail::createCPUGenerator(6);
  auto tokens = torch::randint(61, {2, 6}, gen, torch::kInt64);
  auto got = token_logprobs(*m, tokens, {}, /*with_entropy=*/true);
  ASSERT_TRUE(got.entropy.defined());
  EXPECT_FALSE(got.entropy.requires_grad());
  torch::NoGradGuard no_grad;
  auto logp = torch::log_softmax(m->forward(tokens).narrow(1, 0, 5), -1);  // [B, T-1, V]
  auto ref = -(logp.exp() * logp).sum(-1);                                  // [B, T-1]
  EXPECT_TRUE(torch::allclose(got.entropy, ref, 1e-5, 1e-5)) << got.entropy << ref;
}

TEST(TokenLogprobs, TailEqualsTheTailOfTheFull) {
  auto m = make_model();
  auto gen = at::detail::createCPUGenerator(8);
  auto tokens = torch::randint(61, {3, 9}, gen, torch::kInt64);
  auto full = token_logprobs(*m, tokens, {}, true);
  for (int64_t n : {1, 4, 8}) {
    auto tail = token_logprobs_tail(*m, tokens, n, {}, true);
    ASSERT_EQ(tail.logprobs.sizes(), (std::vector<int64_t>{3, n}));
    EXPECT_TRUE(torch::allclose(tail.logprobs, full.logprobs.narrow(1, 8 - n, n), 1e-6, 1e-6)) << "n " << n;
    EXPECT_TRUE(torch::allclose(tail.entropy, full.entropy.narrow(1, 8 - n, n), 1e-6, 1e-6)) << "n " << n;
  }
  // and its gradient is the full one's restricted to the tail
  auto w = torch::randn({3, 4}, gen);
  auto got = param_grads(*m, (token_logprobs_tail(*m, tokens, 4).logprobs * w).sum());
  auto ref = param_grads(*m, (token_logprobs(*m, tokens).logprobs.narrow(1, 4, 4) * w).sum());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::allclose(got[i], ref[i], 1e-4, 1e-6)) << "parameter " << i;
}

TEST(TokenLogprobs, KeyMaskIsPassedToTheModel) {
  auto m = make_model();
  auto gen = at::detail::createCPUGenerator(10);
  auto tokens = torch::randint(61, {2, 7}, gen, torch::kInt64);
  auto key_mask = torch::ones({2, 7}, torch::kBool);
  key_mask[1][0] = false;  // left padding on row 1
  key_mask[1][1] = false;
  auto got = token_logprobs(*m, tokens, key_mask).logprobs;
  auto ref = reference_logprobs(*m, tokens, key_mask);
  // positions that are themselves padding attend to nothing and are the caller's to mask
  EXPECT_TRUE(torch::allclose(got.narrow(1, 2, 4), ref.narrow(1, 2, 4), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(got[0], ref[0], 1e-5, 1e-5));
  EXPECT_FALSE(torch::allclose(got[1].narrow(0, 2, 4), token_logprobs(*m, tokens).logprobs[1].narrow(0, 2, 4), 1e-4, 1e-4))
      << "the mask changed nothing";
}

TEST(TokenLogprobs, RejectsBadInput) {
  auto m = make_model();
  auto expect_msg = [](auto fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected " << what;
    } catch (const CheckFailure& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto tokens = torch::zeros({2, 5}, torch::kInt64);
  expect_msg([&] { token_logprobs(*m, torch::zeros({5}, torch::kInt64)); }, "tokens must be [B, T] with T >= 2, got [5]");
  expect_msg([&] { token_logprobs(*m, torch::zeros({2, 1}, torch::kInt64)); }, "T >= 2");
  expect_msg([&] { token_logprobs(*m, torch::zeros({2, 5})); }, "tokens must be int64");
  expect_msg([&] { token_logprobs_tail(*m, tokens, 5); }, "n must be in 1..T-1 = 4, got 5");
  expect_msg([&] { token_logprobs_tail(*m, tokens, 0); }, "n must be in 1..T-1");
  expect_msg([&] { token_logprobs(*m, tokens, torch::ones({2, 4}, torch::kBool)); }, "key_mask must be [B, T]");
}

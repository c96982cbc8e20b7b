// Error feedback (src/mesh/error_feedback.h): over many rounds the sum of what was sent tracks the
// sum of the true deltas within one round's quantisation error; without it the gap keeps growing.
//   build-codec/tests/test_mesh --gtest_filter='ErrorFeedback*'
#include <gtest/gtest.h>

#include "mesh/codec.h"
#include "mesh/error_feedback.h"

namespace meshrl::mesh {
namespace {

// Round k's delta: Gaussian noise plus a systematic part int4 always rounds away: per 64-block one
// value of 1.0 (scale 1/7) and 63 values of 0.01, which round to code 0 (0.01 * 7 = 0.07 < 0.5).
NamedTensors round_delta(int k) {
  torch::manual_seed(1000 + k);
  auto bias = torch::full({4, 64}, 0.01f);
  bias.select(1, 0).fill_(1.0f);
  return NamedTensors{{"noise", "bias"}, {torch::randn({37, 11}) * 1e-3, bias}};
}

double max_abs(const NamedTensors& a) {
  double m = 0;
  for (const auto& t : a.tensors) m = std::max(m, t.abs().max().item<double>());
  return m;
}

struct Drift {
  std::vector<double> per_round;  // ||sum(sent) - sum(delta)||_inf after each round
};

Drift run_rounds(int rounds, bool with_feedback, double* worst_scale = nullptr) {
  auto codec = make_codec({CodecId::kInt4, 64, 3, false}).value();
  ErrorFeedback ef;
  NamedTensors sum_sent = clone_named_tensors(round_delta(0)), sum_true = clone_named_tensors(round_delta(0));
  for (auto& t : sum_sent.tensors) t.zero_();
  for (auto& t : sum_true.tensors) t.zero_();
  Drift d;
  for (int k = 0; k < rounds; ++k) {
    auto delta = round_delta(k);
    auto to_send = with_feedback ? ef.compensate(delta) : clone_named_tensors(delta);
    if (worst_scale) *worst_scale = std::max(*worst_scale, max_abs(to_send) / kInt4MaxLevel);
    auto sent = codec->decode(codec->encode(to_send).value(), {1 << 20, 16}).value();
    if (with_feedback) {
      EXPECT_TRUE(ef.update(to_send, sent).is_ok());
    }
    EXPECT_TRUE(apply_delta(sum_sent, sent).is_ok());
    EXPECT_TRUE(apply_delta(sum_true, delta).is_ok());
    double gap = 0;
    for (size_t i = 0; i < sum_sent.size(); ++i)
      gap = std::max(gap, (sum_sent.tensors[i] - sum_true.tensors[i]).abs().max().item<double>());
    d.per_round.push_back(gap);
  }
  if (with_feedback) {
    // sum(sent) = sum(delta) - residual, up to float32 rounding of the running sums.
    auto r = ef.residual();
    for (size_t i = 0; i < r.size(); ++i) {
      size_t j = r.names[i] == "noise" ? 0 : 1;
      EXPECT_LT((sum_sent.tensors[j] - sum_true.tensors[j] + r.tensors[i]).abs().max().item<double>(), 1e-4);
    }
  }
  return d;
}

TEST(ErrorFeedback, DriftStaysBoundedWithFeedbackAndGrowsWithout) {
  const int rounds = 200;
  double worst_scale = 0;
  auto with = run_rounds(rounds, true, &worst_scale);
  auto without = run_rounds(rounds, false);
  // With feedback the gap is one round's residual: at most half a quantisation step, every round.
  for (int k = 0; k < rounds; ++k) ASSERT_LE(with.per_round[k], 0.5 * worst_scale * (1 + 1e-3) + 1e-4) << "round " << k;
  EXPECT_LE(with.per_round.back(), with.per_round[rounds / 4] + 0.5 * worst_scale) << "not growing with rounds";
  // Without it the 0.01s are lost every round: the gap grows linearly, 0.01 per round.
  EXPECT_NEAR(without.per_round.back(), 0.01 * rounds, 0.01 * rounds * 0.05);
  EXPECT_GT(without.per_round.back(), 3 * without.per_round[rounds / 4]);
  EXPECT_GT(without.per_round.back(), 20 * with.per_round.back());
}

TEST(ErrorFeedback, SparseTernaryResidualStaysBoundedAndTracksTheTrueSum) {
  // Sending 1 value in 16 per block (int2_density, quantize.h) drops 15/16 of each round; with
  // feedback the dropped part goes out in later rounds, so the gap between what was sent and
  // what was meant is the residual, which stops growing. Without it the gap is a random walk.
  CodecConfig cc{CodecId::kInt2, 256, 3, false};
  cc.int2_density = 1.0 / 16;
  auto codec = make_codec(cc).value();
  const int rounds = 300;
  auto run = [&](bool with_feedback) {
    ErrorFeedback ef;
    auto sum_sent = torch::zeros({64, 64}), sum_true = torch::zeros({64, 64});
    std::vector<double> gap;
    for (int k = 0; k < rounds; ++k) {
      torch::manual_seed(500 + k);
      NamedTensors delta{{"w"}, {torch::randn({64, 64}) * 1e-3}};
      auto to_send = with_feedback ? ef.compensate(delta) : clone_named_tensors(delta);
      auto sent = codec->decode(codec->encode(to_send).value(), {1 << 20, 16}).value();
      if (with_feedback) {
        EXPECT_TRUE(ef.update(to_send, sent).is_ok());
      }
      sum_sent += sent.tensors[0];
      sum_true += delta.tensors[0];
      gap.push_back((sum_sent - sum_true).norm().item<double>());
    }
    return gap;
  };
  auto with = run(true), without = run(false);
  const double one_round = 1e-3 * 64;  // ||delta|| of one round
  double early = 0, late = 0;
  for (int k = 100; k < 200; ++k) early = std::max(early, with[k]);
  for (int k = 200; k < rounds; ++k) late = std::max(late, with[k]);
  // Measured (seeds 500..799): one round 0.064, the gap 0.104 over rounds 100-199 and 0.103 over
  // 200-299 with feedback (under 2 rounds' worth), 0.92 after 300 rounds without.
  EXPECT_LT(late, 1.2 * early) << "the residual stopped growing";
  EXPECT_LT(late, 3 * one_round);
  EXPECT_LT(with.back(), 0.25 * without.back());
}

TEST(ErrorFeedback, CompensateAddsTheResidualByName) {
  ErrorFeedback ef;
  NamedTensors delta{{"a", "b"}, {torch::ones({2}), torch::full({3}, 2.0f)}};
  auto first = ef.compensate(delta);
  EXPECT_TRUE(torch::equal(first.tensors[0], delta.tensors[0])) << "no residual yet: unchanged";
  NamedTensors decoded{{"a", "b"}, {torch::tensor({0.75f, 1.0f}), torch::full({3}, 2.0f)}};
  ASSERT_TRUE(ef.update(first, decoded).is_ok());
  // Next round the set is reordered and gains a tensor: residuals follow names, new ones start at 0.
  NamedTensors next{{"c", "a"}, {torch::ones({1}), torch::zeros({2})}};
  auto second = ef.compensate(next);
  EXPECT_TRUE(torch::equal(second.tensors[0], torch::ones({1})));
  EXPECT_TRUE(torch::allclose(second.tensors[1], torch::tensor({0.25f, 0.0f})));
  EXPECT_NEAR(ef.residual_norm(), 0.25, 1e-7);
  // Save and restore.
  ErrorFeedback restored;
  ASSERT_TRUE(restored.set_residual(ef.residual()).is_ok());
  EXPECT_TRUE(torch::equal(restored.compensate(next).tensors[1], second.tensors[1]));
  // Mismatched layouts are refused and leave the residual alone.
  NamedTensors wrong{{"a", "b"}, {torch::ones({5}), torch::ones({3})}};
  EXPECT_FALSE(ef.update(first, wrong).is_ok());
  EXPECT_NEAR(ef.residual_norm(), 0.25, 1e-7);
}

}  // namespace
}  // namespace meshrl::mesh

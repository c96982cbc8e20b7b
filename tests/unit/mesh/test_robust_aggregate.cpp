// Robust aggregation and the ingest guards (src/mesh/robust_aggregate.h, update_guard.h): with
// 1 of 8 updates sign-flipped and scaled x10, the trimmed mean, the median and centered clipping
// stay close to the mean of the 7 honest updates while the plain mean is pulled far away.
//   build-mesh/tests/test_mesh --gtest_filter='Robust*:NormBound*:RateLimiter*'
#include <gtest/gtest.h>

#include <cmath>

#include "mesh/robust_aggregate.h"
#include "mesh/update_guard.h"

namespace meshrl::mesh {
namespace {

// Two tensors, P = 600: the honest updates are g + noise (sigma 0.1 |g| per coordinate).
struct Round {
  std::vector<NamedTensors> honest;
  NamedTensors attacker;
  NamedTensors clean_mean;
};

Round make_round(uint64_t seed) {
  torch::manual_seed(seed);
  const NamedTensors g{{"a", "b"}, {torch::randn({20, 20}), torch::randn({200})}};
  Round r;
  for (int i = 0; i < 7; ++i) {
    NamedTensors u;
    u.names = g.names;
    for (const auto& t : g.tensors) u.tensors.push_back(t + 0.1 * torch::randn_like(t));
    r.honest.push_back(u);
  }
  r.attacker.names = g.names;
  for (const auto& t : r.honest[0].tensors) r.attacker.tensors.push_back(-10 * t);  // sign-flipped, scaled x10
  r.clean_mean.names = g.names;
  for (size_t k = 0; k < g.size(); ++k) {
    auto s = torch::zeros_like(g.tensors[k]);
    for (const auto& u : r.honest) s += u.tensors[k];
    r.clean_mean.tensors.push_back(s / 7);
  }
  return r;
}

// ||a - b|| / ||b||
double relative_error(const NamedTensors& a, const NamedTensors& b) {
  double num = 0, den = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    num += (a.tensors[k] - b.tensors[k]).pow(2).sum().item<double>();
    den += b.tensors[k].pow(2).sum().item<double>();
  }
  return std::sqrt(num / den);
}

double error_under_attack(const std::string& rule, uint64_t seed) {
  AggregatorConfig c;
  c.rule = rule;
  auto agg = make_aggregator(c).value();
  const Round r = make_round(seed);
  for (int i = 0; i < 7; ++i) {
    EXPECT_TRUE(agg->add(r.honest[i], 1.0).is_ok());
    if (i == 3) {
      EXPECT_TRUE(agg->add(r.attacker, 1.0).is_ok());  // arrives mid-round
    }
  }
  EXPECT_EQ(agg->count(), 8);
  return relative_error(agg->finish().value(), r.clean_mean);
}

TEST(RobustAggregate, OneSignFlippedUpdateInEightPullsTheMeanButNotTheRobustRules) {
  for (uint64_t seed : {1, 2, 3}) {
    const double mean = error_under_attack("mean", seed);
    // The mean lands near (7 g - 10 g) / 8: about 1.4 |g| away from the honest mean.
    EXPECT_GT(mean, 1.0) << "seed " << seed;
    for (const char* rule : {"trimmed_mean", "median", "centered_clip"}) {
      const double e = error_under_attack(rule, seed);
      EXPECT_LT(e, 0.15) << rule << " seed " << seed;
      EXPECT_LT(e, mean / 8) << rule << " seed " << seed;
    }
  }
}

TEST(RobustAggregate, WithoutAnAttackerEveryRuleIsNearTheMean) {
  const Round r = make_round(9);
  for (const char* rule : {"trimmed_mean", "median", "centered_clip"}) {
    AggregatorConfig c;
    c.rule = rule;
    auto agg = make_aggregator(c).value();
    for (const auto& u : r.honest) ASSERT_TRUE(agg->add(u, 1.0).is_ok());
    EXPECT_LT(relative_error(agg->finish().value(), r.clean_mean), 0.06) << rule;
  }
}

TEST(RobustAggregate, HandWorkedValues) {
  // One coordinate, values 1, 2, 3, 4, 100: median 3; trimmed (1 of 5 each side at 0.2) (2+3+4)/3 = 3.
  auto one = [](float v) { return NamedTensors{{"x"}, {torch::tensor({v})}}; };
  AggregatorConfig c;
  c.rule = "median";
  auto med = make_aggregator(c).value();
  c.rule = "trimmed_mean";
  c.trim_fraction = 0.2;
  auto trim = make_aggregator(c).value();
  for (float v : {1.f, 100.f, 2.f, 4.f, 3.f}) {
    ASSERT_TRUE(med->add(one(v), 1.0).is_ok());
    ASSERT_TRUE(trim->add(one(v), 1.0).is_ok());
  }
  EXPECT_FLOAT_EQ(med->finish().value().tensors[0].item<float>(), 3.f);
  EXPECT_FLOAT_EQ(trim->finish().value().tensors[0].item<float>(), 3.f);
  ASSERT_TRUE(med->add(one(5), 1.0).is_ok());  // even N: mean of the two middle values (3, 4)
  EXPECT_FLOAT_EQ(med->finish().value().tensors[0].item<float>(), 3.5f);
  med->reset();
  EXPECT_EQ(med->count(), 0);
  EXPECT_FALSE(med->finish().is_ok());
}

TEST(RobustAggregate, RefusesBadInputChangingNothing) {
  AggregatorConfig c;
  c.rule = "median";
  auto agg = make_aggregator(c).value();
  ASSERT_TRUE(agg->add({{"x"}, {torch::ones({3})}}, 1.0).is_ok());
  EXPECT_FALSE(agg->add({{"x"}, {torch::tensor({1.f, NAN, 1.f})}}, 1.0).is_ok());
  EXPECT_FALSE(agg->add({{"x"}, {torch::ones({4})}}, 1.0).is_ok());
  EXPECT_FALSE(agg->add({{"x"}, {torch::ones({3})}}, -1.0).is_ok());
  EXPECT_EQ(agg->count(), 1);
  c.rule = "krum";
  EXPECT_FALSE(make_aggregator(c).is_ok());
  c.rule = "trimmed_mean";
  c.trim_fraction = 0.5;
  EXPECT_FALSE(make_aggregator(c).is_ok());
}

TEST(NormBound, RefusesA100xUpdateOnceItKnowsTheScale) {
  NormBound b(10, 32);
  EXPECT_EQ(b.check(1e6), "");  // no history yet: the first updates set the scale
  for (double n : {1.0, 1.2, 0.9}) {
    EXPECT_EQ(b.check(n), "");
    b.accepted(n);
  }
  EXPECT_DOUBLE_EQ(b.median().value(), 1.0);
  EXPECT_EQ(b.check(9.9), "");
  EXPECT_NE(b.check(100.0), "");
  EXPECT_NE(b.check(NAN), "");
  NormBound off(0, 32);
  off.accepted(1);
  off.accepted(1);
  off.accepted(1);
  EXPECT_EQ(off.check(1e9), "");
}

TEST(RateLimiter, CountsPerNodeOverASlidingMinute) {
  RateLimiter r(2);
  EXPECT_EQ(r.admit("paris", 0), "");
  EXPECT_EQ(r.admit("paris", 1), "");
  EXPECT_NE(r.admit("paris", 2), "");
  EXPECT_EQ(r.admit("zurich", 2), "");  // another node has its own budget
  EXPECT_EQ(r.admit("paris", 60.5), "");  // the first one left the window
  RateLimiter off(0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(off.admit("paris", 0), "");
}

}  // namespace
}  // namespace meshrl::mesh

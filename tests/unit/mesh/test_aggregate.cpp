// MeanAccumulator and staleness_weight (src/mesh/aggregate.h): the weighted mean of three known
// updates written out, order independence, refusals that leave the sum untouched.
//   OMP_NUM_THREADS=1 ./build-store/tests/test_mesh --gtest_filter='Aggregate*'
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mesh/aggregate.h"

namespace meshrl::mesh {
namespace {

NamedTensors set_of(std::vector<float> a, std::vector<float> b) {
  NamedTensors s;
  s.names = {"w", "b"};
  s.tensors = {torch::tensor(a).reshape({2, 2}), torch::tensor(b)};
  return s;
}

TEST(Aggregate, WeightedMeanOfThreeKnownUpdates) {
  // u1 = [1, 2, 3, 4 | 10], u2 = [3, 2, 1, 0 | -10], u3 = [-2, 0, 4, 8 | 5], weights 1, 1, 2:
  //   sum w u = [1+3-4, 2+2+0, 3+1+8, 4+0+16 | 10-10+10] = [0, 4, 12, 20 | 10]
  //   / 4     = [0, 1, 3, 5 | 2.5]
  MeanAccumulator acc;
  ASSERT_TRUE(acc.add(set_of({1, 2, 3, 4}, {10}), 1.0).is_ok());
  ASSERT_TRUE(acc.add(set_of({3, 2, 1, 0}, {-10}), 1.0).is_ok());
  ASSERT_TRUE(acc.add(set_of({-2, 0, 4, 8}, {5}), 2.0).is_ok());
  EXPECT_EQ(acc.count(), 3);
  EXPECT_EQ(acc.total_weight(), 4.0);
  auto mean = acc.finish().value();
  ASSERT_EQ(mean.names, (std::vector<std::string>{"w", "b"}));
  EXPECT_EQ(mean.tensors[0].scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(mean.tensors[0], torch::tensor({0.f, 1.f, 3.f, 5.f}).reshape({2, 2}))) << mean.tensors[0];
  EXPECT_TRUE(torch::equal(mean.tensors[1], torch::tensor({2.5f}))) << mean.tensors[1];
  // finish() is const and repeatable; reset() empties.
  EXPECT_TRUE(torch::equal(acc.finish().value().tensors[1], torch::tensor({2.5f})));
  acc.reset();
  EXPECT_EQ(acc.count(), 0);
  EXPECT_FALSE(acc.finish().is_ok());
}

TEST(Aggregate, MatchesAFloat64ReferenceAndIsOrderIndependent) {
  torch::manual_seed(5);
  std::vector<NamedTensors> updates;
  std::vector<double> weights;
  for (int i = 0; i < 14; ++i) {
    NamedTensors u;
    u.names = {"a", "b"};
    u.tensors = {torch::randn({33, 7}) * std::pow(10.0, -(i % 4)), torch::randn({9, 4}).t()};  // b non-contiguous
    updates.push_back(u);
    weights.push_back(staleness_weight(i % 5, 8) * (1 + i));
  }
  MeanAccumulator fwd, rev;
  for (size_t i = 0; i < updates.size(); ++i) ASSERT_TRUE(fwd.add(updates[i], weights[i]).is_ok());
  for (size_t i = updates.size(); i-- > 0;) ASSERT_TRUE(rev.add(updates[i], weights[i]).is_ok());
  auto a = fwd.finish().value(), b = rev.finish().value();
  for (size_t t = 0; t < 2; ++t) {
    auto ref = torch::zeros(updates[0].tensors[t].sizes(), torch::kFloat64);
    double total = 0;
    for (size_t i = 0; i < updates.size(); ++i) {
      ref += weights[i] * updates[i].tensors[t].to(torch::kFloat64);
      total += weights[i];
    }
    ref = (ref / total).to(torch::kFloat32);
    // One float32 rounding of a float64 mean: equal to the reference in either order (the float64
    // sums differ by a few ulps at most, far below float32's spacing; a tie would need ~1e-8 luck).
    EXPECT_TRUE(torch::equal(a.tensors[t], ref)) << t;
    EXPECT_TRUE(torch::equal(b.tensors[t], ref)) << t;
  }
}

TEST(Aggregate, RefusalsLeaveTheSumUntouched) {
  MeanAccumulator acc;
  EXPECT_FALSE(acc.finish().is_ok());
  ASSERT_TRUE(acc.add(set_of({1, 2, 3, 4}, {10}), 1.0).is_ok());
  for (double w : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) EXPECT_FALSE(acc.add(set_of({1, 1, 1, 1}, {1}), w).is_ok()) << w;
  auto nan = set_of({1, 1, 1, 1}, {1});
  nan.tensors[0].index_put_({1, 1}, INFINITY);  // in the first tensor: the second must not be added either
  auto st = acc.add(nan, 1.0);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("'w'"), std::string::npos) << st.message();
  auto renamed = set_of({1, 1, 1, 1}, {1});
  renamed.names = {"w", "c"};
  EXPECT_FALSE(acc.add(renamed, 1.0).is_ok());
  auto reshaped = set_of({1, 1, 1, 1}, {1});
  reshaped.tensors[0] = reshaped.tensors[0].reshape({4});
  EXPECT_FALSE(acc.add(reshaped, 1.0).is_ok());
  NamedTensors fewer;
  fewer.names = {"w"};
  fewer.tensors = {torch::ones({2, 2})};
  EXPECT_FALSE(acc.add(fewer, 1.0).is_ok());
  EXPECT_EQ(acc.count(), 1);
  EXPECT_EQ(acc.total_weight(), 1.0);
  auto mean = acc.finish().value();
  EXPECT_TRUE(torch::equal(mean.tensors[0], torch::tensor({1.f, 2.f, 3.f, 4.f}).reshape({2, 2})));
  EXPECT_TRUE(torch::equal(mean.tensors[1], torch::tensor({10.f})));
}

TEST(Aggregate, StalenessWeight) {
  EXPECT_EQ(staleness_weight(0, 4), 1.0);
  EXPECT_DOUBLE_EQ(staleness_weight(1, 4), 1.0 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(staleness_weight(3, 4), 0.5);
  EXPECT_DOUBLE_EQ(staleness_weight(4, 4), 1.0 / std::sqrt(5.0));
  EXPECT_EQ(staleness_weight(5, 4), 0.0);
  EXPECT_EQ(staleness_weight(-1, 4), 0.0);
  EXPECT_EQ(staleness_weight(0, 0), 1.0);
  EXPECT_EQ(staleness_weight(1, 0), 0.0);
}

}  // namespace
}  // namespace meshrl::mesh

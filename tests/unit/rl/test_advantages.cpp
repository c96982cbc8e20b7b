// Group-relative advantages, with numbers worked out by hand:
//   ctest --test-dir build -R 'Advantages' --output-on-failure
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "core/check.h"
#include "rl/advantages.h"

using namespace meshrl::rl;

TEST(Advantages, GroupOfFourWithSampleStd) {
  // mean 0.5, deviations +-0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735 -> +-0.866025
  auto r = torch::tensor({1.f, 0.f, 0.f, 1.f});
  auto a = group_advantages(r, 4, AdvantageConfig{});
  ASSERT_EQ(a.sizes(), r.sizes());
  EXPECT_EQ(a.scalar_type(), torch::kFloat32);
  const float x = static_cast<float>(0.5 / (std::sqrt(1.0 / 3.0) + 1e-6));
  EXPECT_TRUE(torch::allclose(a, torch::tensor({x, -x, -x, x}), 1e-6, 1e-6)) << a;
  EXPECT_NEAR(a[0].item<float>(), 0.866025f, 1e-5);
}

TEST(Advantages, GroupOfFourWithoutStdIsDrGrpo) {
  AdvantageConfig c;
  c.normalize_std = false;
  auto a = group_advantages(torch::tensor({1.f, 0.f, 0.f, 1.f}), 4, c);
  EXPECT_TRUE(torch::allclose(a, torch::tensor({0.5f, -0.5f, -0.5f, 0.5f}))) << a;
}

TEST(Advantages, NegativeScaleDampsOnlyTheFailures) {
  // Dr. GRPO on {1, 0, 0, 0}: mean 0.25 -> {0.75, -0.25, -0.25, -0.25}; negatives x 0.2 -> -0.05.
  AdvantageConfig c;
  c.normalize_std = false;
  c.negative_scale = 0.2;
  auto a = group_advantages(torch::tensor({1.f, 0.f, 0.f, 0.f, 2.f, 2.f, 2.f, 2.f}), 4, c);
  EXPECT_TRUE(torch::allclose(a, torch::tensor({0.75f, -0.05f, -0.05f, -0.05f, 0.f, 0.f, 0.f, 0.f}), 1e-6, 1e-7)) << a;
  c.negative_scale = 0.0;  // positives only: rejection-sampling fine-tuning on the group's winners
  a = group_advantages(torch::tensor({1.f, 0.f, 0.f, 0.f}), 4, c);
  EXPECT_TRUE(torch::equal(a, torch::tensor({0.75f, 0.f, 0.f, 0.f}))) << a;
}

TEST(Advantages, GroupsAreIndependentAndContiguous) {
  // two groups of 2: [3, 1] -> +-1 (mean 2, dev 1, sample std sqrt(2)); [10, 10] -> 0
  AdvantageConfig c;
  c.normalize_std = false;
  auto a = group_advantages(torch::tensor({3.f, 1.f, 10.f, 10.f}), 2, c);
  EXPECT_TRUE(torch::allclose(a, torch::tensor({1.f, -1.f, 0.f, 0.f}))) << a;
  auto s = group_advantages(torch::tensor({3.f, 1.f, 10.f, 10.f}), 2, AdvantageConfig{});
  const float x = static_cast<float>(1.0 / (std::sqrt(2.0) + 1e-6));
  EXPECT_TRUE(torch::allclose(s, torch::tensor({x, -x, 0.f, 0.f}))) << s;
}

TEST(Advantages, AllEqualGroupsGiveExactZerosAndAreFilteredOut) {
  // 0.1 is not representable: mean-subtraction alone could leave rounding noise, and with the std
  // (0 + eps) that noise would be blown up. The contract is exact zeros.
  auto r = torch::tensor({0.1f, 0.1f, 0.1f, 0.7f, 0.7f, 0.7f, 0.f, 1.f, 0.f});
  for (bool norm : {true, false}) {
    AdvantageConfig c;
    c.normalize_std = norm;
    auto a = group_advantages(r, 3, c);
    EXPECT_FALSE(torch::isnan(a).any().item<bool>());
    EXPECT_TRUE(torch::equal(a.narrow(0, 0, 6), torch::zeros({6}))) << a;
    EXPECT_GT(a[7].item<float>(), 0.f);
    EXPECT_LT(a[6].item<float>(), 0.f);
  }
  auto keep = groups_with_signal(r, 3);
  ASSERT_EQ(keep.scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(keep, torch::tensor({false, false, true}))) << keep;
}

TEST(Advantages, GroupOfOneIsZero) {
  auto a = group_advantages(torch::tensor({1.f, 5.f}), 1, AdvantageConfig{});
  EXPECT_TRUE(torch::equal(a, torch::zeros({2})));
  EXPECT_TRUE(torch::equal(groups_with_signal(torch::tensor({1.f, 5.f}), 1), torch::tensor({false, false})));
}

TEST(Advantages, KeepsTheInputDtype) {
  auto a = group_advantages(torch::tensor({1.0, 0.0}, torch::kFloat64), 2, AdvantageConfig{});
  EXPECT_EQ(a.scalar_type(), torch::kFloat64);
}

TEST(Advantages, RejectsBrokenInput) {
  auto expect_msg = [](auto fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected " << what;
    } catch (const meshrl::CheckFailure& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_msg([] { group_advantages(torch::zeros({2, 2}), 2, {}); }, "rewards must be [N*G], got [2, 2]");
  expect_msg([] { group_advantages(torch::zeros({5}), 2, {}); }, "not a multiple of group_size 2");
  expect_msg([] { group_advantages(torch::zeros({4}), 0, {}); }, "group_size must be >= 1");
  expect_msg([] { group_advantages(torch::tensor({1.f, NAN}), 2, {}); }, "NaN or inf");
  expect_msg([] { groups_with_signal(torch::zeros({4}, torch::kInt64), 2); }, "floating point");
}

TEST(Advantages, UnscoredRowsAreLeftOutOfTheGroupStatistics) {
  // Group 0: {1, 0, (failed), 1} -> scored {1, 0, 1}: mean 2/3, deviations {1/3, -2/3, 1/3},
  // sample std sqrt((1/9 + 4/9 + 1/9) / 2) = sqrt(1/3) -> {0.57735, -1.1547, 0, 0.57735}.
  // Group 1: {(failed), 3, 1, (failed)} -> scored {3, 1}: mean 2, deviations +-1, std sqrt(2).
  // The failed rows' reward values (here NaN and 100) must not matter.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = torch::tensor({1.f, 0.f, nan, 1.f, 100.f, 3.f, 1.f, 100.f});
  auto scored = torch::tensor({true, true, false, true, false, true, true, false});
  auto a = group_advantages(r, 4, AdvantageConfig{}, scored);
  const float x = static_cast<float>((1.0 / 3.0) / (std::sqrt(1.0 / 3.0) + 1e-6));
  const float y = static_cast<float>(1.0 / (std::sqrt(2.0) + 1e-6));
  EXPECT_TRUE(torch::allclose(a, torch::tensor({x, -2 * x, 0.f, x, 0.f, y, -y, 0.f}), 1e-6, 1e-6)) << a;
  EXPECT_NEAR(a[0].item<float>(), 0.57735f, 1e-5);

  AdvantageConfig dr;
  dr.normalize_std = false;
  a = group_advantages(r, 4, dr, scored);
  EXPECT_TRUE(torch::allclose(a, torch::tensor({1.f / 3, -2.f / 3, 0.f, 1.f / 3, 0.f, 1.f, -1.f, 0.f}), 1e-6, 1e-6)) << a;
  EXPECT_TRUE(torch::equal(groups_with_signal(r, 4, scored), torch::tensor({true, true})));
}

TEST(Advantages, AGroupWithFewerThanTwoScoredRowsHasNoSignal) {
  // Group 0: one scored row; group 1: none; group 2: two scored rows, equal (the failed one
  // differs, but it does not count).
  auto r = torch::tensor({1.f, 0.f, 0.f, 1.f, 0.5f, 0.5f, 2.f, 2.f, 7.f});  // G = 3
  auto scored = torch::tensor({true, false, false, false, false, false, true, true, false});
  for (bool norm : {true, false}) {
    AdvantageConfig c;
    c.normalize_std = norm;
    auto a = group_advantages(r, 3, c, scored);
    EXPECT_TRUE(torch::equal(a, torch::zeros({9}))) << a;
  }
  EXPECT_TRUE(torch::equal(groups_with_signal(r, 3, scored), torch::tensor({false, false, false})));
}

TEST(Advantages, AllScoredIsTheSameAsNoMask) {
  auto r = torch::tensor({1.f, 0.f, 0.f, 1.f, 0.2f, 0.7f, 0.7f, 0.1f});
  auto all = torch::ones({8}, torch::kBool);
  EXPECT_TRUE(torch::allclose(group_advantages(r, 4, AdvantageConfig{}, all), group_advantages(r, 4, AdvantageConfig{}), 0, 1e-7));
}

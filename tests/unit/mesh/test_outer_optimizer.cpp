// OuterOptimizer (src/mesh/outer_optimizer.h): Nesterov and plain momentum against values worked
// out by hand, FedAvg as a special case, state round trip, layout checks.
//   OMP_NUM_THREADS=1 ./build-store/tests/test_mesh --gtest_filter='OuterOptimizer*'
#include <gtest/gtest.h>

#include "mesh/outer_optimizer.h"

namespace meshrl::mesh {
namespace {

NamedTensors set_of(std::vector<float> a, std::vector<float> b) {
  NamedTensors s;
  s.names = {"w", "b"};
  s.tensors = {torch::tensor(a).reshape({2, 2}), torch::tensor(b)};
  return s;
}

void expect_values(const NamedTensors& got, const NamedTensors& want, const std::string& what) {
  ASSERT_EQ(got.names, want.names) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got.tensors[i].sizes(), want.tensors[i].sizes()) << what;
    EXPECT_EQ(got.tensors[i].scalar_type(), torch::kFloat32) << what;
    EXPECT_TRUE(torch::equal(got.tensors[i], want.tensors[i]))
        << what << " " << got.names[i] << ": got " << got.tensors[i] << " want " << want.tensors[i];
  }
}

// lr 0.5, momentum 0.5 and small integers: every intermediate is exact in float32, so the
// expected values are equalities, not tolerances.
//   g1 = [1, 2, -4, 0 | 8],  g2 = [1, 0, 0, 2 | -8],  g3 = [0, 0, 4, 2 | 0]
//   m1 = g1                       = [1, 2, -4, 0 | 8]
//   m2 = 0.5 m1 + g2              = [1.5, 1, -2, 2 | -4]
//   m3 = 0.5 m2 + g3              = [0.75, 0.5, 3, 3 | -2]
// Nesterov: delta = -0.5 (g + 0.5 m)
//   d1 = -0.5 [1.5, 3, -6, 0 | 12]      = [-0.75, -1.5, 3, 0 | -6]
//   d2 = -0.5 [1.75, 0.5, -1, 3 | -10]  = [-0.875, -0.25, 0.5, -1.5 | 5]
//   d3 = -0.5 [0.375, 0.25, 5.5, 3.5 | -1] = [-0.1875, -0.125, -2.75, -1.75 | 0.5]
// Plain: delta = -0.5 m
//   d1 = [-0.5, -1, 2, 0 | -4],  d2 = [-0.75, -0.5, 1, -1 | 2],  d3 = [-0.375, -0.25, -1.5, -1.5 | 1]
const NamedTensors kG[3] = {set_of({1, 2, -4, 0}, {8}), set_of({1, 0, 0, 2}, {-8}), set_of({0, 0, 4, 2}, {0})};

TEST(OuterOptimizer, NesterovThreeStepsByHand) {
  OuterOptimizer opt({0.5, 0.5, true});
  const NamedTensors want[3] = {set_of({-0.75f, -1.5f, 3, 0}, {-6}), set_of({-0.875f, -0.25f, 0.5f, -1.5f}, {5}),
                                set_of({-0.1875f, -0.125f, -2.75f, -1.75f}, {0.5f})};
  for (int s = 0; s < 3; ++s) expect_values(opt.step(kG[s]).value(), want[s], "step " + std::to_string(s + 1));
  expect_values(opt.state(), set_of({0.75f, 0.5f, 3, 3}, {-2}), "momentum after 3 steps");
  EXPECT_EQ(opt.n_steps(), 3);
}

TEST(OuterOptimizer, PlainMomentumThreeStepsByHand) {
  OuterOptimizer opt({0.5, 0.5, false});
  const NamedTensors want[3] = {set_of({-0.5f, -1, 2, 0}, {-4}), set_of({-0.75f, -0.5f, 1, -1}, {2}),
                                set_of({-0.375f, -0.25f, -1.5f, -1.5f}, {1})};
  for (int s = 0; s < 3; ++s) expect_values(opt.step(kG[s]).value(), want[s], "step " + std::to_string(s + 1));
}

TEST(OuterOptimizer, LrOneMomentumZeroIsExactlyMinusG) {
  torch::manual_seed(3);
  for (bool nesterov : {true, false}) {
    OuterOptimizer opt({1.0, 0.0, nesterov});
    for (int s = 0; s < 3; ++s) {
      NamedTensors g;
      g.names = {"x", "y"};
      g.tensors = {torch::randn({17, 5}) * 1e-3, torch::randn({4, 6}).t()};  // one non-contiguous
      auto d = opt.step(g).value();
      for (size_t i = 0; i < g.size(); ++i) EXPECT_TRUE(torch::equal(d.tensors[i], -g.tensors[i])) << nesterov << " " << s;
    }
  }
}

TEST(OuterOptimizer, StateRoundTripContinuesIdentically) {
  OuterOptimizer a({0.7, 0.9, true});
  ASSERT_TRUE(a.step(kG[0]).is_ok());
  ASSERT_TRUE(a.step(kG[1]).is_ok());
  OuterOptimizer b({0.7, 0.9, true});
  ASSERT_TRUE(b.set_state(a.state()).is_ok());
  auto da = a.step(kG[2]).value();
  auto db = b.step(kG[2]).value();
  expect_values(db, da, "after restore");
  expect_values(b.state(), a.state(), "state");
  // state() is a copy: changing it does not change the optimizer.
  auto s = a.state();
  s.tensors[0].fill_(100);
  EXPECT_FALSE(torch::equal(a.state().tensors[0], s.tensors[0]));
  // Empty state = fresh optimizer.
  EXPECT_EQ(OuterOptimizer({}).state().size(), 0u);
  ASSERT_TRUE(b.set_state({}).is_ok());
  EXPECT_EQ(b.state().size(), 0u);
}

TEST(OuterOptimizer, RefusesLayoutChangesNonFiniteAndBadConfigChangingNothing) {
  OuterOptimizer opt({0.5, 0.5, true});
  ASSERT_TRUE(opt.step(kG[0]).is_ok());
  const auto before = opt.state();
  NamedTensors renamed = kG[1];
  renamed.names[1] = "c";
  EXPECT_FALSE(opt.step(renamed).is_ok());
  NamedTensors reshaped = kG[1];
  reshaped.tensors[0] = reshaped.tensors[0].reshape({4});
  EXPECT_FALSE(opt.step(reshaped).is_ok());
  NamedTensors nan = kG[1];
  nan.tensors[1] = torch::tensor({std::nanf("")});
  auto st = opt.step(nan);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.status().message().find("'b'"), std::string::npos) << st.status().message();
  NamedTensors f64 = kG[1];
  f64.tensors[1] = f64.tensors[1].to(torch::kFloat64);
  EXPECT_FALSE(opt.step(f64).is_ok());
  expect_values(opt.state(), before, "state after refused steps");
  EXPECT_FALSE(OuterOptimizer({0.0, 0.9, true}).step(kG[0]).is_ok());
  EXPECT_FALSE(OuterOptimizer({0.7, 1.0, true}).step(kG[0]).is_ok());
}

}  // namespace
}  // namespace meshrl::mesh

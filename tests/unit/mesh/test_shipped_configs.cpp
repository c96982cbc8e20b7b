// The run files under configs/ that the README and `make demo` point users at: each must load
// through the same parser the commands use, and keep the relations its comments promise.
//   cmake --build build --target test_mesh && build/tests/test_mesh --gtest_filter='ShippedConfigs*'
#include <gtest/gtest.h>

#include <string>

#include "mesh/mesh_config.h"
#include "rl/run_config.h"

namespace meshrl::mesh {
namespace {

const std::string kConfigs = MESHRL_TEST_DATA "/../../configs/";

TEST(ShippedConfigs, TinyArithmeticLoadsWithItsWarmStartStopRule) {
  auto r = rl::load_run_config(kConfigs + "tiny-arithmetic.toml");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  // The documented single-node run: an SFT warm start ended by its accuracy, then GRPO.
  EXPECT_GT(r->sft.steps, 0);
  EXPECT_GT(r->sft.stop_at_pass1, 0.0);
  EXPECT_GT(r->grpo.steps, 0);
  EXPECT_EQ(r->task.kind, "arithmetic");
}

TEST(ShippedConfigs, DemoLoadsAndItsInnerScheduleSpansEveryRound) {
  auto r = load_mesh_run_config(kConfigs + "demo-four-cities.toml");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  // The node's lr schedule runs over [grpo] steps; the file says it spans rounds x inner steps, so
  // the cosine reaches its floor at the last round, not before or after it.
  EXPECT_EQ(r->run.grpo.steps, r->mesh.rounds * r->mesh.inner_steps);
  EXPECT_GT(r->mesh.eval_every_rounds, 0);
  EXPECT_EQ(r->mesh.rounds % r->mesh.eval_every_rounds, 0) << "the last round should be evaluated";
  // Several demo processes share the machine: one intra-op thread each (README, ground rules).
  EXPECT_EQ(r->run.model.threads, 1);
}

TEST(ShippedConfigs, AnOverrideIsCheckedLikeTheFile) {
  auto r = load_mesh_run_config(kConfigs + "demo-four-cities.toml", {"--mesh.inner_steps=0"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("inner_steps"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace meshrl::mesh

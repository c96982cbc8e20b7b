// Start-up pieces of the coordinator (mesh/run_model.h, mesh/coordinator_startup.h): the tiny
// model loaded on the CPU with the sizes the wire checks against (P, the largest update, decode
// limits), a [lora] run's adapters on a hashed frozen base, the ingest rules taken from the run,
// and run ids that are 16 hex digits and never repeat. The start-up of a whole coordinator (new
// run, resume) is exercised by CoordinatorClaims and the rpc tests.
//   build/tests/test_mesh --gtest_filter='CoordinatorStartup*:RunModel*'
#include <gtest/gtest.h>

#include <set>

#include "mesh/coordinator_startup.h"
#include "mesh/run_model.h"

namespace meshrl::mesh {
namespace {

MeshRunConfig tiny() {
  MeshRunConfig c;
  c.run.model.init = "tiny";
  c.run.task.kind = "arithmetic";
  return c;
}

TEST(RunModel, TheTinyModelGivesTheSizesTheWireChecks) {
  const RunModel m = load_run_model(tiny(), "tiny").value();
  EXPECT_GT(m.param_count, 0);
  EXPECT_EQ(m.param_count, m.theta.numel());
  EXPECT_EQ(m.max_update_bytes, static_cast<uint64_t>(m.param_count) * 4 + 4096 + 2048 * m.theta.size());
  EXPECT_EQ(m.limits.max_decoded_bytes, static_cast<uint64_t>(m.param_count) * 4);
  EXPECT_EQ(m.limits.max_tensors, m.theta.size() + 1024);
  EXPECT_EQ(m.base_weights_hash, "");
  EXPECT_EQ(m.base_params.size(), 0u);
  EXPECT_FALSE(m.config_hash.empty());
  EXPECT_FALSE(m.tokenizer_hash.empty());
  EXPECT_NE(m.config_json.find("num_hidden_layers"), std::string::npos) << m.config_json;
  ASSERT_NE(m.task, nullptr);
  EXPECT_EQ(m.spec, "");  // the caller's to set
  // The preset's weights are seeded: a second load is the same model.
  const RunModel again = load_run_model(tiny(), "tiny").value();
  EXPECT_EQ(again.config_hash, m.config_hash);
  EXPECT_TRUE(torch::equal(again.theta.tensors[0], m.theta.tensors[0]));  // seeded weights
}

TEST(RunModel, ALoraRunExchangesAdaptersOnAHashedBase) {
  MeshRunConfig c = tiny();
  const int64_t full = load_run_model(c, "tiny").value().param_count;
  c.run.lora.rank = 2;
  const RunModel m = load_run_model(c, "tiny").value();
  EXPECT_LT(m.param_count, full);
  EXPECT_EQ(m.base_weights_hash.size(), 32u);
  EXPECT_EQ(m.base_params.numel(), full);
}

TEST(CoordinatorStartup, IngestRulesComeFromTheRun) {
  MeshRunConfig c = tiny();
  c.mesh.norm_bound_factor = 10;
  c.mesh.norm_window = 5;
  c.mesh.max_updates_per_minute = 7;
  c.mesh.audit_exclude_after = 3;
  RunModel m;
  m.max_update_bytes = 1000;
  m.param_count = 200;
  RoundRules round;
  round.max_staleness = 4;
  const IngestRules r = ingest_rules(c, m, "abc", round, true);
  EXPECT_EQ(r.run_id, "abc");
  EXPECT_EQ(r.max_update_bytes, 1000u);
  EXPECT_EQ(r.param_count, 200);
  EXPECT_FALSE(r.lora);
  EXPECT_TRUE(r.audit_on);
  EXPECT_EQ(r.audit_exclude_after, 3);
  EXPECT_EQ(r.round.max_staleness, 4);
  EXPECT_DOUBLE_EQ(r.norm_bound_factor, 10);
  EXPECT_EQ(r.norm_window, 5);
  EXPECT_EQ(r.max_updates_per_minute, 7);
}

TEST(CoordinatorStartup, RunIdsAreSixteenHexDigitsAndDoNotRepeat) {
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    const std::string id = random_hex16();
    EXPECT_EQ(id.size(), 16u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
}

}  // namespace
}  // namespace meshrl::mesh

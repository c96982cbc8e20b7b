// The manifest a node gets at its join (mesh/run_manifest.h): the schedule step a node starts its
// inner lr schedule from (sync: version x H; async: the furthest reported, capped at version x H,
// so a node that misreports cannot push the others past it) and the fields of the manifest.
//   build/tests/test_mesh --gtest_filter='RunManifest*'
#include <gtest/gtest.h>

#include "mesh/run_manifest.h"

namespace meshrl::mesh {
namespace {

std::map<std::string, NodeRecord> reported(std::vector<int64_t> steps) {
  std::map<std::string, NodeRecord> out;
  for (size_t i = 0; i < steps.size(); ++i) out["n" + std::to_string(i)].last_progress.set_schedule_step(steps[i]);
  return out;
}

TEST(RunManifest, SyncRunsScheduleByVersion) {
  MeshSection m;
  m.inner_steps = 3;
  EXPECT_EQ(schedule_step(m, 5, reported({100})), 15);
  EXPECT_EQ(schedule_step(m, 0, {}), 0);
}

TEST(RunManifest, AsyncRunsTakeTheFurthestReportedStepUpToTheBound) {
  MeshSection m;
  m.mode = "async";
  m.inner_steps = 3;
  EXPECT_EQ(schedule_step(m, 5, reported({4, 9, 2})), 9);
  EXPECT_EQ(schedule_step(m, 5, reported({4, 1000})), 15);  // a node cannot claim more than version x H
  EXPECT_EQ(schedule_step(m, 5, {}), 0);
}

TEST(RunManifest, TheManifestSaysWhoTheRunIsAndWhereItStands) {
  MeshRunConfig c;
  c.run.task.kind = "arithmetic";
  c.mesh.lease_s = 12;
  RunModel model;
  model.spec = "tiny";
  model.config_json = "{}";
  model.config_hash = "ch";
  model.tokenizer_hash = "th";
  model.base_weights_hash = "bh";
  model.param_count = 42;
  model.task = std::shared_ptr<const tasks::Task>(tasks::make_task(c.run.task).value());
  const v1::Manifest m = run_manifest("run-9", c, model, 7, "hash-7", true, 21);
  EXPECT_EQ(m.run_id(), "run-9");
  EXPECT_EQ(m.model_spec(), "tiny");
  EXPECT_EQ(m.model_config_hash(), "ch");
  EXPECT_EQ(m.tokenizer_hash(), "th");
  EXPECT_EQ(m.base_weights_hash(), "bh");
  ASSERT_EQ(m.task_names_size(), 1);
  EXPECT_EQ(m.task_names(0), model.task->name());
  EXPECT_EQ(m.current_version(), 7);
  EXPECT_EQ(m.current_hash(), "hash-7");
  EXPECT_DOUBLE_EQ(m.lease_seconds(), 12);
  EXPECT_EQ(m.param_count(), 42);
  EXPECT_TRUE(m.finished());
  EXPECT_EQ(m.schedule_step(), 21);
  EXPECT_NE(m.run_config_toml().find("[mesh]"), std::string::npos);
  EXPECT_FALSE(m.algorithm_json().empty());
}

}  // namespace
}  // namespace meshrl::mesh

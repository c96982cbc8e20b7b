// A node's local state across restarts (mesh/node_state_keeper.h): what a snapshot saves (the
// error-feedback residual, AdamW moments, trainer step) comes back in a fresh process of the same
// run and node; a state of another node is ignored with one line and nothing half-restored;
// without a state dir nothing is kept. On the tiny preset.
//   build/tests/test_mesh --gtest_filter='NodeStateKeeper*'
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mesh/node_state_keeper.h"
#include "mesh/policy_params.h"
#include "rollout/policy.h"
#include "tasks/task.h"

namespace meshrl::mesh {
namespace {

namespace fs = std::filesystem;

// Answers nothing: the keeper only reads the session's name and run id.
class Silent : public CoordinatorClient {
 public:
  Result<v1::JoinReply> join(const v1::JoinRequest&) override { return io_error("silent"); }
  Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest&) override { return io_error("silent"); }
  Result<v1::LeaveReply> leave(const v1::LeaveRequest&) override { return io_error("silent"); }
  Result<Download> download_weights(const std::string&, uint64_t, int64_t, uint64_t) override { return io_error("silent"); }
  Result<Download> download_base(const std::string&, uint64_t, uint64_t) override { return io_error("silent"); }
  Result<Download> get_broadcast(const std::string&, uint64_t, int64_t, uint64_t) override { return io_error("silent"); }
  Result<v1::SubmitReply> submit(const v1::UpdateHeader&, const std::string&) override { return io_error("silent"); }
  Status watch(const std::string&, uint64_t, const std::function<bool(const v1::VersionAnnouncement&)>&) override {
    return io_error("silent");
  }
  Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer&) override { return io_error("silent"); }
};

// One node process's pieces the keeper reads: trainer, weights held at version 4, residual.
struct NodeProcess {
  explicit NodeProcess(const std::string& name, const fs::path& state_dir) {
    o.name = name;
    o.state_dir = state_dir.string();
    o.log = [this](const std::string& line) { log.push_back(line); };
    tasks::TaskConfig tc;
    tc.arithmetic.digits = 1;
    tc.n_eval = 20;
    rl::GrpoSection g;
    g.prompts_per_step = 2;
    g.group_size = 2;
    g.max_new_tokens = 3;
    g.filter_equal_groups = false;  // the untrained model's groups are all wrong: step anyway, so AdamW has moments
    trainer = std::make_unique<rl::GrpoTrainer>(rollout::load_policy("tiny").value(), tasks::make_task(tc).value(), g);
    NamedTensors params = trainable_parameters(*trainer->policy().model);
    follower = std::make_unique<VersionFollower>(session, tally, params, make_codec(CodecConfig{}).value(), UpdateDecodeLimits{},
                                                 DownloadCaps{});
    follower->rebase(FetchedVersion{clone_named_tensors(params), 4, "hash-v4"}, /*first=*/true);
    keeper = std::make_unique<NodeStateKeeper>(o, session, *trainer, *follower, ef);
  }
  bool logged(const std::string& part) const {
    for (const auto& l : log)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }

  NodeOptions o;
  std::vector<std::string> log;
  Silent client;
  NodeTally tally{nullptr};
  NodeSession session{client, o, "pk", tally, nullptr};
  std::unique_ptr<rl::GrpoTrainer> trainer;
  std::unique_ptr<VersionFollower> follower;
  ErrorFeedback ef;
  std::unique_ptr<NodeStateKeeper> keeper;
};

class NodeStateKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("meshrl-keeper-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A process that trained one step and holds a residual of 0.25 everywhere, saved.
  void save_one(const std::string& name) {
    NodeProcess p(name, dir_);
    ASSERT_TRUE(p.trainer->step().is_ok());
    NamedTensors r = clone_named_tensors(p.follower->params());
    for (auto& t : r.tensors) t.fill_(0.25f);
    ASSERT_TRUE(p.ef.set_residual(r).is_ok());
    auto s = p.keeper->snapshot();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->base_version, 4);
    EXPECT_EQ(s->base_hash, "hash-v4");
    EXPECT_EQ(s->trainer_step, 1);
    p.keeper->save(*s);
    saved_norm_ = p.ef.residual_norm();
  }

  fs::path dir_;
  double saved_norm_ = 0;
};

TEST_F(NodeStateKeeperTest, ARestartOfTheSameNodeGetsItsResidualMomentsAndStepBack) {
  save_one("paris");
  NodeProcess again("paris", dir_);
  EXPECT_EQ(again.ef.residual_norm(), 0);
  again.keeper->restore();
  EXPECT_TRUE(again.logged("restored node state from")) << (again.log.empty() ? "" : again.log.back());
  EXPECT_DOUBLE_EQ(again.ef.residual_norm(), saved_norm_);
  EXPECT_EQ(again.trainer->step_count(), 1);
  int64_t moments = 0;
  for (const auto& m : again.trainer->optimizer_state().params)
    if (m) ++moments;
  EXPECT_GT(moments, 0);
}

TEST_F(NodeStateKeeperTest, AStateOfAnotherNodeIsIgnoredWithOneLine) {
  save_one("paris");
  NodeProcess other("dublin", dir_);
  other.keeper->restore();
  EXPECT_TRUE(other.logged("WARNING: node state ignored")) << (other.log.empty() ? "" : other.log.back());
  EXPECT_EQ(other.ef.residual_norm(), 0);
  EXPECT_EQ(other.trainer->step_count(), 0);
}

TEST_F(NodeStateKeeperTest, WithoutAStateDirNothingIsKept) {
  NodeProcess p("paris", "");
  EXPECT_FALSE(p.keeper->enabled());
  EXPECT_EQ(p.keeper->snapshot(), nullptr);
  p.log.clear();
  p.keeper->restore();
  EXPECT_TRUE(p.log.empty());
}

}  // namespace
}  // namespace meshrl::mesh

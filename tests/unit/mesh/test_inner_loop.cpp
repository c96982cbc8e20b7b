// The node's inner loop (mesh/inner_loop.h), the one both the sync and the overlap loop train in:
// H steps per window with the scored samples summed; a hook before each step that can end the
// window early (the overlap loop's rebase point); a partial window continued; a stop honoured
// before the next step; a failing hook stops the loop. On the tiny preset, a few prompts per step.
//   build/tests/test_mesh --gtest_filter='InnerLoop*'
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "mesh/inner_loop.h"
#include "rollout/policy.h"
#include "tasks/task.h"

namespace meshrl::mesh {
namespace {

std::unique_ptr<rl::GrpoTrainer> tiny_trainer() {
  tasks::TaskConfig tc;
  tc.arithmetic.digits = 1;
  tc.arithmetic.operators = "+";
  tc.n_eval = 20;
  rl::GrpoSection g;
  g.steps = 10;
  g.prompts_per_step = 2;
  g.group_size = 2;
  g.max_new_tokens = 3;
  g.lr = 1e-3;
  return std::make_unique<rl::GrpoTrainer>(rollout::load_policy("tiny").value(), tasks::make_task(tc).value(), g);
}

class InnerLoopTest : public ::testing::Test {
 protected:
  std::unique_ptr<rl::GrpoTrainer> trainer_ = tiny_trainer();
  NodeTally tally_{nullptr};
  std::atomic<bool> stop_{false};
  InnerLoop loop_{*trainer_, tally_, /*inner_steps=*/3, [this] { return stop_.load(); }};
};

TEST_F(InnerLoopTest, AWindowIsHStepsWithTheirScoredSamplesSummed) {
  std::vector<double> rewards;  // each step's mean reward, from the rollouts it scored
  trainer_->set_on_scored([&](const rl::Rollouts& r) {
    double sum = 0;
    for (const auto& s : r.scores) sum += s.reward;
    rewards.push_back(sum / static_cast<double>(r.scores.size()));
  });
  InnerWindow w;
  ASSERT_TRUE(loop_.run(w).is_ok());
  EXPECT_EQ(w.steps, 3);
  EXPECT_EQ(w.samples, 3 * 2 * 2);  // no verifier fails on arithmetic: every completion is scored
  ASSERT_EQ(rewards.size(), 3u);
  EXPECT_NEAR(w.reward_sum, rewards[0] + rewards[1] + rewards[2], 1e-6);
  EXPECT_NEAR(w.reward_mean(), w.reward_sum / 3, 1e-12);
  EXPECT_EQ(trainer_->step_count(), 3);
  EXPECT_EQ(tally_.report().inner_steps, 3);
  EXPECT_EQ(tally_.progress().schedule_step(), 3);
  // A full window runs nothing more.
  ASSERT_TRUE(loop_.run(w).is_ok());
  EXPECT_EQ(trainer_->step_count(), 3);
}

TEST_F(InnerLoopTest, TheHookRunsBeforeEachStepAndCanEndTheWindowEarly) {
  int calls = 0;
  InnerWindow w;
  ASSERT_TRUE(loop_.run(w, [&]() -> Result<bool> { return ++calls < 2; }).is_ok());
  EXPECT_EQ(calls, 2);     // before step 1 (go on), before step 2 (stop)
  EXPECT_EQ(w.steps, 1);
  // The window continues where it stopped: two more steps, a hook call before each.
  calls = 0;
  ASSERT_TRUE(loop_.run(w, [&]() -> Result<bool> {
                     ++calls;
                     return true;
                   }).is_ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(w.steps, 3);
  EXPECT_EQ(trainer_->step_count(), 3);
}

TEST_F(InnerLoopTest, AFailingHookStopsTheLoopWithItsError) {
  InnerWindow w;
  Status st = loop_.run(w, []() -> Result<bool> { return data_loss("fetched version hashes wrong"); });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(w.steps, 0);
  EXPECT_EQ(trainer_->step_count(), 0);
}

TEST_F(InnerLoopTest, AStopIsSeenBeforeTheNextStep) {
  InnerWindow w;
  ASSERT_TRUE(loop_.run(w, [&]() -> Result<bool> {
                     if (w.steps == 1) stop_ = true;  // stop after the first step
                     return true;
                   }).is_ok());
  EXPECT_EQ(w.steps, 2);  // the hook runs after the stop check: the second step was already allowed
  stop_ = true;
  InnerWindow fresh;
  ASSERT_TRUE(loop_.run(fresh).is_ok());
  EXPECT_EQ(fresh.steps, 0);
}

}  // namespace
}  // namespace meshrl::mesh

// Evaluation's progress callback: called after every generation batch with rows done rising
// strictly to the total (greedy rows, then the pass@k samples), and forwarded by the trainer.
//   OMP_NUM_THREADS=1 build/tests/test_rl --gtest_filter='EvalProgress*'
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "rl/evaluate.h"
#include "rl/trainer.h"
#include "support/micro_policy.h"

namespace meshrl::rl {
namespace {

std::shared_ptr<const tasks::Task> one_digit_addition(int64_t n_eval) {
  tasks::TaskConfig c;
  c.arithmetic.digits = 1;
  c.arithmetic.operators = "+";
  c.n_eval = n_eval;
  return tasks::make_task(c).value();
}

using Calls = std::vector<std::pair<int64_t, int64_t>>;

// Rows done strictly rising, never above the total, the total never changing, ending at it.
void expect_monotone_to_total(const Calls& calls, int64_t total) {
  ASSERT_FALSE(calls.empty());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, total) << "call " << i;
    EXPECT_GT(calls[i].first, i > 0 ? calls[i - 1].first : 0) << "call " << i;
    EXPECT_LE(calls[i].first, total) << "call " << i;
  }
  EXPECT_EQ(calls.back().first, total);
}

TEST(EvalProgress, GreedyAndSampledRowsReachTheTotal) {
  const auto task = one_digit_addition(20);
  ASSERT_GE(task->n_eval(), 7u);  // 1-digit addition holds out 10 of its 100 problems
  auto policy = test_support::micro_policy(3);
  EvalOptions o;
  o.n_problems = 7;
  o.pass_k = 2;
  o.n_samples = 3;
  o.max_new_tokens = 3;
  o.batch_size = 3;
  o.stop_ids = policy.stop_ids;
  Calls calls;
  o.on_progress = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
  const EvalResult r = evaluate(*policy.model, *policy.tokenizer, *task, o).value();
  EXPECT_EQ(r.n_problems, 7);
  EXPECT_EQ(r.n_samples, 3);
  // 7 greedy rows in batches of 3 (3 calls: 3, 6, 7), then 7 x 3 sampled rows (7 calls).
  expect_monotone_to_total(calls, 7 + 21);
  EXPECT_EQ(calls.size(), 10u);
  EXPECT_EQ(calls[2].first, 7);  // the greedy pass ends on its own count
}

TEST(EvalProgress, TrainerForwardsTheCallback) {
  EvalSection e;
  e.n_eval = 7;
  e.batch_size = 4;
  e.max_new_tokens = 3;
  GrpoSection g;
  g.max_new_tokens = 3;
  GrpoTrainer t(test_support::micro_policy(4), one_digit_addition(20), g, e);
  Calls calls;
  const EvalResult r = t.evaluate([&](int64_t done, int64_t total) { calls.emplace_back(done, total); }).value();
  EXPECT_EQ(r.n_problems, 7);
  expect_monotone_to_total(calls, 7);
  EXPECT_EQ(calls.size(), 2u);  // rows 4, then 7
  EXPECT_TRUE(t.evaluate().is_ok());  // no callback: nothing to call
}

}  // namespace
}  // namespace meshrl::rl

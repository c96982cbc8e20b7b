// Seeded random junk through every parser (no crash, sane results) and concurrent scoring.
//   build/tests/test_tasks --gtest_filter='Robustness*'
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "tasks/answer.h"
#include "tasks/expression.h"
#include "tasks/split.h"
#include "tasks/task.h"

namespace meshrl::tasks {
namespace {

std::string junk(Rng& rng, const std::string& alphabet, int max_len) {
  std::string s(rng.uniform_int(0, max_len), ' ');
  for (char& c : s) c = alphabet[rng.uniform_int(0, int64_t(alphabet.size()) - 1)];
  return s;
}

TEST(Robustness, RandomTextThroughTheParsers) {
  Rng rng(42);
  const std::string alphabet = std::string("0123456789+-*/() ,.$#{}\\boxed\n\xFF\xC3", 28);
  auto rx = AnswerExtractor::create("regex", "(\\d+)\\D*$", "t");
  ASSERT_TRUE(rx.is_ok());
  int n_ok = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string s = junk(rng, alphabet, 40);
    const ExpressionResult r = check_expression(s, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 25, 50});
    if (r.outcome == ExpressionOutcome::kOk) {
      ++n_ok;
      EXPECT_GT(r.value.den, 0);
      EXPECT_EQ(std::gcd(r.value.num, r.value.den), 1) << s;
    } else {
      EXPECT_FALSE(r.detail.empty()) << s;
    }
    if (auto n = find_last_number(s)) {
      EXPECT_TRUE(parse_number(*n).has_value()) << s << " -> " << *n;
    }
    (void)parse_number(s);
    (void)extract_boxed(s);
    (void)extract_gsm8k(s);
    (void)rx->extract(s);
  }
  EXPECT_GT(n_ok, 100);  // the alphabet does produce valid expressions
}

TEST(Robustness, ConcurrentScoringMatchesSequential) {
  TaskConfig cfg;
  cfg.kind = "countdown";
  auto t = make_task(cfg);
  ASSERT_TRUE(t.is_ok());
  const Task& task = **t;
  std::vector<Problem> problems;
  std::vector<std::string> completions;
  Rng rng(7);
  for (uint64_t s = 0; s < 400; ++s) {
    problems.push_back(task.sample(s));
    completions.push_back(s % 2 ? *task.solution(problems.back()) : junk(rng, "0123456789+-*/()\n", 12));
  }
  std::vector<double> want(problems.size()), got(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) want[i] = task.score(problems[i], completions[i])->reward;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (size_t i = k; i < problems.size(); i += 4) got[i] = task.score(problems[i], completions[i])->reward;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(got, want);
  EXPECT_GT(std::accumulate(want.begin(), want.end(), 0.0), 199.0);  // the solutions all score
}

}  // namespace
}  // namespace meshrl::tasks

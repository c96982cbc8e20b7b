// Countdown task: generator, split, and verifier through the Task interface.
//   build/tests/test_tasks --gtest_filter='Countdown*'
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tasks/countdown_task.h"

namespace meshrl::tasks {
namespace {

TaskConfig countdown(double bonus = 0) {
  TaskConfig c;
  c.kind = "countdown";
  c.format_reward = bonus;
  return c;
}

std::unique_ptr<Task> make(const TaskConfig& cfg) {
  auto t = make_task(cfg);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::move(t).value();
}

Score score(const Task& t, const Problem& p, const std::string& completion) {
  auto s = t.score(p, completion);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return std::move(s).value();
}

Problem handmade(std::vector<int64_t> numbers, int64_t target) {
  return Problem{"handmade", "", nlohmann::json{{"numbers", numbers}, {"target", target}}.dump()};
}

TEST(Countdown, PromptListsSortedNumbersAndTarget) {
  auto t = make(countdown());
  const std::regex shape(R"(^(\d+) (\d+) (\d+) (\d+) -> (\d+):$)");
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const Problem p = t->sample(seed);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(p.prompt, m, shape)) << p.prompt;
    std::vector<int64_t> nums;
    for (int i = 1; i <= 4; ++i) nums.push_back(std::stoll(m[i]));
    EXPECT_TRUE(std::is_sorted(nums.begin(), nums.end())) << p.prompt;
    for (int64_t n : nums) EXPECT_TRUE(n >= 1 && n <= 50) << p.prompt;
    const int64_t target = std::stoll(m[5]);
    EXPECT_TRUE(target >= 1 && target <= 100) << p.prompt;
    const auto payload = nlohmann::json::parse(p.answer);
    EXPECT_EQ(payload["numbers"].get<std::vector<int64_t>>(), nums);
    EXPECT_EQ(payload["target"].get<int64_t>(), target);
  }
}

TEST(Countdown, GeneratedSolutionsAlwaysVerify) {
  TaskConfig cfg = countdown(0.1);
  cfg.countdown.n_numbers = 5;
  cfg.countdown.number_max = 20;
  cfg.countdown.target_max = 500;
  auto t = make(cfg);
  std::set<char> ops_seen;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    const Problem p = t->sample(seed);
    const auto sol = t->solution(p);
    ASSERT_TRUE(sol.has_value());
    for (char c : *sol) ops_seen.insert(c);
    const Score s = score(*t, p, *sol);
    EXPECT_TRUE(s.correct) << p.prompt << " " << *sol << ": " << s.detail;
    EXPECT_DOUBLE_EQ(s.reward, 1.1);
  }
  for (char op : std::string("+-*/()")) EXPECT_TRUE(ops_seen.count(op)) << op;
}

TEST(Countdown, DeterministicPerSeedAndEvalDisjointFromTenThousandSamples) {
  auto a = make(countdown()), b = make(countdown());
  std::set<std::string> eval;
  for (size_t i = 0; i < a->n_eval(); ++i) {
    EXPECT_EQ(a->eval_problem(i).prompt, b->eval_problem(i).prompt);
    eval.insert(a->eval_problem(i).prompt);
  }
  EXPECT_EQ(eval.size(), 500u);
  for (uint64_t seed = 0; seed < 10000; ++seed) {
    const Problem p = a->sample(seed);
    if (seed < 100) {
      EXPECT_EQ(p.answer, b->sample(seed).answer);
    }
    ASSERT_EQ(eval.count(p.prompt), 0u) << p.prompt;
  }
}

TEST(Countdown, ScoresTrickyCompletions) {
  auto t = make(countdown(0.5));
  const Problem p = handmade({3, 7, 25, 50}, 72);
  Score s = score(*t, p, "50+25-3\n");
  EXPECT_TRUE(s.correct);
  EXPECT_TRUE(s.format_ok);
  EXPECT_DOUBLE_EQ(s.reward, 1.5);
  EXPECT_TRUE(score(*t, p, "(50 - 3) + 25\n").correct);
  s = score(*t, p, "50+25-3");  // no newline: correct, no bonus
  EXPECT_TRUE(s.correct);
  EXPECT_DOUBLE_EQ(s.reward, 1.0);

  s = score(*t, p, "50+25-7\n");  // well-formed, wrong value
  EXPECT_FALSE(s.correct);
  EXPECT_DOUBLE_EQ(s.reward, 0.5);
  EXPECT_EQ(s.detail, "reaches 68, target 72");
  s = score(*t, p, "50+22\n");  // a number not given
  EXPECT_FALSE(s.correct);
  EXPECT_DOUBLE_EQ(s.reward, 0.5);
  s = score(*t, p, "50+25-3+3-3\n");  // 3 used three times
  EXPECT_FALSE(s.correct);
  EXPECT_NE(s.detail.find("more often"), std::string::npos);

  for (const std::string bad : {"50++3\n", "(3\n", "\n", "", "3 7\n", "50+25-3=72\n", "= 50+25-3\n", "050+25-3\n",
                                "50\xC3\x97" "25\n", "99999999999999999999999\n"}) {
    s = score(*t, p, bad);
    EXPECT_FALSE(s.correct) << bad;
    EXPECT_FALSE(s.format_ok) << bad;
    EXPECT_EQ(s.reward, 0.0) << bad;
  }
}

TEST(Countdown, DivisionByZeroAndOverflowGetNothing) {
  auto t = make(countdown(0.5));
  Score s = score(*t, handmade({7, 7, 50}, 50), "50/(7-7)\n");
  EXPECT_EQ(s.reward, 0.0);
  EXPECT_EQ(s.detail, "division by zero");
  s = score(*t, handmade({4000000000, 4000000000, 1}, 1), "4000000000*4000000000\n");
  EXPECT_EQ(s.reward, 0.0);
  EXPECT_NE(s.detail.find("64-bit"), std::string::npos);
}

TEST(Countdown, ExactFractionsReachTheTarget) {
  auto t = make(countdown());
  EXPECT_TRUE(score(*t, handmade({1, 5, 5, 5}, 24), "(5-1/5)*5\n").correct);
  EXPECT_FALSE(score(*t, handmade({7, 2}, 3), "7/2\n").correct);  // 7/2 is not 3
}

TEST(Countdown, MalformedPayloadIsAnError) {
  auto t = make(countdown());
  for (const std::string bad : {"", "72", "{\"numbers\": [1, 2]}", "{\"numbers\": \"1 2\", \"target\": 3}",
                                "{\"numbers\": [1.5], \"target\": 3}"}) {
    auto s = t->score(Problem{"p", "", bad}, "1+2\n");
    EXPECT_FALSE(s.is_ok()) << bad;
  }
}

TEST(Countdown, UnreachableTargetsFailAtConstruction) {
  TaskConfig cfg = countdown();
  cfg.countdown.n_numbers = 2;
  cfg.countdown.number_min = 1;
  cfg.countdown.number_max = 1;
  cfg.countdown.operators = "+";
  cfg.countdown.target_min = 50;
  cfg.countdown.target_max = 60;
  auto t = make_task(cfg);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("countdown"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace meshrl::tasks

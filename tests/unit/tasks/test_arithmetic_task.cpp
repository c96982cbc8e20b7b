// Arithmetic task: prompt format, determinism, split, verifier on tricky completions.
//   build/tests/test_tasks --gtest_filter='Arithmetic*'
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tasks/arithmetic_task.h"

namespace meshrl::tasks {
namespace {

std::unique_ptr<Task> make(TaskConfig cfg) {
  auto t = make_task(cfg);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::move(t).value();
}

TaskConfig arithmetic(int digits = 2, std::string ops = "+-", bool negative = true, double bonus = 0) {
  TaskConfig c;
  c.kind = "arithmetic";
  c.arithmetic.digits = digits;
  c.arithmetic.operators = ops;
  c.arithmetic.allow_negative = negative;
  c.format_reward = bonus;
  return c;
}

Score score(const Task& t, const Problem& p, const std::string& completion) {
  auto s = t.score(p, completion);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return std::move(s).value();
}

TEST(Arithmetic, PromptsAreShortAndAnswersAreRight) {
  auto t = make(arithmetic());
  const std::regex shape(R"(^(\d{1,2})([+-])(\d{1,2})=$)");
  std::set<char> ops;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    const Problem p = t->sample(seed);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(p.prompt, m, shape)) << p.prompt;
    const int64_t a = std::stoll(m[1]), b = std::stoll(m[3]);
    ops.insert(m[2].str()[0]);
    EXPECT_EQ(p.answer, std::to_string(m[2] == "+" ? a + b : a - b)) << p.prompt;
    EXPECT_EQ(p.id, "arithmetic:" + p.prompt.substr(0, p.prompt.size() - 1));
  }
  EXPECT_EQ(ops, (std::set<char>{'+', '-'}));
  EXPECT_EQ(t->stop_strings(), std::vector<std::string>{"\n"});
}

TEST(Arithmetic, SameSeedSameProblemAcrossInstances) {
  auto a = make(arithmetic(3, "+-*")), b = make(arithmetic(3, "+-*"));
  std::set<std::string> distinct;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    EXPECT_EQ(a->sample(seed).prompt, b->sample(seed).prompt);
    distinct.insert(a->sample(seed).prompt);
  }
  EXPECT_GT(distinct.size(), 190u);  // 3-digit problems rarely repeat
  for (size_t i = 0; i < a->n_eval(); ++i) EXPECT_EQ(a->eval_problem(i).prompt, b->eval_problem(i).prompt);
}

TEST(Arithmetic, NoNegativeResultsWhenDisallowed) {
  auto t = make(arithmetic(2, "-", false));
  for (uint64_t seed = 0; seed < 1000; ++seed) EXPECT_NE(t->sample(seed).answer[0], '-');
  auto n = make(arithmetic(2, "-", true));
  int negatives = 0;
  for (uint64_t seed = 0; seed < 1000; ++seed) negatives += n->sample(seed).answer[0] == '-';
  EXPECT_GT(negatives, 100);
}

TEST(Arithmetic, SixDigitMultiplicationFits) {
  auto t = make(arithmetic(6, "*"));
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const Problem p = t->sample(seed);
    const size_t star = p.prompt.find('*');
    EXPECT_EQ(std::stoll(p.answer), std::stoll(p.prompt.substr(0, star)) * std::stoll(p.prompt.substr(star + 1)));
  }
}

TEST(Arithmetic, EvalSplitIsDisjointFromTenThousandTrainingSamples) {
  auto t = make(arithmetic());
  auto* g = dynamic_cast<GeneratedTask*>(t.get());
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(t->n_eval(), 500u);
  std::set<std::string> eval;
  for (size_t i = 0; i < t->n_eval(); ++i) {
    const Problem p = t->eval_problem(i);
    EXPECT_TRUE(g->is_eval_id(p.id));
    eval.insert(p.prompt);
  }
  EXPECT_EQ(eval.size(), t->n_eval());  // distinct
  for (uint64_t seed = 0; seed < 10000; ++seed) ASSERT_EQ(eval.count(t->sample(seed).prompt), 0u) << seed;
}

TEST(Arithmetic, TinyProblemSpaceStillSplits) {
  auto t = make(arithmetic(1, "+"));  // 100 problems in all
  EXPECT_GE(t->n_eval(), 1u);
  EXPECT_LT(t->n_eval(), 40u);
  std::set<std::string> eval;
  for (size_t i = 0; i < t->n_eval(); ++i) eval.insert(t->eval_problem(i).prompt);
  std::set<std::string> train;
  for (uint64_t seed = 0; seed < 3000; ++seed) train.insert(t->sample(seed).prompt);
  for (const auto& p : train) EXPECT_EQ(eval.count(p), 0u) << p;
  EXPECT_EQ(train.size() + eval.size(), 100u);  // every problem is on exactly one side
}

TEST(Arithmetic, ScoresTrickyCompletions) {
  auto t = make(arithmetic());
  const Problem p{"arithmetic:37+45", "37+45=", "82"};
  auto s = score(*t, p, "82\n");
  EXPECT_TRUE(s.correct);
  EXPECT_TRUE(s.format_ok);
  EXPECT_EQ(s.reward, 1.0);
  EXPECT_EQ(s.detail, "ok");

  s = score(*t, p, " 82 \n");  // spaces around the answer are fine
  EXPECT_TRUE(s.correct);
  s = score(*t, p, "82");  // ran out of tokens before the newline
  EXPECT_TRUE(s.correct);
  EXPECT_FALSE(s.format_ok);
  s = score(*t, p, "82\n\n");  // did not stop at the newline
  EXPECT_TRUE(s.correct);
  EXPECT_FALSE(s.format_ok);
  s = score(*t, p, "81\n");
  EXPECT_FALSE(s.correct);
  EXPECT_TRUE(s.format_ok);
  EXPECT_EQ(s.detail, "expected 82, got 81");
  s = score(*t, p, "81\n82\n");  // only the first line counts
  EXPECT_FALSE(s.correct);

  for (const std::string bad : {"082\n", "+82\n", "82.0\n", "82 apples\n", "The answer is 82\n", "8 2\n", "\n", "",
                                "-0\n", "\xEF\xBC\x98\xEF\xBC\x92\n" /* fullwidth 82 */, "82\xFF\n"}) {
    s = score(*t, p, bad);
    EXPECT_FALSE(s.correct) << bad;
    EXPECT_FALSE(s.format_ok) << bad;
    EXPECT_EQ(s.reward, 0.0) << bad;
  }
  EXPECT_EQ(score(*t, Problem{"n", "3-5=", "-2"}, "-2\n").reward, 1.0);
}

TEST(Arithmetic, FormatRewardIsAddedForWellFormedAnswers) {
  auto t = make(arithmetic(2, "+-", true, 0.25));
  const Problem p{"arithmetic:37+45", "37+45=", "82"};
  EXPECT_DOUBLE_EQ(score(*t, p, "82\n").reward, 1.25);
  EXPECT_DOUBLE_EQ(score(*t, p, "81\n").reward, 0.25);
  EXPECT_DOUBLE_EQ(score(*t, p, "82").reward, 1.0);
  EXPECT_DOUBLE_EQ(score(*t, p, "eighty\n").reward, 0.0);
}

TEST(Arithmetic, SolutionsScoreFullMarks) {
  auto t = make(arithmetic(3, "+-*", true, 0.1));
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Problem p = t->sample(seed);
    const auto sol = t->solution(p);
    ASSERT_TRUE(sol.has_value());
    EXPECT_DOUBLE_EQ(score(*t, p, *sol).reward, 1.1) << p.prompt << " " << *sol;
  }
}

TEST(Arithmetic, MalformedProblemIsAnError) {
  auto t = make(arithmetic());
  auto s = t->score(Problem{"x", "1+1=", "two"}, "2\n");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("non-integer answer"), std::string::npos);
}

TEST(Arithmetic, PaddedOperandsHaveFixedWidth) {
  TaskConfig c = arithmetic(3, "+");
  c.arithmetic.pad_operands = true;
  auto t = make(c);
  const std::regex shape(R"(^(\d{3})\+(\d{3})=$)");
  bool saw_leading_zero = false;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const Problem p = t->sample(seed);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(p.prompt, m, shape)) << p.prompt;
    saw_leading_zero |= m[1].str()[0] == '0' || m[2].str()[0] == '0';
    EXPECT_EQ(p.answer, std::to_string(std::stoll(m[1]) + std::stoll(m[2]))) << p.prompt;  // canonical, unpadded
  }
  EXPECT_TRUE(saw_leading_zero);  // about 19% of problems have an operand below 100
}

TEST(Arithmetic, ReversedAnswersAreWrittenAndReadLeastSignificantFirst) {
  EXPECT_EQ(reverse_digits("82"), "28");
  EXPECT_EQ(reverse_digits("-82"), "-28");
  EXPECT_EQ(reverse_digits("100"), "001");
  EXPECT_EQ(reverse_digits(reverse_digits("-1230")), "-1230");
  TaskConfig c = arithmetic(2, "+-");
  c.arithmetic.reverse_answer = true;
  auto t = make(c);
  const Problem p82{"arithmetic:37+45", "37+45=", "82"};
  EXPECT_EQ(*t->solution(p82), "28\n");
  EXPECT_TRUE(score(*t, p82, "28\n").correct);
  EXPECT_FALSE(score(*t, p82, "82\n").correct);  // the usual order is the wrong notation here
  const Problem p100{"arithmetic:55+45", "55+45=", "100"};
  EXPECT_TRUE(score(*t, p100, "001\n").correct);
  EXPECT_FALSE(score(*t, p100, "1\n").correct);
  const Problem neg{"arithmetic:12-94", "12-94=", "-82"};
  EXPECT_TRUE(score(*t, neg, "-28\n").correct);
  EXPECT_FALSE(score(*t, neg, "28-\n").correct);  // a trailing minus is not "-82" read backwards
  EXPECT_FALSE(score(*t, neg, "28\n").correct);
  const Problem zero{"arithmetic:5-5", "5-5=", "0"};
  EXPECT_TRUE(score(*t, zero, "0\n").correct);
  EXPECT_FALSE(score(*t, zero, "00\n").correct);
  for (uint64_t seed = 0; seed < 100; ++seed) {  // every solution scores full marks
    const Problem p = t->sample(seed);
    EXPECT_TRUE(score(*t, p, *t->solution(p)).correct) << p.prompt << " -> " << *t->solution(p);
  }
}

TEST(Arithmetic, DigitCreditRewardsMatchingDigitsOfWrongAnswersOnly) {
  EXPECT_DOUBLE_EQ(matching_digit_share(82, 81), 0.5);
  EXPECT_DOUBLE_EQ(matching_digit_share(82, 182), 2.0 / 3);  // aligned at the units digit
  EXPECT_DOUBLE_EQ(matching_digit_share(182, 82), 2.0 / 3);
  EXPECT_DOUBLE_EQ(matching_digit_share(82, 28), 0.0);
  EXPECT_DOUBLE_EQ(matching_digit_share(-82, 82), 0.0);       // a wrong sign earns nothing
  EXPECT_DOUBLE_EQ(matching_digit_share(-82, -12), 0.5);
  TaskConfig c = arithmetic(2, "+");
  c.arithmetic.digit_credit = 0.5;
  auto t = make(c);
  const Problem p82{"arithmetic:37+45", "37+45=", "82"};
  const Score right = score(*t, p82, "82\n"), near = score(*t, p82, "81\n"), far = score(*t, p82, "17\n"), junk = score(*t, p82, "x\n");
  EXPECT_TRUE(right.correct);
  EXPECT_DOUBLE_EQ(right.reward, 1.0);  // no extra credit on top of a right answer
  EXPECT_FALSE(near.correct);
  EXPECT_DOUBLE_EQ(near.reward, 0.25);
  EXPECT_DOUBLE_EQ(far.reward, 0.0);
  EXPECT_DOUBLE_EQ(junk.reward, 0.0);
  c.arithmetic.digit_credit = 1.0;  // would pay a wrong answer as much as a right one
  EXPECT_FALSE(make_task(c).is_ok());
}

}  // namespace
}  // namespace meshrl::tasks

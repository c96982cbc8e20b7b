// JSON-lines task: loading, bad lines in both modes, split, rules, solutions.
//   build/tests/test_tasks --gtest_filter='Jsonl*'
#include <gtest/gtest.h>

#include <set>

#include "support/temp_dir.h"
#include "tasks/jsonl_task.h"
#include "tasks_test_util.h"

namespace meshrl::tasks {
namespace {

using testing::data_path;
using test_support::TempDir;

TaskConfig jsonl(const std::string& path) {
  TaskConfig c;
  c.kind = "jsonl";
  c.jsonl.path = path;
  return c;
}

std::unique_ptr<Task> make(const TaskConfig& cfg) {
  auto t = make_task(cfg);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

Score score(const Task& t, const Problem& p, const std::string& completion) {
  auto s = t.score(p, completion);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return std::move(s).value();
}

// n lines "a+b=" -> a+b, distinct prompts.
std::string sums_file(const TempDir& dir, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "{\"prompt\": \"" + std::to_string(i) + "+1=\", \"answer\": \"" + std::to_string(i + 1) + "\"}\n";
  return dir.write("sums.jsonl", text);
}

TEST(Jsonl, StopModeFailsAtTheFirstBadLineWithItsNumber) {
  auto t = make_task(jsonl(data_path("bad_lines.jsonl")));
  ASSERT_FALSE(t.is_ok());
  const std::string& m = t.status().message();
  EXPECT_NE(m.find("bad_lines.jsonl:3: not valid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("on_bad_line"), std::string::npos) << m;  // says how to go on
}

TEST(Jsonl, SkipModeCountsBadLinesAndKeepsTheRest) {
  TaskConfig cfg = jsonl(data_path("bad_lines.jsonl"));
  cfg.jsonl.on_bad_line = "skip";
  auto t = make(cfg);
  ASSERT_TRUE(t);
  // Bad: 3 (not JSON), 5 (no answer), 6 (array), 7 (prompt not a string), 9 ("red" is not a number).
  EXPECT_EQ(t->n_bad_lines(), 5u);
  const auto& msgs = dynamic_cast<JsonlTask&>(*t).bad_line_messages();
  ASSERT_EQ(msgs.size(), 5u);
  EXPECT_NE(msgs[1].find("bad_lines.jsonl:5: missing key 'answer'"), std::string::npos) << msgs[1];
  EXPECT_NE(msgs[2].find(":6: expected a JSON object, got array"), std::string::npos) << msgs[2];
  EXPECT_NE(msgs[3].find(":7: key 'prompt' must be a string, got integer"), std::string::npos) << msgs[3];
  EXPECT_NE(msgs[4].find(":9: answer \"red\" is not a number"), std::string::npos) << msgs[4];
  // Lines 1, 2, 8, 10 remain, split between train and eval.
  std::set<std::string> ids;
  for (uint64_t s = 0; s < 200; ++s) ids.insert(t->sample(s).id);
  for (size_t i = 0; i < t->n_eval(); ++i) ids.insert(t->eval_problem(i).id);
  EXPECT_EQ(ids, (std::set<std::string>{"bad_lines.jsonl:1", "bad_lines.jsonl:2", "bad_lines.jsonl:8", "bad_lines.jsonl:10"}));

  cfg.jsonl.compare = "exact";  // now "red" is a fine answer
  auto exact = make(cfg);
  EXPECT_EQ(exact->n_bad_lines(), 4u);
}

TEST(Jsonl, NumberAnswersAndExtraFieldsAreAccepted) {
  TaskConfig cfg = jsonl(data_path("bad_lines.jsonl"));
  cfg.jsonl.on_bad_line = "skip";
  auto t = make(cfg);
  for (uint64_t s = 0; s < 200; ++s) {
    const Problem p = t->sample(s);
    if (p.id == "bad_lines.jsonl:8") {
      EXPECT_EQ(p.prompt, "4+4=");
      EXPECT_EQ(p.answer, "8");
    }
  }
}

TEST(Jsonl, EvalSplitIsSeededDisjointAndNeverEmpty) {
  TempDir dir;
  auto t = make(jsonl(sums_file(dir, 200)));
  const size_t n_eval = t->n_eval();
  EXPECT_GE(n_eval, 5u);
  EXPECT_LE(n_eval, 45u);
  std::set<std::string> eval;
  for (size_t i = 0; i < n_eval; ++i) eval.insert(t->eval_problem(i).prompt);
  std::set<std::string> train;
  for (uint64_t s = 0; s < 10000; ++s) {
    const Problem p = t->sample(s);
    ASSERT_EQ(eval.count(p.prompt), 0u) << p.prompt;
    train.insert(p.prompt);
  }
  EXPECT_EQ(train.size() + eval.size(), 200u);
  // Same seed, same split; another split_seed moves the boundary.
  auto again = make(jsonl(sums_file(dir, 200)));
  ASSERT_EQ(again->n_eval(), n_eval);
  for (size_t i = 0; i < n_eval; ++i) EXPECT_EQ(again->eval_problem(i).id, t->eval_problem(i).id);
  TaskConfig moved = jsonl(sums_file(dir, 200));
  moved.split_seed = 7;
  std::set<std::string> eval7;
  auto t7 = make(moved);
  for (size_t i = 0; i < t7->n_eval(); ++i) eval7.insert(t7->eval_problem(i).prompt);
  EXPECT_NE(eval7, eval);

  // Two lines: one each side, whatever the fraction.
  auto two = make(jsonl(sums_file(dir, 2)));
  EXPECT_EQ(two->n_eval(), 1u);
  EXPECT_NE(two->sample(0).prompt, two->eval_problem(0).prompt);
}

TEST(Jsonl, TooFewLinesMissingFileAndOversizedFileAreErrors) {
  TempDir dir;
  auto one = make_task(jsonl(sums_file(dir, 1)));
  ASSERT_FALSE(one.is_ok());
  EXPECT_NE(one.status().message().find("at least 2 usable lines"), std::string::npos);
  auto missing = make_task(jsonl((dir.path() / "nope.jsonl").string()));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("nope.jsonl"), std::string::npos);
  TaskConfig small = jsonl(sums_file(dir, 50));
  small.jsonl.max_file_bytes = 100;
  EXPECT_FALSE(make_task(small).is_ok());
  auto utf8 = make_task(jsonl(dir.write("u.jsonl", "{\"prompt\":\"a\",\"answer\":\"1\"}\n{\"prompt\":\"b\xFF\",\"answer\":\"2\"}\n")));
  ASSERT_FALSE(utf8.is_ok());
  EXPECT_NE(utf8.status().message().find("u.jsonl:2"), std::string::npos) << utf8.status().message();
}

TEST(Jsonl, LastNumberRule) {
  TempDir dir;
  TaskConfig cfg = jsonl(sums_file(dir, 10));
  cfg.format_reward = 0.2;
  auto t = make(cfg);
  const Problem p{"x", "3+4=", "7"};
  Score s = score(*t, p, "so 3 + 4 = 7\n");
  EXPECT_TRUE(s.correct);
  EXPECT_DOUBLE_EQ(s.reward, 1.2);
  EXPECT_FALSE(score(*t, p, "7 or 8\n").correct);  // the last number counts
  EXPECT_TRUE(score(*t, p, "8, no, 7.0\n").correct);
  s = score(*t, p, "seven\n");
  EXPECT_FALSE(s.format_ok);
  EXPECT_EQ(s.reward, 0.0);
  s = score(*t, p, "7");
  EXPECT_TRUE(s.correct);
  EXPECT_DOUBLE_EQ(s.reward, 1.0);
  s = score(*t, p, "7\nbut really 8\n");  // only the text before the first stop counts
  EXPECT_TRUE(s.correct);
  EXPECT_FALSE(s.format_ok);
}

TEST(Jsonl, Gsm8kRuleAndRawReferenceAnswers) {
  TaskConfig cfg = jsonl(data_path("gsm8k_small.jsonl"));
  cfg.jsonl.prompt_key = "question";
  cfg.jsonl.answer_rule = "gsm8k";
  cfg.jsonl.stop = {"<end>"};
  cfg.eval_fraction = 0.3;
  auto t = make(cfg);
  ASSERT_TRUE(t);
  std::map<std::string, std::string> answers;
  for (uint64_t s = 0; s < 200; ++s) answers[t->sample(s).id] = t->sample(s).answer;
  for (size_t i = 0; i < t->n_eval(); ++i) answers[t->eval_problem(i).id] = t->eval_problem(i).answer;
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_EQ(answers["gsm8k_small.jsonl:1"], "7");
  EXPECT_EQ(answers["gsm8k_small.jsonl:2"], "950");
  EXPECT_EQ(answers["gsm8k_small.jsonl:4"], "$15.00");
  EXPECT_EQ(answers["gsm8k_small.jsonl:5"], "1,000,000");

  const Problem p{"x", "q", "$15.00"};
  EXPECT_TRUE(score(*t, p, "12 pens at 1.25 is 15.\n#### 15<end>").correct);
  EXPECT_FALSE(score(*t, p, "#### 15 then #### 16<end>").correct);
  Score s = score(*t, p, "it is 15<end>");
  EXPECT_FALSE(s.correct);
  EXPECT_NE(s.detail.find("no answer found"), std::string::npos);
  EXPECT_TRUE(score(*t, Problem{"y", "q", "1,000,000"}, "#### 1000000<end>").correct);
}

TEST(Jsonl, BoxedAndRegexRules) {
  TempDir dir;
  TaskConfig cfg = jsonl(sums_file(dir, 10));
  cfg.jsonl.answer_rule = "boxed";
  auto boxed = make(cfg);
  EXPECT_TRUE(score(*boxed, Problem{"x", "q", "0.5"}, "half is \\boxed{1/2}\n").correct);
  EXPECT_FALSE(score(*boxed, Problem{"x", "q", "0.5"}, "\\boxed{\\frac{1}{2}}\n").format_ok);

  cfg.jsonl.answer_rule = "regex";
  cfg.jsonl.answer_regex = "ANSWER=(\\S+)";
  cfg.jsonl.compare = "exact";
  auto rx = make(cfg);
  EXPECT_TRUE(score(*rx, Problem{"x", "q", "blue"}, "ANSWER=red ANSWER=blue\n").correct);
  EXPECT_FALSE(score(*rx, Problem{"x", "q", "blue"}, "ANSWER=red\n").correct);
  EXPECT_FALSE(rx->solution(Problem{"x", "q", "blue"}).has_value());

  cfg.jsonl.answer_regex = "ANSWER=(\\S+";
  auto bad = make_task(cfg);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("jsonl.answer_regex"), std::string::npos);
}

TEST(Jsonl, SolutionsComeFromTheFileOrFromTheRule) {
  TempDir dir;
  const std::string path = dir.write("s.jsonl",
                                     "{\"prompt\":\"1+1=\",\"answer\":2,\"solution\":\"1+1 makes 2\\n\"}\n"
                                     "{\"prompt\":\"2+2=\",\"answer\":4}\n{\"prompt\":\"3+3=\",\"answer\":6}\n");
  for (const std::string rule : {"last_number", "gsm8k", "boxed"}) {
    TaskConfig cfg = jsonl(path);
    cfg.jsonl.answer_rule = rule;
    cfg.format_reward = 0.1;
    auto t = make(cfg);
    std::vector<Problem> all;
    for (size_t i = 0; i < t->n_eval(); ++i) all.push_back(t->eval_problem(i));
    for (uint64_t s = 0; s < 50; ++s) all.push_back(t->sample(s));
    for (const Problem& p : all) {
      const auto sol = t->solution(p);
      ASSERT_TRUE(sol.has_value());
      if (p.id == "s.jsonl:1") {
        EXPECT_EQ(*sol, "1+1 makes 2\n");
      }
      if (p.id != "s.jsonl:1" || rule == "last_number") {
        EXPECT_DOUBLE_EQ(score(*t, p, *sol).reward, 1.1) << rule << " " << *sol;
      }
    }
  }
}

}  // namespace
}  // namespace meshrl::tasks

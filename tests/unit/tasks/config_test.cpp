// TaskConfig from JSON and from flat pairs: defaults, round trip, unknown keys, wrong types.
//   build-tasks/tests/test_tasks --gtest_filter='TaskConfig*'
#include <gtest/gtest.h>

#include "tasks/task.h"

namespace meshrl::tasks {
namespace {

using nlohmann::json;

std::string error_of(const json& j) {
  auto c = task_config_from_json(j, "run.toml [task]");
  EXPECT_FALSE(c.is_ok()) << j.dump();
  return c.is_ok() ? "" : c.status().message();
}

TEST(TaskConfig, EmptyObjectGivesTheStructDefaults) {
  auto c = task_config_from_json(json::object(), "t");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->kind, "arithmetic");
  EXPECT_EQ(c->arithmetic.digits, 2);
  EXPECT_EQ(c->arithmetic.operators, "+-");
  EXPECT_EQ(c->format_reward, 0.0);
  EXPECT_EQ(c->eval_fraction, 0.1);
}

TEST(TaskConfig, RoundTripsThroughJson) {
  TaskConfig c;
  c.kind = "countdown";
  c.format_reward = 0.1;
  c.split_seed = 12345678901234ull;
  c.countdown.n_numbers = 3;
  c.countdown.operators = "+*";
  c.jsonl.stop = {"\n", "END"};
  auto back = task_config_from_json(task_config_to_json(c), "t");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(task_config_to_json(*back), task_config_to_json(c));
}

TEST(TaskConfig, UnknownKeysAreNamed) {
  EXPECT_NE(error_of({{"digts", 3}}).find("unknown key 'digts'"), std::string::npos);
  const std::string m = error_of({{"arithmetic", {{"digts", 3}}}});
  EXPECT_NE(m.find("unknown key 'arithmetic.digts'"), std::string::npos) << m;
  EXPECT_NE(m.find("run.toml [task]"), std::string::npos) << m;
}

TEST(TaskConfig, WrongTypesAreNamedWithWhatArrived) {
  std::string m = error_of({{"arithmetic", {{"digits", "3"}}}});
  EXPECT_NE(m.find("arithmetic.digits must be an integer, got string \"3\""), std::string::npos) << m;
  m = error_of({{"arithmetic", {{"digits", 2.5}}}});
  EXPECT_NE(m.find("got float 2.5"), std::string::npos) << m;
  EXPECT_NE(error_of({{"format_reward", "0.1"}}).find("format_reward must be a number"), std::string::npos);
  EXPECT_NE(error_of({{"arithmetic", {{"allow_negative", 1}}}}).find("true or false"), std::string::npos);
  EXPECT_NE(error_of({{"split_seed", -1}}).find("non-negative integer"), std::string::npos);
  EXPECT_NE(error_of({{"command", {{"argv", {"a", 1}}}}}).find("command.argv must be an array of strings"), std::string::npos);
  EXPECT_NE(error_of({{"countdown", 4}}).find("countdown must be a table"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("must be a table"), std::string::npos);
}

TEST(TaskConfig, RangesAndEnumsAreChecked) {
  EXPECT_NE(error_of({{"kind", "chess"}}).find("kind must be arithmetic, countdown, jsonl or command"), std::string::npos);
  EXPECT_NE(error_of({{"arithmetic", {{"digits", 7}}}}).find("[1, 6], got 7"), std::string::npos);
  EXPECT_NE(error_of({{"arithmetic", {{"operators", "+/"}}}}).find("arithmetic.operators"), std::string::npos);
  EXPECT_NE(error_of({{"arithmetic", {{"operators", "++"}}}}).find("repeats"), std::string::npos);
  EXPECT_NE(error_of({{"eval_fraction", 1.0}}).find("eval_fraction"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "countdown"}, {"countdown", {{"number_min", 10}, {"number_max", 5}}}}).find("countdown.number_max"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "jsonl"}}).find("jsonl.path"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "jsonl"}, {"jsonl", {{"path", "x"}, {"answer_rule", "regex"}}}}).find("jsonl.answer_regex"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "jsonl"}, {"jsonl", {{"path", "x"}, {"on_bad_line", "ignore"}}}}).find("stop or skip"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "command"}, {"jsonl", {{"path", "x"}}}}).find("command.argv"), std::string::npos);
  // Options of other kinds are not checked: a config may carry sections it does not use.
  EXPECT_TRUE(task_config_from_json({{"kind", "arithmetic"}, {"countdown", {{"n_numbers", 99}}}}, "t").is_ok());
}

TEST(TaskConfig, FlatPairsAsATomlTableGivesThem) {
  auto c = task_config_from_pairs({{"kind", "countdown"}, {"countdown.n_numbers", 3}, {"format_reward", 0.1}}, "t");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->kind, "countdown");
  EXPECT_EQ(c->countdown.n_numbers, 3);
  EXPECT_EQ(c->format_reward, 0.1);
  auto deep = task_config_from_pairs({{"countdown.x.y", 1}}, "t");
  ASSERT_FALSE(deep.is_ok());
  EXPECT_NE(deep.status().message().find("'countdown.x.y'"), std::string::npos);
  auto typo = task_config_from_pairs({{"countdown.n_number", 3}}, "t");
  ASSERT_FALSE(typo.is_ok());
  EXPECT_NE(typo.status().message().find("'countdown.n_number'"), std::string::npos);
  EXPECT_FALSE(task_config_from_pairs({{"countdown", 1}, {"countdown.n_numbers", 3}}, "t").is_ok());
}

TEST(TaskConfig, MakeTaskBuildsEachGeneratedKindAndValidates) {
  TaskConfig c;
  auto a = make_task(c);
  ASSERT_TRUE(a.is_ok());
  EXPECT_NE((*a)->name().find("arithmetic"), std::string::npos);
  c.kind = "countdown";
  auto d = make_task(c);
  ASSERT_TRUE(d.is_ok());
  EXPECT_NE((*d)->name().find("countdown"), std::string::npos);
  c.arithmetic.digits = 0;  // only checked for its own kind
  EXPECT_TRUE(make_task(c).is_ok());
  c.kind = "arithmetic";
  EXPECT_FALSE(make_task(c).is_ok());
}

}  // namespace
}  // namespace meshrl::tasks

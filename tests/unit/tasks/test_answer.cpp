// Answer extraction rules and comparison.
//   build/tests/test_tasks --gtest_filter='Answer*'
#include <gtest/gtest.h>

#include "tasks/answer.h"

namespace meshrl::tasks {
namespace {

std::string last_number(std::string_view s) {
  auto n = find_last_number(s);
  return n ? std::string(*n) : "<none>";
}

TEST(AnswerNumbers, LastNumberPicksTheLastOneAsWritten) {
  EXPECT_EQ(last_number("I have 3 apples and 5 pears"), "5");
  EXPECT_EQ(last_number("total: 1,234 dollars"), "1,234");
  EXPECT_EQ(last_number("so x = -3.5."), "-3.5");
  EXPECT_EQ(last_number("5-3"), "3");  // a minus between numbers is subtraction, not a sign
  EXPECT_EQ(last_number("ratio 3/4"), "3/4");
  EXPECT_EQ(last_number("1,2345"), "2345");
  EXPECT_EQ(last_number("6/0"), "0");  // not a fraction  // not a thousands group
  EXPECT_EQ(last_number("7 or 8\n"), "8");
  EXPECT_EQ(last_number("no digits here"), "<none>");
  EXPECT_EQ(last_number("model v2"), "<none>");  // part of a word
  EXPECT_EQ(last_number("42 \xE2\x80\x94 \xFF\xFE junk"), "42");
}

TEST(AnswerNumbers, ParseNumberHandlesCommonWritings) {
  EXPECT_EQ(parse_number("1,234"), 1234.0);
  EXPECT_EQ(parse_number(" 3.50 "), 3.5);
  EXPECT_EQ(parse_number("$12"), 12.0);
  EXPECT_EQ(parse_number("-7"), -7.0);
  EXPECT_EQ(parse_number("3/4"), 0.75);
  EXPECT_EQ(parse_number("42."), 42.0);
  EXPECT_EQ(parse_number("007"), 7.0);  // leading zeros are still the number in free text
  for (const char* bad : {"", "3/0", "12abc", "1,23", "abc", "--3", "1e5", ".5", "3 4"}) EXPECT_FALSE(parse_number(bad)) << bad;
}

TEST(AnswerNumbers, CompareNumericWithToleranceOrExact) {
  EXPECT_TRUE(answers_match("3.50", "3.5", true, 1e-6));
  EXPECT_TRUE(answers_match("1,234", "1234", true, 1e-6));
  EXPECT_TRUE(answers_match("0.333333", "1/3", true, 1e-6));
  EXPECT_FALSE(answers_match("0.33", "1/3", true, 1e-6));
  EXPECT_TRUE(answers_match("1000001", "1000000", true, 1e-5));  // relative for large values
  EXPECT_FALSE(answers_match("3", "4", true, 1e-6));
  EXPECT_FALSE(answers_match("three", "3", true, 1e-6));
  EXPECT_TRUE(answers_match("  red \n", "red", false, 0));
  EXPECT_FALSE(answers_match("Red", "red", false, 0));
  EXPECT_FALSE(answers_match("3.50", "3.5", false, 0));
}

TEST(AnswerRules, Gsm8kTakesTheTextAfterTheLastMarker) {
  EXPECT_EQ(extract_gsm8k("3 + 4 = 7\n#### 7\nextra"), "7");
  EXPECT_EQ(extract_gsm8k("#### 1 then #### 2"), "2");
  EXPECT_EQ(extract_gsm8k("#### $1,234"), "$1,234");
  EXPECT_FALSE(extract_gsm8k("####   "));
  EXPECT_FALSE(extract_gsm8k("the answer is 7"));
}

TEST(AnswerRules, BoxedHandlesNestedBraces) {
  EXPECT_EQ(extract_boxed("so \\boxed{\\frac{1}{2}} done"), "\\frac{1}{2}");
  EXPECT_EQ(extract_boxed("\\boxed{1} no wait \\boxed{2}"), "2");
  EXPECT_EQ(extract_boxed("\\boxed{{7}}"), "{7}");
  EXPECT_FALSE(extract_boxed("\\boxed{12"));  // cut off inside the box
  EXPECT_FALSE(extract_boxed("boxed 12"));
}

TEST(AnswerRules, RegexTakesGroupOneOfTheLastMatch) {
  auto ex = AnswerExtractor::create("regex", "answer: (-?\\d+)", "t");
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  EXPECT_EQ(ex->extract("answer: 3 ... answer: 5 and 9"), "5");
  EXPECT_FALSE(ex->extract("no answer here"));
  EXPECT_EQ(ex->extract("answer: 4\xFF\xFE answer: 6"), "6");  // invalid UTF-8 is just bytes

  auto whole = AnswerExtractor::create("regex", "[a-z]+", "t");
  ASSERT_TRUE(whole.is_ok());
  EXPECT_EQ(whole->extract("12 red 34 blue 5"), "blue");
  auto empty_ok = AnswerExtractor::create("regex", "x*", "t");  // empty matches must not loop
  ASSERT_TRUE(empty_ok.is_ok());
  EXPECT_EQ(empty_ok->extract("abxx"), "");
}

TEST(AnswerRules, BadPatternNamesTheKeyAndCatastrophicPatternsStop) {
  auto bad = AnswerExtractor::create("regex", "(unclosed", "run.toml [task]");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("jsonl.answer_regex"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("run.toml"), std::string::npos);
  auto slow = AnswerExtractor::create("regex", "(a+)+$", "t");
  ASSERT_TRUE(slow.is_ok());
  EXPECT_FALSE(slow->extract(std::string(64, 'a') + "b"));  // hits the match limit, no answer
}

TEST(AnswerRules, CutAtStopUsesTheEarliestStop) {
  AnswerText a = cut_at_stop("12\n", {"\n"});
  EXPECT_EQ(a.body, "12");
  EXPECT_TRUE(a.ended_with_stop);
  a = cut_at_stop("12 END more\n", {"\n", "END"});
  EXPECT_EQ(a.body, "12 ");
  EXPECT_FALSE(a.ended_with_stop);
  a = cut_at_stop("12", {"\n"});
  EXPECT_EQ(a.body, "12");
  EXPECT_FALSE(a.ended_with_stop);
}

}  // namespace
}  // namespace meshrl::tasks

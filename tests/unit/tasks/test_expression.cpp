// Countdown expression checker and exact rationals.
//   build/tests/test_tasks --gtest_filter='Expression*:Rational*'
#include <gtest/gtest.h>

#include "tasks/expression.h"

namespace meshrl::tasks {
namespace {

using O = ExpressionOutcome;

ExpressionResult check(const std::string& s, std::vector<int64_t> given) { return check_expression(s, given); }

TEST(Rational, ReducesAndReportsOverflowOnlyWhenTheResultDoesNotFit) {
  EXPECT_EQ(rational_add({1, 3}, {1, 6}).value, (Rational{1, 2}));
  EXPECT_EQ(rational_sub({1, 3}, {1, 2}).value, (Rational{-1, 6}));
  EXPECT_EQ(rational_div({7, 1}, {-2, 1}).value, (Rational{-7, 2}));
  // INT64_MAX * (1 / INT64_MAX) = 1: the product only exists before reduction.
  EXPECT_EQ(rational_mul({INT64_MAX, 1}, {1, INT64_MAX}).value, (Rational{1, 1}));
  EXPECT_EQ(rational_add({INT64_MAX, 1}, {1, 1}).error, RationalError::kOverflow);
  EXPECT_EQ(rational_mul({int64_t{1} << 32, 1}, {int64_t{1} << 31, 1}).error, RationalError::kOverflow);
  EXPECT_EQ(rational_div({1, 1}, {0, 1}).error, RationalError::kDivisionByZero);
  EXPECT_EQ((Rational{-7, 2}).to_string(), "-7/2");
}

TEST(Expression, EvaluatesWithPrecedenceAndParentheses) {
  auto r = check("50+25-3", {3, 7, 25, 50});
  ASSERT_EQ(r.outcome, O::kOk) << r.detail;
  EXPECT_EQ(r.value, (Rational{72, 1}));
  EXPECT_EQ(check("3+7*2", {3, 7, 2}).value, (Rational{17, 1}));
  EXPECT_EQ(check("(3+7)*2", {3, 7, 2}).value, (Rational{20, 1}));
  EXPECT_EQ(check("8-3-2", {8, 3, 2}).value, (Rational{3, 1}));  // left-associative
  EXPECT_EQ(check("8/4/2", {8, 4, 2}).value, (Rational{1, 1}));
  EXPECT_EQ(check(" 3 -\t7 ", {3, 7}).value, (Rational{-4, 1}));  // spaces are fine, negatives too
}

TEST(Expression, NonIntegerIntermediatesCountWhenTheExactValueHitsTheTarget) {
  EXPECT_EQ(check("7/2*2", {7, 2, 2}).value, (Rational{7, 1}));
  EXPECT_EQ(check("1/3+1/3+1/3", {1, 3, 1, 3, 1, 3}).value, (Rational{1, 1}));
  EXPECT_EQ(check("(5-1/5)*5", {5, 1, 5, 5}).value, (Rational{24, 1}));
}

TEST(Expression, RejectsMalformedText) {
  for (const std::string s : {"50++3", "(3", "3)", "", "   ", "3 7", "-3+7", "3+", "()", "3(7)", "50+25-3=72", "3.5+1", "x"}) {
    const auto r = check(s, {3, 7, 25, 50, 1, 5});
    EXPECT_EQ(r.outcome, O::kSyntaxError) << "'" << s << "' -> " << r.detail;
    EXPECT_FALSE(r.detail.empty());
  }
  EXPECT_EQ(check("", {3}).detail, "empty expression");
  EXPECT_NE(check("50++3", {50, 3}).detail.find("column 4"), std::string::npos) << check("50++3", {50, 3}).detail;
}

TEST(Expression, LeadingZerosAndUnicodeJunkAreSyntaxErrors) {
  EXPECT_EQ(check("07+3", {7, 3}).outcome, O::kSyntaxError);
  EXPECT_NE(check("07+3", {7, 3}).detail.find("leading zero"), std::string::npos);
  EXPECT_EQ(check("0+3", {0, 3}).outcome, O::kOk);  // a lone zero is a number
  const auto r = check("3\xC3\x97" "7", {3, 7});        // "3×7"
  EXPECT_EQ(r.outcome, O::kSyntaxError);
  EXPECT_NE(r.detail.find("0xC3"), std::string::npos) << r.detail;
  EXPECT_EQ(check("3+7\xEF\xBB\xBF", {3, 7}).outcome, O::kSyntaxError);
}

TEST(Expression, EachGivenNumberAtMostAsOftenAsGiven) {
  auto twice = check("3+3", {3, 7});
  EXPECT_EQ(twice.outcome, O::kNumberNotGiven);
  EXPECT_NE(twice.detail.find("more often"), std::string::npos);
  EXPECT_EQ(check("3+3", {3, 3, 7}).outcome, O::kOk);  // given twice, may be used twice
  auto missing = check("8+1", {3, 7});
  EXPECT_EQ(missing.outcome, O::kNumberNotGiven);
  EXPECT_NE(missing.detail.find("8 is not one of"), std::string::npos);
  EXPECT_EQ(check("7", {3, 7}).outcome, O::kOk);  // not all numbers need to be used
}

TEST(Expression, DivisionByZeroIsReportedNotEvaluated) {
  auto r = check("7/(3-3)", {7, 3, 3});
  EXPECT_EQ(r.outcome, O::kDivisionByZero);
  EXPECT_EQ(r.detail, "division by zero");
  // A syntax error later in the line wins over a division by zero earlier.
  EXPECT_EQ(check("7/(3-3)+", {7, 3, 3}).outcome, O::kSyntaxError);
}

TEST(Expression, HugeNumbersOverflowInsteadOfWrapping) {
  auto lit = check("99999999999999999999+1", {1});
  EXPECT_EQ(lit.outcome, O::kOverflow);
  EXPECT_NE(lit.detail.find("64 bits"), std::string::npos);
  EXPECT_EQ(check("9223372036854775807", {INT64_MAX}).value, (Rational{INT64_MAX, 1}));
  EXPECT_EQ(check("9223372036854775807+1", {INT64_MAX, 1}).outcome, O::kOverflow);
  EXPECT_EQ(check("4000000000*4000000000", {4000000000, 4000000000}).outcome, O::kOverflow);
  // 2^62 * 2 / 4 would need 2^63 in the middle; exact rationals still overflow there.
  EXPECT_EQ(check("4611686018427387904*2/4", {4611686018427387904, 2, 4}).outcome, O::kOverflow);
}

TEST(Expression, LimitsNestingAndLength) {
  std::string deep = std::string(kMaxExpressionDepth + 1, '(') + "3" + std::string(kMaxExpressionDepth + 1, ')');
  EXPECT_EQ(check(deep, {3}).outcome, O::kSyntaxError);
  std::string ok = std::string(kMaxExpressionDepth, '(') + "3" + std::string(kMaxExpressionDepth, ')');
  EXPECT_EQ(check(ok, {3}).outcome, O::kOk);
  std::string longer(kMaxExpressionBytes + 1, ' ');
  EXPECT_EQ(check(longer, {3}).outcome, O::kSyntaxError);
}

}  // namespace
}  // namespace meshrl::tasks

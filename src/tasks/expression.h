// The countdown verifier's expression checker: parses a completion line such as "50+25-3" with a
// small recursive-descent parser, checks that it uses only the given numbers (each at most as
// often as it was given), and evaluates it exactly over 64-bit rationals. Nothing is ever passed
// to an interpreter. Knows nothing about prompts or rewards.
//
// Grammar (spaces and tabs allowed between tokens; no unary minus, no implicit multiplication):
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/') factor)*
//   factor := number | '(' expr ')'
//   number := '0' | [1-9][0-9]*          (a leading zero such as "07" is a syntax error)
// Limits: at most kMaxExpressionBytes bytes and kMaxExpressionDepth nested parentheses, so a
// hostile completion cannot exhaust the stack.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tasks/rational.h"

namespace meshrl::tasks {

inline constexpr size_t kMaxExpressionBytes = 512;
inline constexpr int kMaxExpressionDepth = 32;

enum class ExpressionOutcome {
  kOk,              // parsed, numbers allowed, evaluated: see value
  kSyntaxError,     // not an expression of the grammar above
  kNumberNotGiven,  // a literal not among the given numbers, or used more often than given
  kDivisionByZero,
  kOverflow,        // a literal or an intermediate result does not fit in 64-bit rationals
};

struct ExpressionResult {
  ExpressionOutcome outcome = ExpressionOutcome::kSyntaxError;
  Rational value;      // valid when outcome == kOk
  std::string detail;  // human-readable reason, e.g. "unexpected '+' at column 4"
};

// `given` is the multiset of numbers the expression may use (each at most once per occurrence).
ExpressionResult check_expression(std::string_view text, const std::vector<int64_t>& given);

}  // namespace meshrl::tasks

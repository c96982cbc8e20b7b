// Exact rationals over 64-bit integers for the countdown verifier. Every operation either gives
// the exact reduced result or reports overflow; nothing wraps and nothing rounds. Knows nothing
// about expressions or tasks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace meshrl::tasks {

// num / den in lowest terms, den > 0. Both stay within (INT64_MIN, INT64_MAX] so negation is safe.
struct Rational {
  int64_t num = 0;
  int64_t den = 1;
  bool operator==(const Rational&) const = default;
  std::string to_string() const;  // "7" or "-7/2"
};

enum class RationalError { kNone, kOverflow, kDivisionByZero };

struct RationalResult {
  Rational value;
  RationalError error = RationalError::kNone;
  bool ok() const { return error == RationalError::kNone; }
};

RationalResult rational_add(const Rational& a, const Rational& b);
RationalResult rational_sub(const Rational& a, const Rational& b);
RationalResult rational_mul(const Rational& a, const Rational& b);
RationalResult rational_div(const Rational& a, const Rational& b);

}  // namespace meshrl::tasks

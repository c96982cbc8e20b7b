// Exact rational arithmetic. See rational.h. The work is done in 128-bit integers (a product of
// two int64 values, or a sum of two such products, always fits), reduced, then checked against
// the 64-bit range, so a result is rejected only when it truly does not fit in 64 bits.
#include "tasks/rational.h"

namespace meshrl::tasks {
namespace {

using i128 = __int128;

i128 abs128(i128 x) { return x < 0 ? -x : x; }

i128 gcd128(i128 a, i128 b) {
  a = abs128(a);
  b = abs128(b);
  while (b != 0) {
    i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

bool fits(i128 x) { return x > i128(INT64_MIN) && x <= i128(INT64_MAX); }

// num / den with den != 0, reduced and checked.
RationalResult make(i128 num, i128 den) {
  if (den == 0) return {{}, RationalError::kDivisionByZero};
  if (den < 0) {
    num = -num;
    den = -den;
  }
  const i128 g = gcd128(num, den);
  if (g > 1) {
    num /= g;
    den /= g;
  }
  if (!fits(num) || !fits(den)) return {{}, RationalError::kOverflow};
  return {{static_cast<int64_t>(num), static_cast<int64_t>(den)}, RationalError::kNone};
}

}  // namespace

std::string Rational::to_string() const {
  return den == 1 ? std::to_string(num) : std::to_string(num) + "/" + std::to_string(den);
}

RationalResult rational_add(const Rational& a, const Rational& b) {
  return make(i128(a.num) * b.den + i128(b.num) * a.den, i128(a.den) * b.den);
}
RationalResult rational_sub(const Rational& a, const Rational& b) {
  return make(i128(a.num) * b.den - i128(b.num) * a.den, i128(a.den) * b.den);
}
RationalResult rational_mul(const Rational& a, const Rational& b) {
  return make(i128(a.num) * b.num, i128(a.den) * b.den);
}
RationalResult rational_div(const Rational& a, const Rational& b) {
  if (b.num == 0) return {{}, RationalError::kDivisionByZero};
  return make(i128(a.num) * b.den, i128(a.den) * b.num);
}

}  // namespace meshrl::tasks

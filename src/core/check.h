// MESHRL_CHECK: stop loudly on a broken invariant inside math code (a bug, not bad input).
// Bad input from files or peers is reported with Status (status.h), never with a check.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace meshrl {
struct CheckFailure : std::logic_error {
  using std::logic_error::logic_error;
};
}  // namespace meshrl

#define MESHRL_CHECK(cond, msg)                                                             \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::ostringstream _os;                                                               \
      _os << msg << " (check `" #cond "` failed at " << __FILE__ << ":" << __LINE__ << ")"; \
      throw ::meshrl::CheckFailure(_os.str());                                              \
    }                                                                                       \
  } while (0)

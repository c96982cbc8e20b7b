// Test-only crash injection. See fault_point.h.
#include "core/fault_point.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string>

namespace meshrl::fault_detail {

namespace {

constexpr const char* kPhases[] = {"mid_upload",     "after_ack",     "mid_aggregate", "before_persist",
                                   "mid_persist",    "before_commit", "after_commit"};

struct Spec {
  std::string phase;
  int64_t round = -1;
};

// Async-signal-safe enough for a process about to die: no allocation, straight to fd 2.
void say(const std::string& s) { (void)!::write(2, s.data(), s.size()); }

Spec parse_or_exit() {
  const std::string text = std::getenv("MESHRL_FAULT");
  Spec s;
  const size_t colon = text.rfind(':');
  bool known = false;
  if (colon != std::string::npos) {
    s.phase = text.substr(0, colon);
    for (const char* p : kPhases) known |= s.phase == p;
    const std::string r = text.substr(colon + 1);
    char* end = nullptr;
    const long long v = r.empty() ? -1 : std::strtoll(r.c_str(), &end, 10);
    if (end && *end == '\0' && v >= 1) s.round = v;
  }
  if (!known || s.round < 1) {
    std::string phases;
    for (const char* p : kPhases) phases += std::string(phases.empty() ? "" : ", ") + p;
    say("MESHRL_FAULT='" + text + "' is not PHASE:ROUND (a round >= 1; phases: " + phases + ")\n");
    std::_Exit(2);
  }
  return s;
}

}  // namespace

void reached(const char* phase, int64_t round) {
  static const Spec spec = parse_or_exit();
  if (round != spec.round || std::strcmp(phase, spec.phase.c_str()) != 0) return;
  // The tests read this line to know the crash happened where it was asked for.
  say("FAULT: SIGKILL at fault point " + spec.phase + ":" + std::to_string(round) + "\n");
  std::raise(SIGKILL);
}

}  // namespace meshrl::fault_detail

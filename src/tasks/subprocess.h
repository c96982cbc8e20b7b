// run_subprocess: runs a program with bytes on its stdin and collects its stdout, with a hard
// wall-clock limit and an output cap. POSIX only (posix_spawn, poll). Owns the child for the
// duration of the call: the child leads its own process group, and on timeout or oversized
// output the whole group is SIGKILLed and the child reaped, so a call never hangs and never
// leaves a zombie. Knows nothing about tasks or JSON.
//
// stdin is one end of a socketpair rather than a pipe so that writes can use MSG_NOSIGNAL: a
// child that exits without reading its input must not kill us with SIGPIPE. All our descriptors
// are close-on-exec, so children spawned concurrently from other threads do not inherit them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace meshrl::tasks {

struct SubprocessOptions {
  int timeout_ms = 5000;
  int64_t max_output_bytes = 65536;  // stdout beyond this is an error (the child is killed)
  size_t max_stderr_bytes = 2048;    // stderr beyond this is read and dropped
};

struct SubprocessResult {
  std::string out;           // stdout, at most max_output_bytes
  std::string err;           // the first max_stderr_bytes of stderr
  int exit_code = -1;        // when it exited normally, else -1
  int term_signal = 0;       // the signal that ended it, else 0 (also 0 when we killed it below)
  bool timed_out = false;    // ran past timeout_ms; we killed its group
  bool output_over = false;  // wrote more than max_output_bytes to stdout; we killed its group
  bool ok() const { return exit_code == 0 && term_signal == 0 && !timed_out && !output_over; }
};

// Errors: kIoError when the program cannot be started (or a pipe or poll fails). What the
// program did once started, a timeout or an oversized output included, is a result: the
// caller judges it.
Result<SubprocessResult> run_subprocess(const std::vector<std::string>& argv, std::string_view input, const SubprocessOptions& opt);

}  // namespace meshrl::tasks

// CommandTask: prompts from a JSON-lines file (jsonl_source.h; "answer" optional and passed
// through), scored by an external verifier program the user names (command.argv). Knows nothing
// about what the program checks.
//
// Protocol, one process per score() call (subprocess.h):
//   stdin:  one JSON object {"prompt": "...", "answer": "...", "completion": "..."} and EOF.
//           Invalid UTF-8 in the completion (byte-level models emit it) is replaced by U+FFFD.
//   stdout: either a bare number (the reward) or a JSON object {"reward": x} with optional
//           "correct" (bool, default reward >= 1), "format_ok" (bool, default true) and
//           "detail" (string). The reward is used as is; format_reward must be 0 for this kind.
//   exit:   0. No result within command.timeout_ms (timeout), a non-zero exit or a signal
//           (crash), more than command.max_output_bytes of output or anything else on stdout
//           (garbage) is a Score with `failure` set and `detail` naming the program, the problem
//           and what happened: scoring failed on this completion, which is not the same as
//           reward 0. Once failures pass [task] max_failure_rate over the last failure_window
//           calls (verifier_failures.h), score() returns that error instead; a program that
//           cannot be started is an error at once (no completion can cause that).
// solution(): the line's solution field when present, else none.
#pragma once

#include "tasks/jsonl_source.h"
#include "tasks/subprocess.h"
#include "tasks/verifier_failures.h"

namespace meshrl::tasks {

class CommandTask : public JsonlBackedTask {
 public:
  static Result<std::unique_ptr<Task>> create(const TaskConfig& cfg);

  std::string name() const override;
  Result<Score> score(const Problem& problem, std::string_view completion) const override;

 private:
  CommandTask(const TaskConfig& cfg, JsonlSource source);
  // Scoring stays a const, thread-safe call; the window is the one thing it updates (under its lock).
  mutable VerifierFailureWindow failures_;
};

}  // namespace meshrl::tasks

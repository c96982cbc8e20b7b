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
//   exit:   0. A non-zero exit, a signal, no result within command.timeout_ms, more than
//           command.max_output_bytes of output, or anything else on stdout is an error Status
//           naming the program and the problem: scoring failed, which is not the same as reward 0.
// solution(): the line's solution field when present, else none.
#pragma once

#include "tasks/jsonl_source.h"
#include "tasks/subprocess.h"

namespace meshrl::tasks {

class CommandTask : public JsonlBackedTask {
 public:
  static Result<std::unique_ptr<Task>> create(const TaskConfig& cfg);

  std::string name() const override;
  Result<Score> score(const Problem& problem, std::string_view completion) const override;

 private:
  using JsonlBackedTask::JsonlBackedTask;
};

}  // namespace meshrl::tasks

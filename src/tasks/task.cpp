// The task factory. See task.h.
#include "tasks/task.h"

#include "tasks/arithmetic_task.h"
#include "tasks/command_task.h"
#include "tasks/countdown_task.h"
#include "tasks/jsonl_task.h"

namespace meshrl::tasks {

const char* verifier_failure_name(VerifierFailure f) {
  switch (f) {
    case VerifierFailure::kNone: return "none";
    case VerifierFailure::kTimeout: return "timeout";
    case VerifierFailure::kCrash: return "crash";
    case VerifierFailure::kGarbage: return "garbage";
  }
  return "unknown";
}

Result<std::unique_ptr<Task>> make_task(const TaskConfig& cfg) {
  MESHRL_RETURN_IF_ERROR(validate_task_config(cfg, "[task]"));
  if (cfg.kind == "arithmetic") return ArithmeticTask::create(cfg);
  if (cfg.kind == "countdown") return CountdownTask::create(cfg);
  if (cfg.kind == "jsonl") return JsonlTask::create(cfg);
  return CommandTask::create(cfg);  // validate_task_config admits no other kind
}

}  // namespace meshrl::tasks

// Task = a prompt source + a verifier. A task hands out problems (a short prompt and a reference
// answer), scores a model's completion of a prompt, and, where it can, writes a worked target
// completion for the SFT warm start. Knows nothing about tokenizers, models, tensors or the mesh;
// it sees prompts and completions as plain byte strings.
//
// Contract shared by every task:
// - sample(seed) is a pure function of (config, seed) and only returns training problems.
//   eval_problem(i), i < n_eval(), is the held-out split; no training sample is ever an eval
//   problem. Generated tasks decide membership by hashing the canonical problem text (split.h);
//   file-backed tasks by a seeded draw per line.
// - The completion passed to score() is the generated text after the prompt, *including* the
//   stop string when generation ended on one (the rollout keeps it so the model learns to emit it).
// - Reward: Score.reward = (correct ? 1 : 0) + (format_ok ? format_reward : 0), where format_ok
//   means the completion ends with a stop string and holds an answer the verifier could parse
//   (for countdown: an expression that parses and evaluates without division by zero/overflow).
//   format_reward comes from TaskConfig (default 0). The command task is the exception: its
//   program returns the whole reward.
// - A wrong or malformed completion is a normal Score (reward 0, or the format bonus alone) with
//   `detail` saying why. An external verifier that hangs, crashes or prints garbage on one
//   completion is a Score with `failure` set (reward 0, not correct): that sample has no reward
//   and trainers leave it out, but the run goes on. score() returns an error Status only when
//   scoring as a whole cannot go on: a malformed Problem, a verifier that cannot be started, or
//   more verifier failures among the recent calls than [task] max_failure_rate allows
//   (verifier_failures.h).
// - All const methods are safe to call from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tasks/task_config.h"

namespace meshrl::tasks {

struct Problem {
  std::string id;      // stable and unique within a task, e.g. "arithmetic:37+45" or "data.jsonl:12"
  std::string prompt;  // what the model is conditioned on, e.g. "37+45="
  std::string answer;  // the reference answer ("82"), or a JSON payload for structured tasks (countdown)
};

// Why an external verifier gave no reward for one completion.
enum class VerifierFailure {
  kNone = 0,
  kTimeout,  // no result within command.timeout_ms (killed)
  kCrash,    // a non-zero exit or a signal
  kGarbage,  // stdout is not a reward (unreadable, not finite, or over command.max_output_bytes)
};
const char* verifier_failure_name(VerifierFailure f);  // "none", "timeout", "crash", "garbage"

struct Score {
  double reward = 0;       // see the reward rule above
  bool correct = false;
  bool format_ok = false;
  std::string detail;      // why, for logs and debugging: "ok", "expected 82, got 81", ...
  VerifierFailure failure = VerifierFailure::kNone;  // set: reward is meaningless (0), detail says why
  bool failed() const { return failure != VerifierFailure::kNone; }
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual Problem sample(uint64_t seed) const = 0;   // training split; deterministic in seed
  virtual size_t n_eval() const = 0;                 // size of the held-out split, >= 1
  virtual Problem eval_problem(size_t i) const = 0;  // i < n_eval(); MESHRL_CHECK otherwise
  virtual Result<Score> score(const Problem& problem, std::string_view completion) const = 0;
  // A correct completion for the prompt (with its stop string), e.g. "82\n" for "37+45=", or none
  // when the task cannot write one (regex answers without a solution field, command tasks).
  virtual std::optional<std::string> solution(const Problem& problem) const = 0;
  virtual std::vector<std::string> stop_strings() const = 0;
  // File-backed tasks with on_bad_line = "skip": how many lines were skipped at load. 0 otherwise.
  virtual size_t n_bad_lines() const { return 0; }
};

// Builds the task cfg.kind names; validates cfg first. File-backed tasks read their file here, so
// bad files fail now, naming the file and line.
Result<std::unique_ptr<Task>> make_task(const TaskConfig& cfg);

// reward = (correct ? 1 : 0) + (format_ok ? format_reward : 0); every built-in verifier uses this.
inline Score make_score(bool correct, bool format_ok, double format_reward, std::string detail) {
  return Score{(correct ? 1.0 : 0.0) + (format_ok ? format_reward : 0.0), correct, format_ok, std::move(detail)};
}

}  // namespace meshrl::tasks

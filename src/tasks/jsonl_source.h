// JsonlSource: the prompts of a user's JSON-lines file, split into train and eval, and the shared
// base of the tasks that draw from one (jsonl, command). Owns the file's records; knows nothing
// about how answers are verified (the task passes a per-line check).
//
// File format: one JSON object per line, {"prompt": "...", "answer": "..." or number, ...};
// extra fields are allowed, blank lines are ignored, the key names are configurable
// (jsonl.prompt_key/answer_key/solution_key). A bad line (not JSON, not an object, missing or
// mistyped field, or rejected by the task's check) fails the load with "path:line: why" when
// on_bad_line = "stop", and is counted and skipped when on_bad_line = "skip".
// Split: a line is held out when the hash of its prompt, mixed with split_seed, falls below
// eval_fraction; hashing the prompt (not the line number) keeps duplicate prompts on one side.
// At least one line is held out and at least one kept for training.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tasks/task.h"

namespace meshrl::tasks {

struct JsonlRecord {
  size_t line = 0;  // 1-based line number in the file
  std::string prompt;
  std::string answer;                   // "" when absent and not required
  std::optional<std::string> solution;  // from solution_key, when present and a string
};

// Checks one record and may normalise its answer; returns an error message or "" when fine.
using RecordCheck = std::function<std::string(JsonlRecord&)>;

struct JsonlSource {
  std::string path;
  std::vector<JsonlRecord> train, eval;
  size_t n_bad_lines = 0;
  std::vector<std::string> bad_line_messages;  // the first kMaxBadLineMessages, "path:line: why"
};

inline constexpr size_t kMaxBadLineMessages = 20;

Result<JsonlSource> load_jsonl_source(const TaskConfig& cfg, bool answer_required, const RecordCheck& check);

// sample / eval / solution lookup over a JsonlSource; subclasses add name() and score().
class JsonlBackedTask : public Task {
 public:
  Problem sample(uint64_t seed) const override;
  size_t n_eval() const override { return source_.eval.size(); }
  Problem eval_problem(size_t i) const override;
  std::optional<std::string> solution(const Problem& problem) const override;
  std::vector<std::string> stop_strings() const override { return cfg_.jsonl.stop; }
  size_t n_bad_lines() const override { return source_.n_bad_lines; }
  const std::vector<std::string>& bad_line_messages() const { return source_.bad_line_messages; }

 protected:
  JsonlBackedTask(TaskConfig cfg, JsonlSource source);
  Problem to_problem(const JsonlRecord& r) const;
  // A completion written from the reference answer when the line has no solution; none by default.
  virtual std::optional<std::string> synthesize_solution(const Problem& problem) const { return std::nullopt; }

  TaskConfig cfg_;
  JsonlSource source_;

 private:
  std::unordered_map<std::string, std::string> solutions_;  // problem id -> solution from the file
};

}  // namespace meshrl::tasks

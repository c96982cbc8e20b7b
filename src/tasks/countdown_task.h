// Countdown: reach a target from given numbers with + - * / and parentheses, each given number
// used at most once. Prompt "3 7 25 50 -> 72:" (numbers sorted ascending), completion
// "50+25-3\n". Problem::answer is a JSON payload {"numbers": [3, 7, 25, 50], "target": 72,
// "solution": "50+25-3"}; the generator builds the solution first, so every problem is solvable.
// Knows nothing about tokenizers or models.
//
// Verifier (expression.h): the text before the first newline must parse; intermediate results
// may be fractions as long as the exact rational value equals the target ("7/2*2" reaches 7).
//   syntax error                     -> reward 0, format_ok false
//   division by zero, 64-bit overflow -> reward 0, format_ok false
//   a number not given / used twice  -> not correct; format_ok when it ends with the newline
//   value == target                  -> correct
#pragma once

#include "tasks/generated_task.h"

namespace meshrl::tasks {

class CountdownTask : public GeneratedTask {
 public:
  static Result<std::unique_ptr<Task>> create(const TaskConfig& cfg);

  std::string name() const override;
  Result<Score> score(const Problem& problem, std::string_view completion) const override;
  std::optional<std::string> solution(const Problem& problem) const override;
  std::vector<std::string> stop_strings() const override { return {"\n"}; }

 protected:
  std::optional<Problem> draw(Rng& rng) const override;

 private:
  using GeneratedTask::GeneratedTask;
};

}  // namespace meshrl::tasks

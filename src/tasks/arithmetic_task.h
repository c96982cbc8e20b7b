// Arithmetic: "37+45=" -> "82\n". The smallest task a character-level model can learn from scratch.
// Operands are uniform in [0, 10^digits - 1]; operators are drawn from a configured subset of
// "+-*". Knows nothing about tokenizers or models.
//
// Verifier: the answer is the text before the first newline, spaces around it ignored, and must
// be a canonical integer: "-?(0|[1-9][0-9]*)". "082", "+82", "82.0", "82 apples" and "" are not
// answers (format_ok = false, reward 0); a correct answer without the trailing newline is correct
// but not format_ok.
#pragma once

#include "tasks/generated_task.h"

namespace meshrl::tasks {

class ArithmeticTask : public GeneratedTask {
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

// "-82" -> "-28": the digits reversed, a leading minus kept first (reverse_answer's notation; its
// own inverse).
std::string reverse_digits(std::string_view s);

// Share of digit positions, aligned at the units digit and counted over the longer number, where
// `got` matches `want` (0 when the signs differ): 82 vs 81 -> 0.5, 182 vs 82 -> 2/3.
double matching_digit_share(int64_t want, int64_t got);

// Parses a canonical integer ("-?(0|[1-9][0-9]*)", at most 18 digits); nullopt otherwise.
std::optional<int64_t> parse_canonical_int(std::string_view s);

}  // namespace meshrl::tasks

// JsonlTask: prompts and reference answers from the user's JSON-lines file (jsonl_source.h),
// verified by extracting an answer from the completion (answer.h: last_number | gsm8k | boxed |
// regex) and comparing it numerically (with tolerance) or as an exact trimmed string. Knows
// nothing about tokenizers or models.
//
// Reference answers: with compare = "numeric" each line's answer must read as a number, else the
// line is bad; with answer_rule = "gsm8k" a reference holding "####" (a raw GSM8K answer with its
// reasoning) is reduced to the part after the last "####" first.
// Score: the completion is cut at its first stop string; format_ok = it ended with a stop string
// and the rule found an answer (a number, when numeric); correct = that answer matches.
// solution(): the line's solution field if present, else one written from the reference answer
// in the rule's format ("72\n", "#### 72\n", "\boxed{72}\n"); none for regex.
#pragma once

#include "tasks/answer.h"
#include "tasks/jsonl_source.h"

namespace meshrl::tasks {

class JsonlTask : public JsonlBackedTask {
 public:
  static Result<std::unique_ptr<Task>> create(const TaskConfig& cfg);

  std::string name() const override;
  Result<Score> score(const Problem& problem, std::string_view completion) const override;

 protected:
  std::optional<std::string> synthesize_solution(const Problem& problem) const override;

 private:
  JsonlTask(TaskConfig cfg, JsonlSource source, AnswerExtractor extractor)
      : JsonlBackedTask(std::move(cfg), std::move(source)), extractor_(std::move(extractor)) {}
  AnswerExtractor extractor_;
};

}  // namespace meshrl::tasks

// JSON-lines task with rule-based answer extraction. See jsonl_task.h.
#include "tasks/jsonl_task.h"

namespace meshrl::tasks {

Result<std::unique_ptr<Task>> JsonlTask::create(const TaskConfig& cfg) {
  const JsonlConfig& c = cfg.jsonl;
  MESHRL_ASSIGN_OR_RETURN(AnswerExtractor ex, AnswerExtractor::create(c.answer_rule, c.answer_regex, "[tasks.jsonl] " + c.path));
  const bool numeric = c.compare == "numeric";
  RecordCheck check = [&](JsonlRecord& r) -> std::string {
    if (c.answer_rule == "gsm8k" && r.answer.find("####") != std::string::npos) {
      std::optional<std::string> a = extract_gsm8k(r.answer);
      if (!a) return "answer has '####' but nothing after it";
      r.answer = *a;
    }
    if (trim(r.answer).empty()) return "answer is empty";
    if (numeric && !parse_number(r.answer))
      return "answer \"" + r.answer.substr(0, 40) + "\" is not a number (compare = \"numeric\"; use compare = \"exact\" for text answers)";
    return "";
  };
  MESHRL_ASSIGN_OR_RETURN(JsonlSource src, load_jsonl_source(cfg, /*answer_required=*/true, check));
  return std::unique_ptr<Task>(new JsonlTask(cfg, std::move(src), std::move(ex)));
}

std::string JsonlTask::name() const {
  return "jsonl(" + source_.path + ", " + cfg_.jsonl.answer_rule + ", " + cfg_.jsonl.compare + ", " +
         std::to_string(source_.train.size()) + " train / " + std::to_string(source_.eval.size()) + " eval)";
}

Result<Score> JsonlTask::score(const Problem& problem, std::string_view completion) const {
  const bool numeric = cfg_.jsonl.compare == "numeric";
  if (numeric && !parse_number(problem.answer))
    return invalid_argument("[tasks.jsonl] problem " + problem.id + ": reference answer \"" + problem.answer.substr(0, 40) + "\" is not a number");
  const AnswerText at = cut_at_stop(completion, cfg_.jsonl.stop);
  const double bonus = cfg_.format_reward;
  const std::optional<std::string> got = extractor_.extract(at.body);
  if (!got) return make_score(false, false, bonus, "no answer found (rule " + cfg_.jsonl.answer_rule + ")");
  const std::string shown = "\"" + got->substr(0, 40) + (got->size() > 40 ? "..." : "") + "\"";
  if (numeric && !parse_number(*got)) return make_score(false, false, bonus, shown + " is not a number");
  const bool correct = answers_match(*got, problem.answer, numeric, cfg_.jsonl.tolerance);
  std::string detail = correct ? "ok" : "expected \"" + problem.answer + "\", got " + shown;
  if (!at.ended_with_stop) detail += " (no stop string at the end)";
  return make_score(correct, at.ended_with_stop, bonus, detail);
}

std::optional<std::string> JsonlTask::synthesize_solution(const Problem& problem) const {
  const std::string& rule = cfg_.jsonl.answer_rule;
  const std::string stop = cfg_.jsonl.stop.empty() ? "" : cfg_.jsonl.stop.front();
  if (rule == "last_number") return problem.answer + stop;
  if (rule == "gsm8k") return "#### " + problem.answer + stop;
  if (rule == "boxed") return "\\boxed{" + problem.answer + "}" + stop;
  return std::nullopt;
}

}  // namespace meshrl::tasks

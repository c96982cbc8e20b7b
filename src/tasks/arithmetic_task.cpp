// Arithmetic task. See arithmetic_task.h.
#include "tasks/arithmetic_task.h"

#include <algorithm>

#include "tasks/answer.h"

namespace meshrl::tasks {

std::optional<int64_t> parse_canonical_int(std::string_view s) {
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) ++i;
  const std::string_view digits = s.substr(i);
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  if (negative && digits == "0") return std::nullopt;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return negative ? -v : v;
}

Result<std::unique_ptr<Task>> ArithmeticTask::create(const TaskConfig& cfg) {
  std::unique_ptr<ArithmeticTask> t(new ArithmeticTask(cfg));
  MESHRL_RETURN_IF_ERROR(t->init_splits());
  return std::unique_ptr<Task>(std::move(t));
}

std::string ArithmeticTask::name() const {
  const ArithmeticConfig& a = cfg_.arithmetic;
  return "arithmetic(digits=" + std::to_string(a.digits) + ", operators=\"" + a.operators + "\"" +
         (a.allow_negative ? "" : ", no negatives") + (a.pad_operands ? ", padded" : "") +
         (a.reverse_answer ? ", reversed answer" : "") + ")";
}

std::optional<Problem> ArithmeticTask::draw(Rng& rng) const {
  const ArithmeticConfig& c = cfg_.arithmetic;
  int64_t hi = 1;
  for (int i = 0; i < c.digits; ++i) hi *= 10;
  int64_t a = rng.uniform_int(0, hi - 1), b = rng.uniform_int(0, hi - 1);
  const char op = c.operators[rng.uniform_int(0, int64_t(c.operators.size()) - 1)];
  if (op == '-' && !c.allow_negative && a < b) std::swap(a, b);
  const int64_t r = op == '+' ? a + b : op == '-' ? a - b : a * b;  // |r| < 10^12: no overflow
  auto operand = [&](int64_t v) {
    std::string d = std::to_string(v);
    if (c.pad_operands && static_cast<int>(d.size()) < c.digits) d.insert(0, c.digits - d.size(), '0');
    return d;
  };
  const std::string text = operand(a) + op + operand(b);
  return Problem{"arithmetic:" + text, text + "=", std::to_string(r)};
}

Result<Score> ArithmeticTask::score(const Problem& problem, std::string_view completion) const {
  const std::optional<int64_t> want = parse_canonical_int(problem.answer);
  if (!want) return invalid_argument("[tasks.arithmetic] problem " + problem.id + " has a non-integer answer \"" + problem.answer + "\"");
  const AnswerText at = cut_at_stop(completion, {"\n"});
  // Reversed notation keeps the minus first ("-28" is -82); "28-" must not become "-82".
  const std::string_view raw = trim(at.body);
  const bool reversible = raw.find('-', 1) == std::string_view::npos;
  const std::string body_text = cfg_.arithmetic.reverse_answer && reversible ? reverse_digits(raw) : std::string(raw);
  const std::string_view body = body_text;
  const double bonus = cfg_.format_reward;
  if (body.empty()) return make_score(false, false, bonus, "no answer before the newline");
  const std::optional<int64_t> got = parse_canonical_int(body);
  if (!got) {
    std::string shown(body.substr(0, 40));
    return make_score(false, false, bonus, "'" + shown + "' is not a canonical integer");
  }
  const bool correct = *got == *want;
  std::string detail = correct ? "ok" : "expected " + problem.answer + ", got " + std::to_string(*got);
  if (!at.ended_with_stop) detail += " (no newline at the end)";
  Score s = make_score(correct, at.ended_with_stop, bonus, detail);
  if (!correct) s.reward += cfg_.arithmetic.digit_credit * matching_digit_share(*want, *got);
  return s;
}

double matching_digit_share(int64_t want, int64_t got) {
  if ((want < 0) != (got < 0)) return 0;
  const std::string w = std::to_string(want < 0 ? -want : want), g = std::to_string(got < 0 ? -got : got);
  const size_t n = std::max(w.size(), g.size());
  size_t same = 0;
  for (size_t i = 0; i < std::min(w.size(), g.size()); ++i) same += w[w.size() - 1 - i] == g[g.size() - 1 - i];
  return static_cast<double>(same) / static_cast<double>(n);
}

std::optional<std::string> ArithmeticTask::solution(const Problem& problem) const {
  return (cfg_.arithmetic.reverse_answer ? reverse_digits(problem.answer) : problem.answer) + "\n";
}

std::string reverse_digits(std::string_view s) {
  const size_t sign = !s.empty() && s[0] == '-' ? 1 : 0;
  std::string out(s);
  std::reverse(out.begin() + sign, out.end());
  return out;
}

}  // namespace meshrl::tasks

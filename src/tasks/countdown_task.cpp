// Countdown task: generator and verifier. See countdown_task.h.
#include "tasks/countdown_task.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tasks/answer.h"
#include "tasks/expression.h"

namespace meshrl::tasks {
namespace {

// Intermediate values while generating stay below this, so targets and solutions stay small.
constexpr int64_t kMaxIntermediate = 10'000'000;

struct Payload {
  std::vector<int64_t> numbers;
  int64_t target = 0;
  std::optional<std::string> solution;
};

Result<Payload> parse_payload(const Problem& p) {
  const nlohmann::json j = nlohmann::json::parse(p.answer, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) {
    return invalid_argument("[tasks.countdown] problem " + p.id + ": answer payload " + what +
                            "; expected {\"numbers\": [int...], \"target\": int}");
  };
  if (!j.is_object()) return bad("is not a JSON object");
  if (!j.contains("numbers") || !j["numbers"].is_array() || j["numbers"].empty() || j["numbers"].size() > 64)
    return bad("has no 'numbers' array of 1..64 entries");
  if (!j.contains("target") || !j["target"].is_number_integer()) return bad("has no integer 'target'");
  Payload out;
  for (const auto& n : j["numbers"]) {
    if (!n.is_number_integer()) return bad("has a non-integer in 'numbers'");
    out.numbers.push_back(n.get<int64_t>());
  }
  out.target = j["target"].get<int64_t>();
  if (j.contains("solution") && j["solution"].is_string()) out.solution = j["solution"].get<std::string>();
  return out;
}

}  // namespace

Result<std::unique_ptr<Task>> CountdownTask::create(const TaskConfig& cfg) {
  std::unique_ptr<CountdownTask> t(new CountdownTask(cfg));
  MESHRL_RETURN_IF_ERROR(t->init_splits());
  return std::unique_ptr<Task>(std::move(t));
}

std::string CountdownTask::name() const {
  const CountdownConfig& c = cfg_.countdown;
  return "countdown(n_numbers=" + std::to_string(c.n_numbers) + ", numbers " + std::to_string(c.number_min) + ".." +
         std::to_string(c.number_max) + ", targets " + std::to_string(c.target_min) + ".." + std::to_string(c.target_max) + ")";
}

// Draws the numbers, then a left-to-right chain over a shuffled subset of at least two of them,
// keeping every intermediate a positive integer; the chain's value is the target.
std::optional<Problem> CountdownTask::draw(Rng& rng) const {
  const CountdownConfig& c = cfg_.countdown;
  std::vector<int64_t> numbers(c.n_numbers);
  for (int64_t& n : numbers) n = rng.uniform_int(c.number_min, c.number_max);
  std::vector<int64_t> order = numbers;
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.uniform_int(0, int64_t(i))]);
  const int64_t k = rng.uniform_int(2, c.n_numbers);

  int64_t acc = order[0];
  std::string expr = std::to_string(acc);
  char top = 0;  // the lowest-precedence operator at the top of expr, for parentheses
  for (int64_t i = 1; i < k; ++i) {
    const int64_t b = order[i];
    std::string ok_ops;
    for (char op : c.operators) {
      if (op == '+' && acc + b <= kMaxIntermediate) ok_ops += op;
      if (op == '-' && acc - b > 0) ok_ops += op;
      if (op == '*' && acc * b <= kMaxIntermediate) ok_ops += op;  // both <= 10^7, no overflow
      if (op == '/' && acc % b == 0) ok_ops += op;
    }
    if (ok_ops.empty()) return std::nullopt;
    const char op = ok_ops[rng.uniform_int(0, int64_t(ok_ops.size()) - 1)];
    if ((op == '*' || op == '/') && (top == '+' || top == '-')) expr = "(" + expr + ")";
    expr += op + std::to_string(b);
    top = op;  // the chain is left-associative, so the new operator is now the top one
    acc = op == '+' ? acc + b : op == '-' ? acc - b : op == '*' ? acc * b : acc / b;
  }
  if (acc < c.target_min || acc > c.target_max) return std::nullopt;

  std::sort(numbers.begin(), numbers.end());
  std::string shown;
  for (int64_t n : numbers) shown += (shown.empty() ? "" : " ") + std::to_string(n);
  shown += " -> " + std::to_string(acc);
  const nlohmann::json payload = {{"numbers", numbers}, {"target", acc}, {"solution", expr}};
  return Problem{"countdown:" + shown, shown + ":", payload.dump()};
}

Result<Score> CountdownTask::score(const Problem& problem, std::string_view completion) const {
  MESHRL_ASSIGN_OR_RETURN(Payload p, parse_payload(problem));
  const AnswerText at = cut_at_stop(completion, {"\n"});
  const ExpressionResult r = check_expression(at.body, p.numbers);
  const double bonus = cfg_.format_reward;
  switch (r.outcome) {
    case ExpressionOutcome::kSyntaxError:
    case ExpressionOutcome::kDivisionByZero:
    case ExpressionOutcome::kOverflow: return make_score(false, false, bonus, r.detail);
    case ExpressionOutcome::kNumberNotGiven: return make_score(false, at.ended_with_stop, bonus, r.detail);
    case ExpressionOutcome::kOk: break;
  }
  const bool correct = r.value == Rational{p.target, 1};
  std::string detail = correct ? "ok" : "reaches " + r.value.to_string() + ", target " + std::to_string(p.target);
  if (!at.ended_with_stop) detail += " (no newline at the end)";
  return make_score(correct, at.ended_with_stop, bonus, detail);
}

std::optional<std::string> CountdownTask::solution(const Problem& problem) const {
  Result<Payload> p = parse_payload(problem);
  if (!p.is_ok() || !p->solution) return std::nullopt;
  return *p->solution + "\n";
}

}  // namespace meshrl::tasks

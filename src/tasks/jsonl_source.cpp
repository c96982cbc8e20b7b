// Loading and splitting a JSON-lines prompt file. See jsonl_source.h.
#include "tasks/jsonl_source.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/file_io.h"
#include "tasks/split.h"

namespace meshrl::tasks {
namespace {

using nlohmann::json;

constexpr uint64_t kSampleSalt = 0x6A73'6F6E'6C00'0003ull;

std::string type_name(const json& v) { return v.is_number_integer() ? "integer" : v.is_number_float() ? "float" : v.type_name(); }

// Parses one line into a record; returns the reason on failure.
std::string parse_line(std::string_view text, const JsonlConfig& c, bool answer_required, JsonlRecord* r) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    std::string what = e.what();
    const size_t p = what.find("] ");
    return "not valid JSON (" + (p == std::string::npos ? what : what.substr(p + 2)) + ")";
  }
  if (!j.is_object()) return "expected a JSON object, got " + type_name(j);
  auto p = j.find(c.prompt_key);
  if (p == j.end()) return "missing key '" + c.prompt_key + "'";
  if (!p->is_string()) return "key '" + c.prompt_key + "' must be a string, got " + type_name(*p);
  r->prompt = p->get<std::string>();
  if (r->prompt.empty()) return "key '" + c.prompt_key + "' is empty";
  auto a = j.find(c.answer_key);
  if (a == j.end()) {
    if (answer_required) return "missing key '" + c.answer_key + "'";
  } else if (a->is_string()) {
    r->answer = a->get<std::string>();
  } else if (a->is_number()) {
    r->answer = a->dump();
  } else if (answer_required) {
    return "key '" + c.answer_key + "' must be a string or a number, got " + type_name(*a);
  } else {
    r->answer = a->dump();  // command tasks pass any JSON answer through, as text
  }
  auto s = j.find(c.solution_key);
  if (s != j.end()) {
    if (!s->is_string()) return "key '" + c.solution_key + "' must be a string, got " + type_name(*s);
    r->solution = s->get<std::string>();
  }
  return "";
}

}  // namespace

Result<JsonlSource> load_jsonl_source(const TaskConfig& cfg, bool answer_required, const RecordCheck& check) {
  const JsonlConfig& c = cfg.jsonl;
  JsonlSource src;
  src.path = c.path;
  Result<std::string> text = read_file(c.path, static_cast<uint64_t>(c.max_file_bytes));
  if (!text.is_ok()) return Status(text.status().code(), "[tasks.jsonl] " + c.path + ": " + text.status().message());

  std::vector<JsonlRecord> good;
  std::string_view rest = *text;
  for (size_t line = 1; !rest.empty(); ++line) {
    const size_t nl = rest.find('\n');
    std::string_view row = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank line

    JsonlRecord r;
    r.line = line;
    std::string why = parse_line(row, c, answer_required, &r);
    if (why.empty() && check) why = check(r);
    if (why.empty()) {
      good.push_back(std::move(r));
      continue;
    }
    const std::string msg = c.path + ":" + std::to_string(line) + ": " + why;
    if (c.on_bad_line == "stop")
      return invalid_argument("[tasks.jsonl] " + msg + " (set jsonl.on_bad_line = \"skip\" to skip bad lines)");
    ++src.n_bad_lines;
    if (src.bad_line_messages.size() < kMaxBadLineMessages) src.bad_line_messages.push_back(msg);
  }
  if (good.size() < 2)
    return invalid_argument("[tasks.jsonl] " + c.path + ": needs at least 2 usable lines (one is held out for eval), found " +
                            std::to_string(good.size()) + (src.n_bad_lines ? ", " + std::to_string(src.n_bad_lines) + " bad lines skipped" : ""));

  std::vector<double> u(good.size());
  for (size_t i = 0; i < good.size(); ++i) u[i] = unit_interval(mix_seed(hash_text(good[i].prompt), cfg.split_seed));
  std::vector<bool> is_eval(good.size());
  size_t n_eval = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    is_eval[i] = u[i] < cfg.eval_fraction;
    n_eval += is_eval[i] ? 1 : 0;
  }
  // Keep both sides non-empty: move the line closest to the boundary across.
  if (n_eval == 0) is_eval[std::min_element(u.begin(), u.end()) - u.begin()] = true;
  if (n_eval == good.size()) is_eval[std::max_element(u.begin(), u.end()) - u.begin()] = false;
  for (size_t i = 0; i < good.size(); ++i) (is_eval[i] ? src.eval : src.train).push_back(std::move(good[i]));
  return src;
}

JsonlBackedTask::JsonlBackedTask(TaskConfig cfg, JsonlSource source) : cfg_(std::move(cfg)), source_(std::move(source)) {
  for (const auto* side : {&source_.train, &source_.eval})
    for (const JsonlRecord& r : *side)
      if (r.solution) solutions_.emplace(to_problem(r).id, *r.solution);
}

Problem JsonlBackedTask::to_problem(const JsonlRecord& r) const {
  return Problem{std::filesystem::path(source_.path).filename().string() + ":" + std::to_string(r.line), r.prompt, r.answer};
}

Problem JsonlBackedTask::sample(uint64_t seed) const {
  Rng rng(mix_seed(seed, kSampleSalt));
  return to_problem(source_.train[rng.uniform_int(0, int64_t(source_.train.size()) - 1)]);
}

Problem JsonlBackedTask::eval_problem(size_t i) const {
  MESHRL_CHECK(i < source_.eval.size(), "[tasks] eval_problem(" << i << ") but n_eval() = " << source_.eval.size());
  return to_problem(source_.eval[i]);
}

std::optional<std::string> JsonlBackedTask::solution(const Problem& problem) const {
  auto it = solutions_.find(problem.id);
  if (it != solutions_.end()) return it->second;
  return synthesize_solution(problem);
}

}  // namespace meshrl::tasks

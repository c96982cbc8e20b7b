// Reading and validating TaskConfig. See task_config.h.
#include "tasks/task_config.h"

#include <cmath>
#include <set>

namespace meshrl::tasks {
namespace {

using nlohmann::json;

std::string type_of(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "float";
  return v.type_name();
}

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Reads the keys of one JSON object into fields, remembering which keys it knew, so that
// finish() can name any unknown key (a typo must not silently keep the default).
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string where, std::string prefix)
      : obj_(obj), where_(std::move(where)), prefix_(std::move(prefix)) {}

  Status str(const char* key, std::string* out) {
    const json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_string()) return wrong(key, "a string", *v);
    *out = v->get<std::string>();
    return Status::ok();
  }
  Status boolean(const char* key, bool* out) {
    const json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_boolean()) return wrong(key, "true or false", *v);
    *out = v->get<bool>();
    return Status::ok();
  }
  Status number(const char* key, double* out) {
    const json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_number()) return wrong(key, "a number", *v);
    *out = v->get<double>();
    return Status::ok();
  }
  Status int64(const char* key, int64_t* out) {
    const json* v = find(key);
    if (!v) return Status::ok();
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)) return wrong(key, "an integer", *v);
    if (!v->is_number_integer()) return wrong(key, "an integer", *v);
    *out = v->get<int64_t>();
    return Status::ok();
  }
  Status int32(const char* key, int* out) {
    int64_t x = *out;
    MESHRL_RETURN_IF_ERROR(int64(key, &x));
    if (x < INT32_MIN || x > INT32_MAX) return wrong(key, "a 32-bit integer", obj_.at(key));
    *out = static_cast<int>(x);
    return Status::ok();
  }
  Status uint64(const char* key, uint64_t* out) {
    const json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_number_unsigned()) return wrong(key, "a non-negative integer", *v);
    *out = v->get<uint64_t>();
    return Status::ok();
  }
  Status str_list(const char* key, std::vector<std::string>* out) {
    const json* v = find(key);
    if (!v) return Status::ok();
    if (!v->is_array()) return wrong(key, "an array of strings", *v);
    std::vector<std::string> r;
    for (const json& e : *v) {
      if (!e.is_string()) return wrong(key, "an array of strings", *v);
      r.push_back(e.get<std::string>());
    }
    *out = std::move(r);
    return Status::ok();
  }
  // Returns the sub-object for `key` (or null when absent), checking it is an object.
  Result<const json*> object(const char* key) {
    const json* v = find(key);
    if (!v) return static_cast<const json*>(nullptr);
    if (!v->is_object()) return wrong(key, "a table/object", *v);
    return v;
  }
  Status finish() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (!known_.count(it.key()))
        return invalid_argument(where_ + ": unknown key '" + prefix_ + it.key() + "'; check the spelling (see src/tasks/task_config.h)");
    }
    return Status::ok();
  }

 private:
  const json* find(const char* key) {
    known_.insert(key);
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  Status wrong(const char* key, const char* expected, const json& got) const {
    return invalid_argument(where_ + ": key '" + prefix_ + key + "' must be " + expected + ", got " + type_of(got) + " " + shown(got));
  }

  const json& obj_;
  std::string where_, prefix_;
  std::set<std::string> known_;
};

Status bad(const std::string& where, const std::string& key, const std::string& msg) {
  return invalid_argument(where + ": key '" + key + "' " + msg);
}

Status check_int(const std::string& where, const char* key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) return bad(where, key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  return Status::ok();
}

Status check_operators(const std::string& where, const char* key, const std::string& ops, const std::string& allowed) {
  if (ops.empty()) return bad(where, key, "must name at least one operator from \"" + allowed + "\"");
  std::set<char> seen;
  for (char c : ops) {
    if (allowed.find(c) == std::string::npos) return bad(where, key, "may only contain \"" + allowed + "\", got \"" + ops + "\"");
    if (!seen.insert(c).second) return bad(where, key, "repeats '" + std::string(1, c) + "' in \"" + ops + "\"");
  }
  return Status::ok();
}

}  // namespace

Status validate_task_config(const TaskConfig& c, const std::string& where) {
  static const std::set<std::string> kinds = {"arithmetic", "countdown", "jsonl", "command"};
  if (!kinds.count(c.kind)) return bad(where, "kind", "must be arithmetic, countdown, jsonl or command, got \"" + c.kind + "\"");
  if (!std::isfinite(c.format_reward) || c.format_reward < 0 || c.format_reward > 1)
    return bad(where, "format_reward", "must be in [0, 1], got " + std::to_string(c.format_reward));
  if (!(c.eval_fraction > 0 && c.eval_fraction < 1)) return bad(where, "eval_fraction", "must be in (0, 1), got " + std::to_string(c.eval_fraction));
  MESHRL_RETURN_IF_ERROR(check_int(where, "n_eval", c.n_eval, 1, 100000));
  if (!std::isfinite(c.max_failure_rate) || c.max_failure_rate < 0 || c.max_failure_rate > 1)
    return bad(where, "max_failure_rate", "must be in [0, 1] (the share of the last failure_window verifier calls that may fail; 0 = none), got " +
                                              std::to_string(c.max_failure_rate));
  MESHRL_RETURN_IF_ERROR(check_int(where, "failure_window", c.failure_window, 1, 1000000));

  if (c.kind == "arithmetic") {
    MESHRL_RETURN_IF_ERROR(check_int(where, "arithmetic.digits", c.arithmetic.digits, 1, 6));
    MESHRL_RETURN_IF_ERROR(check_operators(where, "arithmetic.operators", c.arithmetic.operators, "+-*"));
    const double dc = c.arithmetic.digit_credit;
    if (!std::isfinite(dc) || dc < 0 || dc >= 1)
      return bad(where, "arithmetic.digit_credit", "must be in [0, 1) (a wrong answer must earn less than a right one), got " + std::to_string(dc));
  }
  if (c.kind == "countdown") {
    const CountdownConfig& d = c.countdown;
    MESHRL_RETURN_IF_ERROR(check_int(where, "countdown.n_numbers", d.n_numbers, 2, 8));
    MESHRL_RETURN_IF_ERROR(check_int(where, "countdown.number_min", d.number_min, 1, 10000));
    MESHRL_RETURN_IF_ERROR(check_int(where, "countdown.number_max", d.number_max, d.number_min, 10000));
    MESHRL_RETURN_IF_ERROR(check_int(where, "countdown.target_min", d.target_min, 1, 1000000));
    MESHRL_RETURN_IF_ERROR(check_int(where, "countdown.target_max", d.target_max, d.target_min, 1000000));
    MESHRL_RETURN_IF_ERROR(check_operators(where, "countdown.operators", d.operators, "+-*/"));
  }
  if (c.kind == "jsonl" || c.kind == "command") {
    const JsonlConfig& l = c.jsonl;
    if (l.path.empty()) return bad(where, "jsonl.path", "must name the prompts file (one JSON object per line)");
    if (l.prompt_key.empty()) return bad(where, "jsonl.prompt_key", "must not be empty");
    static const std::set<std::string> rules = {"last_number", "gsm8k", "boxed", "regex"};
    if (!rules.count(l.answer_rule)) return bad(where, "jsonl.answer_rule", "must be last_number, gsm8k, boxed or regex, got \"" + l.answer_rule + "\"");
    if ((l.answer_rule == "regex") != !l.answer_regex.empty())
      return bad(where, "jsonl.answer_regex", "must be set exactly when answer_rule = \"regex\"");
    if (l.compare != "numeric" && l.compare != "exact") return bad(where, "jsonl.compare", "must be numeric or exact, got \"" + l.compare + "\"");
    if (!std::isfinite(l.tolerance) || l.tolerance < 0) return bad(where, "jsonl.tolerance", "must be a finite number >= 0");
    if (l.on_bad_line != "stop" && l.on_bad_line != "skip") return bad(where, "jsonl.on_bad_line", "must be stop or skip, got \"" + l.on_bad_line + "\"");
    MESHRL_RETURN_IF_ERROR(check_int(where, "jsonl.max_file_bytes", l.max_file_bytes, 1, int64_t{1} << 40));
    if (l.stop.size() > 8) return bad(where, "jsonl.stop", "may list at most 8 stop strings");
    for (const std::string& s : l.stop)
      if (s.empty()) return bad(where, "jsonl.stop", "must not contain an empty string");
  }
  if (c.kind == "command") {
    if (c.command.argv.empty() || c.command.argv[0].empty()) return bad(where, "command.argv", "must name the verifier program, e.g. [\"python3\", \"verify.py\"]");
    MESHRL_RETURN_IF_ERROR(check_int(where, "command.timeout_ms", c.command.timeout_ms, 1, 600000));
    MESHRL_RETURN_IF_ERROR(check_int(where, "command.max_output_bytes", c.command.max_output_bytes, 1, int64_t{16} << 20));
    if (c.format_reward != 0) return bad(where, "format_reward", "must be 0 for kind = \"command\": the verifier program owns the whole reward");
  }
  return Status::ok();
}

Result<TaskConfig> task_config_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + ": the task config must be a table/object, got " + type_of(j));
  TaskConfig c;
  ObjectReader top(j, where, "");
  MESHRL_RETURN_IF_ERROR(top.str("kind", &c.kind));
  MESHRL_RETURN_IF_ERROR(top.number("format_reward", &c.format_reward));
  MESHRL_RETURN_IF_ERROR(top.number("eval_fraction", &c.eval_fraction));
  MESHRL_RETURN_IF_ERROR(top.int32("n_eval", &c.n_eval));
  MESHRL_RETURN_IF_ERROR(top.uint64("split_seed", &c.split_seed));
  MESHRL_RETURN_IF_ERROR(top.number("max_failure_rate", &c.max_failure_rate));
  MESHRL_RETURN_IF_ERROR(top.int32("failure_window", &c.failure_window));

  MESHRL_ASSIGN_OR_RETURN(const json* a, top.object("arithmetic"));
  if (a) {
    ObjectReader r(*a, where, "arithmetic.");
    MESHRL_RETURN_IF_ERROR(r.int32("digits", &c.arithmetic.digits));
    MESHRL_RETURN_IF_ERROR(r.str("operators", &c.arithmetic.operators));
    MESHRL_RETURN_IF_ERROR(r.boolean("allow_negative", &c.arithmetic.allow_negative));
    MESHRL_RETURN_IF_ERROR(r.boolean("pad_operands", &c.arithmetic.pad_operands));
    MESHRL_RETURN_IF_ERROR(r.boolean("reverse_answer", &c.arithmetic.reverse_answer));
    MESHRL_RETURN_IF_ERROR(r.number("digit_credit", &c.arithmetic.digit_credit));
    MESHRL_RETURN_IF_ERROR(r.finish());
  }
  MESHRL_ASSIGN_OR_RETURN(const json* d, top.object("countdown"));
  if (d) {
    ObjectReader r(*d, where, "countdown.");
    MESHRL_RETURN_IF_ERROR(r.int32("n_numbers", &c.countdown.n_numbers));
    MESHRL_RETURN_IF_ERROR(r.int32("number_min", &c.countdown.number_min));
    MESHRL_RETURN_IF_ERROR(r.int32("number_max", &c.countdown.number_max));
    MESHRL_RETURN_IF_ERROR(r.int32("target_min", &c.countdown.target_min));
    MESHRL_RETURN_IF_ERROR(r.int32("target_max", &c.countdown.target_max));
    MESHRL_RETURN_IF_ERROR(r.str("operators", &c.countdown.operators));
    MESHRL_RETURN_IF_ERROR(r.finish());
  }
  MESHRL_ASSIGN_OR_RETURN(const json* l, top.object("jsonl"));
  if (l) {
    ObjectReader r(*l, where, "jsonl.");
    MESHRL_RETURN_IF_ERROR(r.str("path", &c.jsonl.path));
    MESHRL_RETURN_IF_ERROR(r.str("prompt_key", &c.jsonl.prompt_key));
    MESHRL_RETURN_IF_ERROR(r.str("answer_key", &c.jsonl.answer_key));
    MESHRL_RETURN_IF_ERROR(r.str("solution_key", &c.jsonl.solution_key));
    MESHRL_RETURN_IF_ERROR(r.str("answer_rule", &c.jsonl.answer_rule));
    MESHRL_RETURN_IF_ERROR(r.str("answer_regex", &c.jsonl.answer_regex));
    MESHRL_RETURN_IF_ERROR(r.str("compare", &c.jsonl.compare));
    MESHRL_RETURN_IF_ERROR(r.number("tolerance", &c.jsonl.tolerance));
    MESHRL_RETURN_IF_ERROR(r.str("on_bad_line", &c.jsonl.on_bad_line));
    MESHRL_RETURN_IF_ERROR(r.int64("max_file_bytes", &c.jsonl.max_file_bytes));
    MESHRL_RETURN_IF_ERROR(r.str_list("stop", &c.jsonl.stop));
    MESHRL_RETURN_IF_ERROR(r.finish());
  }
  MESHRL_ASSIGN_OR_RETURN(const json* m, top.object("command"));
  if (m) {
    ObjectReader r(*m, where, "command.");
    MESHRL_RETURN_IF_ERROR(r.str_list("argv", &c.command.argv));
    MESHRL_RETURN_IF_ERROR(r.int32("timeout_ms", &c.command.timeout_ms));
    MESHRL_RETURN_IF_ERROR(r.int64("max_output_bytes", &c.command.max_output_bytes));
    MESHRL_RETURN_IF_ERROR(r.finish());
  }
  MESHRL_RETURN_IF_ERROR(top.finish());
  MESHRL_RETURN_IF_ERROR(validate_task_config(c, where));
  return c;
}

Result<TaskConfig> task_config_from_pairs(const std::vector<std::pair<std::string, json>>& pairs, const std::string& where) {
  json j = json::object();
  for (const auto& [key, value] : pairs) {
    // Only one level of nesting exists ("section.key"); deeper keys are unknown by construction.
    const size_t dot = key.find('.');
    if (dot == std::string::npos) {
      j[key] = value;
      continue;
    }
    const std::string section = key.substr(0, dot), rest = key.substr(dot + 1);
    if (section.empty() || rest.empty() || rest.find('.') != std::string::npos)
      return invalid_argument(where + ": unknown key '" + key + "'; check the spelling (see src/tasks/task_config.h)");
    if (j.contains(section) && !j[section].is_object())
      return invalid_argument(where + ": key '" + section + "' is given both as a value and as a section");
    j[section][rest] = value;
  }
  return task_config_from_json(j, where);
}

json task_config_to_json(const TaskConfig& c) {
  return json{
      {"kind", c.kind},
      {"format_reward", c.format_reward},
      {"eval_fraction", c.eval_fraction},
      {"n_eval", c.n_eval},
      {"split_seed", c.split_seed},
      {"max_failure_rate", c.max_failure_rate},
      {"failure_window", c.failure_window},
      {"arithmetic", {{"digits", c.arithmetic.digits}, {"operators", c.arithmetic.operators}, {"allow_negative", c.arithmetic.allow_negative},
                      {"pad_operands", c.arithmetic.pad_operands},
                      {"reverse_answer", c.arithmetic.reverse_answer},
                      {"digit_credit", c.arithmetic.digit_credit}}},
      {"countdown",
       {{"n_numbers", c.countdown.n_numbers},
        {"number_min", c.countdown.number_min},
        {"number_max", c.countdown.number_max},
        {"target_min", c.countdown.target_min},
        {"target_max", c.countdown.target_max},
        {"operators", c.countdown.operators}}},
      {"jsonl",
       {{"path", c.jsonl.path},
        {"prompt_key", c.jsonl.prompt_key},
        {"answer_key", c.jsonl.answer_key},
        {"solution_key", c.jsonl.solution_key},
        {"answer_rule", c.jsonl.answer_rule},
        {"answer_regex", c.jsonl.answer_regex},
        {"compare", c.jsonl.compare},
        {"tolerance", c.jsonl.tolerance},
        {"on_bad_line", c.jsonl.on_bad_line},
        {"max_file_bytes", c.jsonl.max_file_bytes},
        {"stop", c.jsonl.stop}}},
      {"command", {{"argv", c.command.argv}, {"timeout_ms", c.command.timeout_ms}, {"max_output_bytes", c.command.max_output_bytes}}},
  };
}

}  // namespace meshrl::tasks

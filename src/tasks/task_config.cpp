// The [task] field table, its checks, and the JSON form. See task_config.h.
#include "tasks/task_config.h"

#include <cmath>
#include <set>
#include <variant>

#include "core/toml_document.h"

namespace meshrl::tasks {
namespace {

using nlohmann::json;
using config::Field;

std::string type_of(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "float";
  return v.type_name();
}

// A JSON value as the TOML value a run file would hold, so that the JSON form is read by the same
// field table as a run file. `key` is the dotted path, for messages.
using TomlValue = std::variant<bool, std::string, int64_t, double, toml::array, toml::table>;

Result<TomlValue> toml_value_of(const json& v, const std::string& key, const config::Scope& scope) {
  if (v.is_object()) {
    toml::table t;
    for (auto it = v.begin(); it != v.end(); ++it) {
      MESHRL_ASSIGN_OR_RETURN(TomlValue x, toml_value_of(it.value(), key.empty() ? it.key() : key + "." + it.key(), scope));
      std::visit([&](auto&& y) { t.insert(it.key(), std::move(y)); }, std::move(x));
    }
    return TomlValue(std::move(t));
  }
  if (v.is_array()) {
    toml::array a;
    for (const json& e : v) {
      MESHRL_ASSIGN_OR_RETURN(TomlValue x, toml_value_of(e, key, scope));
      std::visit([&](auto&& y) { a.push_back(std::move(y)); }, std::move(x));
    }
    return TomlValue(std::move(a));
  }
  if (v.is_boolean()) return TomlValue(v.get<bool>());
  if (v.is_string()) return TomlValue(v.get<std::string>());
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    return invalid_argument(scope.name(key) + " must be an integer below 2^63, got " + v.dump());
  if (v.is_number_integer()) return TomlValue(v.get<int64_t>());
  if (v.is_number_float()) return TomlValue(v.get<double>());
  return invalid_argument(scope.name(key) + " has a " + type_of(v) + " value, which no task key takes");
}

Status check_operators(const config::Scope& scope, const char* key, const std::string& ops, const std::string& allowed) {
  if (ops.empty()) return invalid_argument(scope.name(key) + " must name at least one operator from \"" + allowed + "\"");
  std::set<char> seen;
  for (char c : ops) {
    if (allowed.find(c) == std::string::npos)
      return invalid_argument(scope.name(key) + " may only contain \"" + allowed + "\", got \"" + config::clip_text(ops) + "\"");
    if (!seen.insert(c).second) return invalid_argument(scope.name(key) + " repeats '" + std::string(1, c) + "' in \"" + config::clip_text(ops) + "\"");
  }
  return Status::ok();
}

}  // namespace

config::Section task_section(TaskConfig& c) {
  using config::at_least;
  using config::closed;
  using config::closed_open;
  using config::open;
  const TaskConfig* k = &c;
  auto kind_is = [k](const char* kind) { return [k, kind] { return k->kind == kind; }; };
  auto reads_jsonl = [k] { return k->kind == "jsonl" || k->kind == "command"; };
  ArithmeticConfig& a = c.arithmetic;
  CountdownConfig& d = c.countdown;
  JsonlConfig& l = c.jsonl;
  CommandConfig& m = c.command;
  return {
      "task",
      {
          Field("kind", &c.kind, "which task").values({"arithmetic", "countdown", "jsonl", "command"}),
          Field("format_reward", &c.format_reward, "bonus for a well-formed completion").in(closed(0, 1)),
          Field("eval_fraction", &c.eval_fraction, "share of the problem space held out for eval").in(open(0, 1)),
          Field("n_eval", &c.n_eval, "generated tasks: size of the eval set").in(closed(1, 100000)),
          Field("split_seed", &c.split_seed, "moves the train/eval boundary"),
          Field("max_failure_rate", &c.max_failure_rate, "share of the last failure_window verifier calls that may fail")
              .in(closed(0, 1).with_note("(the share of the last failure_window verifier calls that may fail; 0 = none)")),
          Field("failure_window", &c.failure_window, "verifier calls the failure rate is over").in(closed(1, 1000000)),
          Field("arithmetic.digits", &a.digits, "operands are uniform in [0, 10^digits - 1]").in(closed(1, 6)).when(kind_is("arithmetic")),
          Field("arithmetic.operators", &a.operators, "non-empty subset of \"+-*\""),
          Field("arithmetic.allow_negative", &a.allow_negative, "false: operands of '-' swapped so the result is >= 0"),
          Field("arithmetic.pad_operands", &a.pad_operands, "operands zero-padded to `digits`"),
          Field("arithmetic.reverse_answer", &a.reverse_answer, "answer written least-significant digit first"),
          Field("arithmetic.digit_credit", &a.digit_credit, "a wrong answer earns this x the share of matching digits")
              .in(closed_open(0, 1).with_note("(a wrong answer must earn less than a right one)"))
              .when(kind_is("arithmetic")),
          Field("countdown.n_numbers", &d.n_numbers, "numbers given per problem").in(closed(2, 8)).when(kind_is("countdown")),
          Field("countdown.number_min", &d.number_min, "smallest given number").in(closed(1, 10000)).when(kind_is("countdown")),
          Field("countdown.number_max", &d.number_max, "largest given number, in [number_min, 10000]"),
          Field("countdown.target_min", &d.target_min, "smallest target").in(closed(1, 1000000)).when(kind_is("countdown")),
          Field("countdown.target_max", &d.target_max, "largest target, in [target_min, 1000000]"),
          Field("countdown.operators", &d.operators, "operators the generator may use, from \"+-*/\""),
          Field("jsonl.path", &l.path, "the prompts file, one JSON object per line (node-local on a mesh)"),
          Field("jsonl.prompt_key", &l.prompt_key, "key of the prompt in each line"),
          Field("jsonl.answer_key", &l.answer_key, "key of the reference answer"),
          Field("jsonl.solution_key", &l.solution_key, "key of a worked completion for SFT"),
          Field("jsonl.answer_rule", &l.answer_rule, "how the answer is read from a completion")
              .values({"last_number", "gsm8k", "boxed", "regex"})
              .when(reads_jsonl),
          Field("jsonl.answer_regex", &l.answer_regex, "PCRE2 pattern for answer_rule = \"regex\""),
          Field("jsonl.compare", &l.compare, "numeric (with tolerance) or exact").values({"numeric", "exact"}).when(reads_jsonl),
          Field("jsonl.tolerance", &l.tolerance, "|got - want| <= tolerance * max(1, |want|)").in(at_least(0)).when(reads_jsonl),
          Field("jsonl.on_bad_line", &l.on_bad_line, "stop at the first bad line, or skip it").values({"stop", "skip"}).when(reads_jsonl),
          Field("jsonl.max_file_bytes", &l.max_file_bytes, "size cap of the prompts file").in(closed(1, double(int64_t{1} << 40))).when(reads_jsonl),
          Field("jsonl.stop", &l.stop, "stop strings for generation (at most 8)"),
          Field("command.argv", &m.argv, "the verifier program and its arguments (node-local on a mesh)"),
          Field("command.timeout_ms", &m.timeout_ms, "wall clock per verifier call").in(closed(1, 600000)).when(kind_is("command")),
          Field("command.max_output_bytes", &m.max_output_bytes, "verifier stdout cap").in(closed(1, double(int64_t{16} << 20))).when(kind_is("command")),
      },
      "; check the spelling (see src/tasks/task_config.h)",
  };
}

Status validate_task_config(const TaskConfig& cfg, const config::Scope& scope) {
  TaskConfig c = cfg;  // the table needs mutable pointers; checking a copy keeps `config` const
  MESHRL_RETURN_IF_ERROR(config::check_fields(task_section(c), scope));
  auto bad = [&](const char* key, const std::string& msg) { return invalid_argument(scope.name(key) + " " + msg); };
  // The relations between keys, and what a range cannot say.
  if (c.kind == "arithmetic") MESHRL_RETURN_IF_ERROR(check_operators(scope, "arithmetic.operators", c.arithmetic.operators, "+-*"));
  if (c.kind == "countdown") {
    CountdownConfig& d = c.countdown;
    MESHRL_RETURN_IF_ERROR(config::check_field(Field("countdown.number_max", &d.number_max).in(config::closed(d.number_min, 10000)), scope));
    MESHRL_RETURN_IF_ERROR(config::check_field(Field("countdown.target_max", &d.target_max).in(config::closed(d.target_min, 1000000)), scope));
    MESHRL_RETURN_IF_ERROR(check_operators(scope, "countdown.operators", d.operators, "+-*/"));
  }
  if (c.kind == "jsonl" || c.kind == "command") {
    const JsonlConfig& l = c.jsonl;
    if (l.path.empty()) return bad("jsonl.path", "must name the prompts file (one JSON object per line)");
    if (l.prompt_key.empty()) return bad("jsonl.prompt_key", "must not be empty");
    if ((l.answer_rule == "regex") != !l.answer_regex.empty()) return bad("jsonl.answer_regex", "must be set exactly when answer_rule = \"regex\"");
    if (l.stop.size() > 8) return bad("jsonl.stop", "may list at most 8 stop strings");
    for (const std::string& s : l.stop)
      if (s.empty()) return bad("jsonl.stop", "must not contain an empty string");
  }
  if (c.kind == "command") {
    if (c.command.argv.empty() || c.command.argv[0].empty())
      return bad("command.argv", "must name the verifier program, e.g. [\"python3\", \"verify.py\"]");
    if (c.format_reward != 0) return bad("format_reward", "must be 0 for kind = \"command\": the verifier program owns the whole reward");
  }
  return Status::ok();
}

Status validate_task_config(const TaskConfig& c, const std::string& where) { return validate_task_config(c, config::Scope{where, ""}); }

Result<TaskConfig> task_config_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + ": the task config must be a table/object, got " + type_of(j));
  const config::Scope scope{where, ""};
  MESHRL_ASSIGN_OR_RETURN(TomlValue root, toml_value_of(j, "", scope));
  const toml::table& t = std::get<toml::table>(root);
  TaskConfig c;
  config::Section s = task_section(c);
  MESHRL_RETURN_IF_ERROR(config::read_section(t, s, scope));
  MESHRL_RETURN_IF_ERROR(validate_task_config(c, scope));
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

json task_config_to_json(const TaskConfig& cfg) {
  TaskConfig c = cfg;
  return config::to_json(task_section(c));
}

}  // namespace meshrl::tasks

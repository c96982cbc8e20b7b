// TaskConfig: everything that selects and shapes a task, with defaults in the struct, and its
// field table (the [task] keys, core/config_fields.h), which a run file, command-line overrides
// and the JSON form below are all read through, and the effective config written from. Knows
// nothing about run files or the CLI beyond its own keys.
//
// JSON shape (every key optional; unknown keys and wrong types are errors naming the key):
//   {"kind": "countdown", "format_reward": 0.1, "eval_fraction": 0.1, "n_eval": 500, "split_seed": 0,
//    "max_failure_rate": 0.1, "failure_window": 100,
//    "arithmetic": {"digits": 2, "operators": "+-", "allow_negative": true},
//    "countdown":  {"n_numbers": 4, "number_min": 1, "number_max": 50, "target_min": 1,
//                   "target_max": 100, "operators": "+-*/"},
//    "jsonl":      {"path": "data.jsonl", "prompt_key": "prompt", "answer_key": "answer",
//                   "solution_key": "solution", "answer_rule": "last_number", "answer_regex": "",
//                   "compare": "numeric", "tolerance": 1e-6, "on_bad_line": "stop",
//                   "max_file_bytes": 1073741824, "stop": ["\n"]},
//    "command":    {"argv": ["python3", "verify.py"], "timeout_ms": 5000, "max_output_bytes": 65536}}
// The same as flat pairs: {"kind", "countdown"}, {"countdown.n_numbers", 4}, ...; in a run file
// the [task] table, its sub-tables as dotted keys (arithmetic.digits).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config_fields.h"
#include "core/status.h"

namespace meshrl::tasks {

// kind = "arithmetic": prompt "37+45=", completion "82\n".
struct ArithmeticConfig {
  int digits = 2;                 // operands are uniform in [0, 10^digits - 1]; 1..6
  std::string operators = "+-";   // non-empty subset of "+-*"
  bool allow_negative = true;     // false: for '-', operands are swapped so the result is >= 0
  bool pad_operands = false;      // true: operands zero-padded to `digits` ("07+45="), so every digit
                                  // sits at a fixed position; small models learn this far faster
  bool reverse_answer = false;    // true: the answer is written least-significant digit first
                                  // ("37+45=" -> "28\n" for 82), the order in which carries are
                                  // computed (Lee et al. 2023, "Teaching Arithmetic to Small
                                  // Transformers"); the verifier reverses it back before comparing
  double digit_credit = 0;        // in [0, 1): a wrong answer earns digit_credit x the share of its
                                  // digits that match the reference (aligned at the units digit,
                                  // over the longer of the two), a denser signal than right/wrong;
                                  // Score.correct and pass@1 stay exact
};

// kind = "countdown": prompt "3 7 25 50 -> 72:", completion "50+25-3\n".
struct CountdownConfig {
  int n_numbers = 4;               // numbers given per problem, 2..8
  int number_min = 1;              // each given number is uniform in [number_min, number_max], 1..10000
  int number_max = 50;
  int target_min = 1;              // targets outside [target_min, target_max] are redrawn, 1..1000000
  int target_max = 100;
  std::string operators = "+-*/";  // operators the generator may use (the verifier accepts all four)
};

// kind = "jsonl" (and the prompt source of kind = "command"): one JSON object per line.
struct JsonlConfig {
  std::string path;
  std::string prompt_key = "prompt";
  std::string answer_key = "answer";      // string or number; optional for kind = "command"
  std::string solution_key = "solution";  // optional per line: a worked completion for SFT
  std::string answer_rule = "last_number";  // last_number | gsm8k | boxed | regex
  std::string answer_regex;                 // PCRE2 pattern for answer_rule = "regex"; group 1 if any
  std::string compare = "numeric";          // numeric (with tolerance) | exact (trimmed strings)
  double tolerance = 1e-6;                  // |got - want| <= tolerance * max(1, |want|)
  std::string on_bad_line = "stop";         // stop: loading fails at the first bad line; skip: count it
  int64_t max_file_bytes = int64_t{1} << 30;
  std::vector<std::string> stop = {"\n"};   // stop strings for generation
};

// kind = "command": an external verifier, one process per score() call (see command_task.h).
struct CommandConfig {
  std::vector<std::string> argv;     // argv[0] is looked up on PATH when it has no '/'
  int timeout_ms = 5000;             // wall clock per call, 1..600000
  int64_t max_output_bytes = 65536;  // stdout cap, 1..16 MiB
};

struct TaskConfig {
  std::string kind = "arithmetic";  // arithmetic | countdown | jsonl | command
  double format_reward = 0.0;       // bonus for a well-formed completion, 0..1 (see task.h)
  double eval_fraction = 0.1;       // share of the problem space held out for eval, (0, 1)
  int n_eval = 500;                 // generated tasks: size of the eval set, 1..100000
  uint64_t split_seed = 0;          // moves the train/eval boundary
  // An external verifier may fail on a few completions (each costs that sample, task.h); scoring
  // stops with an error once more than max_failure_rate * failure_window of the last
  // failure_window calls failed (verifier_failures.h). 0 = stop at the first failure.
  double max_failure_rate = 0.1;    // in [0, 1]
  int failure_window = 100;         // calls, 1..1000000
  ArithmeticConfig arithmetic;
  CountdownConfig countdown;
  JsonlConfig jsonl;
  CommandConfig command;
};

// The [task] keys as a field table: each kind's keys under its name ("arithmetic.digits"), their
// ranges checked only while `kind` selects that kind (a config may carry sections it does not use).
config::Section task_section(TaskConfig& cfg);

// Checks ranges, enumerations and the relations between keys; `scope` names the keys in messages
// ("run.toml: [task] n_eval must be in [1, 100000], got 0"). The string form names them
// "<where>: n_eval" (e.g. where = "run.toml [task]").
Status validate_task_config(const TaskConfig& cfg, const config::Scope& scope);
Status validate_task_config(const TaskConfig& cfg, const std::string& where);

// Reads the JSON shape above, then validates. Missing keys keep their defaults.
Result<TaskConfig> task_config_from_json(const nlohmann::json& j, const std::string& where);

// Flat dotted pairs ("countdown.n_numbers" -> 4) as a TOML table flattens to; later pairs win.
Result<TaskConfig> task_config_from_pairs(const std::vector<std::pair<std::string, nlohmann::json>>& pairs,
                                          const std::string& where);

// The effective config, every key present, for the run directory; task_config_from_json reads it back.
nlohmann::json task_config_to_json(const TaskConfig& cfg);

}  // namespace meshrl::tasks

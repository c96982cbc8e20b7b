// `meshrl eval --model DIR --task arithmetic [--task.key=value ...] [--problems P] [--k K] [--n N]
//  [--max-new-tokens T] [--temperature X] [--seed S] [--json]`
// Held-out pass@1 (greedy) and, with --k > 1, pass@k estimated without bias from N samples.
// An external verifier takes its argv as a JSON array:
//   meshrl eval --model DIR --task command --task.jsonl.path=prompts.jsonl \
//     --task.command.argv='["python3", "verify.py"]'
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/output_options.h"
#include "cli/progress.h"
#include "rl/evaluate.h"
#include "rl/run_config.h"

namespace meshrl::cli {

namespace {
struct EvalArgs {
  ModelOptions model;
  std::string task = "arithmetic";
  int64_t problems = 0;
  int64_t k = 1;
  int64_t n = 0;
  int64_t max_new_tokens = 16;
  double temperature = 1.0;
  uint64_t seed = 0;
  int64_t batch_size = 256;
  OutputOptions output;
};

void run_eval(const EvalArgs& a, const std::vector<std::string>& extras) {
  apply_output_options(a.output, "eval");
  // The task is built by the same code as a run file's [task] section.
  auto task = tasks::make_task(rl::task_config_from_args(a.task, extras).value()).value();
  if (a.k > 1 && a.n != 0 && a.n < a.k)
    throw StatusError(invalid_argument("[eval] --n " + std::to_string(a.n) + " must be >= --k " + std::to_string(a.k)));

  auto policy = load_policy_or_throw(a.model);
  rl::EvalOptions o;
  o.n_problems = a.problems > 0 ? a.problems : static_cast<int64_t>(task->n_eval());
  o.pass_k = a.k;
  o.n_samples = a.n;
  o.temperature = a.temperature;
  o.max_new_tokens = a.max_new_tokens;
  o.batch_size = a.batch_size;
  o.seed = a.seed;
  o.stop_ids = policy.stop_ids;
  Progress bar("eval", eval_progress_options());
  o.on_progress = [&](int64_t done, int64_t total) { bar.update(done, total); };
  const auto r = rl::evaluate(*policy.model, *policy.tokenizer, *task, o).value();
  bar.finish();
  Terminal& term = Terminal::get();
  auto j = rl::eval_result_to_json(r);
  j["model"] = a.model.model;
  j["task"] = task->name();
  term.json_result(j.dump());
  char line[512];
  std::snprintf(line, sizeof line, "%s on %s: %lld held-out problems", a.model.model.c_str(), task->name().c_str(),
                static_cast<long long>(r.n_problems));
  term.result(line);
  std::snprintf(line, sizeof line, "pass@1 (greedy)  %.1f%%   (well-formed %.1f%%)", 100 * r.pass_at_1, 100 * r.format_rate);
  term.result(line);
  if (const auto& f = r.verifier_failures; f.total() > 0) {
    std::snprintf(line, sizeof line, "verifier failed on %lld completions (timeout %lld, crash %lld, garbage %lld), counted as wrong",
                  static_cast<long long>(f.total()), static_cast<long long>(f.timeout), static_cast<long long>(f.crash),
                  static_cast<long long>(f.garbage));
    term.result(line);
  }
  if (r.n_samples > 0) {
    std::snprintf(line, sizeof line, "pass@%lld          %.1f%%   (from %lld samples per problem at temperature %.2g; sampled pass@1 %.1f%%)",
                  static_cast<long long>(r.k), 100 * r.pass_at_k, static_cast<long long>(r.n_samples), a.temperature,
                  100 * r.sampled_pass_at_1);
    term.result(line);
  }
}
}  // namespace

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", "held-out pass@1 (greedy) and pass@k (sampled) of a model on a task");
  add_model_options(cmd, a->model);
  cmd->add_option("--task", a->task, "arithmetic | countdown | jsonl | command; settings as --task.key=value")->capture_default_str();
  cmd->add_option("--problems", a->problems, "held-out problems to use (0 = the whole eval split)")->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  cmd->add_option("--k", a->k, "k of pass@k (1 = greedy pass@1 only)")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--n", a->n, "samples per problem for pass@k (0 = 2k)")->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{4096}));
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "completion budget")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{65536}));
  cmd->add_option("--temperature", a->temperature, "sampling temperature for pass@k")->capture_default_str()->check(CLI::Range(1e-6, 100.0));
  cmd->add_option("--seed", a->seed, "sampling seed")->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "rows per generation batch")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{65536}));
  add_output_options(cmd, a->output);
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_eval(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

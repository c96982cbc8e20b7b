// `meshrl train --config run.toml [--run-dir DIR] [--section.key=value ...]`
// A single-node run: SFT warm start (cached), eval before, GRPO steps with a progress bar,
// metrics.jsonl, checkpoints, eval after, summary.json. The recipe is rl::run_training.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_options.h"
#include "cli/progress.h"
#include "rl/run_config.h"
#include "rl/train_run.h"

namespace meshrl::cli {

namespace {
struct TrainArgs {
  std::string config;
  std::string run_dir;
  OutputOptions output;
};

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

void run_train(const TrainArgs& a, const std::vector<std::string>& overrides) {
  apply_output_options(a.output, "train");
  Terminal& term = Terminal::get();
  const rl::RunConfig config = rl::load_run_config(a.config, overrides).value();
  const std::string run_dir = a.run_dir.empty() ? default_run_dir() : a.run_dir;
  term.info("run dir " + run_dir);

  Progress sft_bar("sft");
  Progress bar("train");
  Progress eval_bar("eval", eval_progress_options());
  rl::TrainRunCallbacks cb;
  cb.log = [&](const std::string& s) { term.log(guess_level(s), s); };
  cb.on_sft_step = [&](const rl::SftProgress& p) {
    if (!sft_bar.is_tty() && p.step % config.sft.log_every != 0 && p.step != p.steps && p.check_pass1 < 0) return;
    sft_bar.update(p.step, p.steps, rl::describe(p));
  };
  cb.on_eval_progress = [&](int64_t done, int64_t total) { eval_bar.update(done, total); };
  cb.on_step = [&](const rl::StepMetrics& m) {
    std::string s = "reward " + fmt("%.3f", m.reward_mean) + " kept " + std::to_string(m.train.groups_kept) + "/" +
                    std::to_string(m.groups_total) + " kl " + fmt("%.4f", m.train.kl) + " ent " + fmt("%.2f", m.train.entropy) +
                    " " + fmt("%.0f tok/s", m.tokens_per_s);
    if (m.pass_at_1) s += " pass@1 " + fmt("%.1f%%", 100 * *m.pass_at_1);
    // A few failed verifier calls are masked and the run goes on; say so, as they cost samples.
    if (const auto& f = m.verifier_failures; f.total() > 0)
      s += " verifier failed " + std::to_string(f.total()) + " (timeout " + std::to_string(f.timeout) + ", crash " +
           std::to_string(f.crash) + ", garbage " + std::to_string(f.garbage) + ")";
    bar.update(m.step, config.grpo.steps, s);
  };
  const auto sum = rl::run_training(config, run_dir, cb).value();
  bar.finish();
  char line[512];
  std::snprintf(line, sizeof line, "pass@1 %.1f%% -> %.1f%% (%+.1f points) after %lld steps, %lld samples, %.0f s; summary: %s/summary.json",
                100 * sum.pass_at_1_before, 100 * sum.pass_at_1_after, 100 * (sum.pass_at_1_after - sum.pass_at_1_before),
                static_cast<long long>(sum.steps), static_cast<long long>(sum.samples), sum.wall_seconds, run_dir.c_str());
  term.result(line);
  nlohmann::json j = sum.json;
  j["run_dir"] = run_dir;
  term.json_result(j.dump());
}
}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "single-node GRPO run from a TOML run file (--section.key=value overrides)");
  cmd->add_option("--config", a->config, "TOML run file (see configs/README.md)")->required();
  cmd->add_option("--run-dir", a->run_dir, "run directory (default runs/<timestamp>)");
  add_output_options(cmd, a->output);
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_train(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

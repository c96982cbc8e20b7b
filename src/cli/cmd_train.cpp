// `meshrl train --config run.toml [--run-dir DIR] [--section.key=value ...]`
// A single-node run: SFT warm start (cached), eval before, GRPO steps with a progress bar,
// metrics.jsonl, checkpoints, eval after, summary.json. The recipe is rl::run_training.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "rl/run_config.h"
#include "rl/train_run.h"

namespace meshrl::cli {

namespace {
struct TrainArgs {
  std::string config;
  std::string run_dir;
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
  const rl::RunConfig config = rl::load_run_config(a.config, overrides).value();
  const std::string run_dir = a.run_dir.empty() ? default_run_dir() : a.run_dir;
  std::printf("meshrl train: run dir %s\n", run_dir.c_str());
  std::fflush(stdout);

  Progress bar;
  const auto t0 = std::chrono::steady_clock::now();
  rl::TrainRunCallbacks cb;
  cb.log = [&](const std::string& s) { bar.line(s); };
  cb.on_sft_step = [&](const rl::SftProgress& p) {
    if (!bar.is_tty() && p.step % config.sft.log_every != 0 && p.step != p.steps) return;
    bar.update(p.step, p.steps, "sft loss " + fmt("%.3f", p.loss) + " lr " + fmt("%.2g", p.lr) + " " + fmt("%.0f s", p.seconds));
    if (p.step == p.steps) bar.finish();
  };
  cb.on_step = [&](const rl::StepMetrics& m) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string s = "reward " + fmt("%.3f", m.reward_mean) + " kept " + std::to_string(m.train.groups_kept) + "/" +
                    std::to_string(m.groups_total) + " kl " + fmt("%.4f", m.train.kl) + " ent " + fmt("%.2f", m.train.entropy) +
                    " " + fmt("%.0f tok/s", m.tokens_per_s) + " " + fmt("%.0f s", elapsed);
    if (m.pass_at_1) s += " pass@1 " + fmt("%.1f%%", 100 * *m.pass_at_1);
    bar.update(m.step, config.grpo.steps, s);
    if (m.step == config.grpo.steps) bar.finish();
  };
  const auto sum = rl::run_training(config, run_dir, cb).value();
  bar.finish();
  std::printf("pass@1 %.1f%% -> %.1f%% (%+.1f points) after %lld steps, %lld samples, %.0f s; summary: %s/summary.json\n",
              100 * sum.pass_at_1_before, 100 * sum.pass_at_1_after, 100 * (sum.pass_at_1_after - sum.pass_at_1_before),
              static_cast<long long>(sum.steps), static_cast<long long>(sum.samples), sum.wall_seconds, run_dir.c_str());
}
}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "single-node GRPO run from a TOML run file (--section.key=value overrides)");
  cmd->add_option("--config", a->config, "TOML run file (see configs/README.md)")->required();
  cmd->add_option("--run-dir", a->run_dir, "run directory (default runs/<timestamp>)");
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_train(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

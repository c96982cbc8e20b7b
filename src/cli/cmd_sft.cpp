// `meshrl sft --config run.toml --out DIR [--section.key=value ...]`
// Trains [model] init on the [task]'s worked solutions for [sft] steps and writes a Hugging Face
// folder (config.json, model.safetensors, tokenizer files, meshrl_sft.json).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "rl/run_config.h"
#include "rl/warm_start.h"

namespace meshrl::cli {

namespace {
struct SftArgs {
  std::string config;
  std::string out;
};

void run_sft_command(const SftArgs& a, const std::vector<std::string>& overrides) {
  const rl::RunConfig config = rl::load_run_config(a.config, overrides).value();
  Progress bar;
  auto on_step = [&](const rl::SftProgress& p) {
    if (!bar.is_tty() && p.step % config.sft.log_every != 0 && p.step != p.steps) return;
    char s[128];
    std::snprintf(s, sizeof s, "loss %.4f lr %.2g %.0f s", p.loss, p.lr, p.seconds);
    bar.update(p.step, p.steps, s);
  };
  const auto r = rl::sft_to_folder(config, a.out, on_step).value();
  bar.finish();
  std::printf("sft: loss %.4f -> %.4f in %lld steps (%.0f s, %lld solution tokens); wrote %s\n", r.first_loss, r.final_loss,
              static_cast<long long>(config.sft.steps), r.seconds, static_cast<long long>(r.tokens), a.out.c_str());
}
}  // namespace

void add_sft_command(CLI::App& app) {
  auto a = std::make_shared<SftArgs>();
  auto* cmd = app.add_subcommand("sft", "supervised warm start on a task's solutions; writes a Hugging Face folder");
  cmd->add_option("--config", a->config, "TOML run file (its [model], [task] and [sft] sections)")->required();
  cmd->add_option("--out", a->out, "output folder")->required();
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_sft_command(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

// `meshrl sft --config run.toml --out DIR [--section.key=value ...]`
// Trains [model] init on the [task]'s worked solutions for [sft] steps and writes a Hugging Face
// folder (config.json, model.safetensors, tokenizer files, meshrl_sft.json).
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_options.h"
#include "cli/progress.h"
#include "rl/run_config.h"
#include "rl/warm_start.h"

namespace meshrl::cli {

namespace {
struct SftArgs {
  std::string config;
  std::string out;
  OutputOptions output;
};

void run_sft_command(const SftArgs& a, const std::vector<std::string>& overrides) {
  apply_output_options(a.output, "sft");
  const rl::RunConfig config = rl::load_run_config(a.config, overrides).value();
  Progress bar("sft");
  auto on_step = [&](const rl::SftProgress& p) {
    if (!bar.is_tty() && p.step % config.sft.log_every != 0 && p.step != p.steps && p.check_pass1 < 0) return;
    bar.update(p.step, p.steps, rl::describe(p));
  };
  bar.start();
  const auto r = rl::sft_to_folder(config, a.out, on_step).value();
  bar.finish();
  const auto steps = static_cast<int64_t>(r.losses.size());
  Terminal::get().result("sft: " + rl::summarize(r) + " (" + std::to_string(r.tokens) + " solution tokens); wrote " + a.out);
  nlohmann::json j = {{"first_loss", r.first_loss}, {"final_loss", r.final_loss}, {"steps", steps},
                      {"seconds", r.seconds},       {"tokens", r.tokens},         {"out", a.out}};
  if (config.sft.stop_at_pass1 > 0) j["reached_target"] = r.reached_target;
  Terminal::get().json_result(j.dump());
}
}  // namespace

void add_sft_command(CLI::App& app) {
  auto a = std::make_shared<SftArgs>();
  auto* cmd = app.add_subcommand("sft", "supervised warm start on a task's solutions; writes a Hugging Face folder");
  cmd->add_option("--config", a->config, "TOML run file (its [model], [task] and [sft] sections)")->required();
  cmd->add_option("--out", a->out, "output folder")->required();
  add_output_options(cmd, a->output);
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_sft_command(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

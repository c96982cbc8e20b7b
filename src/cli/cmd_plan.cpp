// `meshrl plan --model DIR|config.json|tiny [--lora-rank R] [--lora-alpha A] [--lora-targets q_proj,v_proj]
//  [--codec int8|int4|int2|fp32|bf16] [--block-size 64] [--topology configs/four-cities.toml]
//  [--step-seconds S] [--json]`
// What a round costs on each city's link: parameters trained and exchanged, bytes up and down,
// seconds on the wire and inner steps that hide them, full weights and adapter side by side.
// Reads only config.json (no weights). The arithmetic is src/plan/comm_plan.h.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "plan/comm_plan.h"
#include "plan/plan_model.h"
#include "plan/plan_report.h"

namespace meshrl::cli {

namespace {
struct PlanArgs {
  std::string model;
  int64_t lora_rank = 0;  // 0: full weights only
  double lora_alpha = 0;  // 0: 2 * rank (a common choice; the ratio only scales the update)
  std::vector<std::string> lora_targets;
  std::string codec = "int8";
  uint32_t block_size = 64;
  std::string topology = "configs/four-cities.toml";
  double step_seconds = 10.0;
  bool json = false;
};

void run_plan(const PlanArgs& a) {
  auto m = plan::load_plan_model(a.model).value();
  plan::PlanInputs in;
  in.model = m.config;
  in.codec = plan::plan_codec_from_name(a.codec).value();
  in.block_size = a.block_size;
  in.step_seconds = a.step_seconds;
  in.topology = net::load_topology(a.topology).value();
  if (a.lora_rank > 0) {
    model::LoraConfig lora;
    lora.rank = a.lora_rank;
    lora.alpha = a.lora_alpha > 0 ? a.lora_alpha : 2.0 * static_cast<double>(a.lora_rank);
    if (!a.lora_targets.empty()) lora.targets = model::parse_lora_targets(a.lora_targets, "--lora-targets").value();
    in.lora = lora;
  } else if (!a.lora_targets.empty()) {
    throw StatusError(invalid_argument("[plan] --lora-targets needs --lora-rank R"));
  }
  const auto p = plan::make_plan(in).value();
  std::cout << (a.json ? plan::plan_json(m, in, p) : plan::plan_table(m, in, p)) << std::flush;
}
}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "what a round costs per city: params, bytes, seconds on the wire (full vs LoRA)");
  cmd->add_option("--model", a->model, "model folder, its config.json, or a preset (tiny, small)")->required();
  cmd->add_option("--lora-rank", a->lora_rank, "adapter rank r (0 = full weights only)")->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{65536}));
  cmd->add_option("--lora-alpha", a->lora_alpha, "adapter alpha (default 2 r)")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--lora-targets", a->lora_targets, "target modules (default all: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj)")
      ->delimiter(',');
  cmd->add_option("--codec", a->codec, "int8 | int4 | int2 | fp32 | bf16 (bf16: reference only, not a mesh codec)")->capture_default_str();
  cmd->add_option("--block-size", a->block_size, "int8 / int4 / int2 values per scale")->capture_default_str()
      ->check(CLI::Range(uint32_t{1}, uint32_t{65536}));
  cmd->add_option("--topology", a->topology, "cities and links")->capture_default_str();
  cmd->add_option("--step-seconds", a->step_seconds, "seconds of one inner step (rollouts + update)")->capture_default_str()
      ->check(CLI::Range(1e-6, 1e9));
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a] { run_plan(*a); });
}

}  // namespace meshrl::cli

// `meshrl merge --model BASE --adapter DIR --out OUT`
// Folds a LoRA adapter into its base (W + (alpha / r) B A) and writes a full Hugging Face folder
// (config.json, model.safetensors, the base's tokenizer). The adapter's recorded base hash must
// match BASE's weights, or nothing is written.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "model/lora_io.h"
#include "rl/policy_folder.h"

namespace meshrl::cli {

namespace {
struct MergeArgs {
  ModelOptions model;
  std::string out;
};

void run_merge(const MergeArgs& a) {
  if (a.model.adapter.empty()) throw StatusError(invalid_argument("[merge] --adapter DIR is required"));
  auto policy = load_policy_or_throw(a.model);  // loads and checks the adapter against the base
  const auto r = policy.model->lora()->config().rank;
  if (auto st = policy.model->merge_lora(); !st.is_ok()) throw StatusError(st);
  if (auto st = rl::save_policy_folder(a.out, policy.model, *policy.tokenizer, a.model.model); !st.is_ok()) throw StatusError(st);
  std::printf("merged %s (r = %lld) into %s -> %s\n", a.model.adapter.c_str(), static_cast<long long>(r), a.model.model.c_str(),
              a.out.c_str());
}
}  // namespace

void add_merge_command(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  auto* cmd = app.add_subcommand("merge", "fold a LoRA adapter into its base model and write a full Hugging Face folder");
  add_model_options(cmd, a->model);
  cmd->add_option("--out", a->out, "output folder (replaced if it exists)")->required();
  cmd->callback([a] { run_merge(*a); });
}

}  // namespace meshrl::cli

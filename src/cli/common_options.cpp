#include "cli/common_options.h"

#include "model/device.h"
#include "model/lora_io.h"

namespace meshrl::cli {

void add_model_options(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("--model", o.model, "Hugging Face folder or preset (tiny, small)")->capture_default_str();
  cmd->add_option("--device", o.device, "auto | cpu | cuda | mps")->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "mps"}));
  cmd->add_option("--threads", o.threads, "intra-op threads (1 when several processes share the machine)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--weight-seed", o.weight_seed, "seed of a preset's random weights")->capture_default_str();
  cmd->add_option("--adapter", o.adapter, "LoRA adapter folder (adapter_config.json + adapter_model.safetensors) for --model");
}

rollout::Policy load_policy_or_throw(const ModelOptions& o) {
  model::set_threads(o.threads);
  auto device = model::resolve_device(o.device).value();
  auto policy = rollout::load_policy(o.model, device, o.weight_seed).value();
  if (!o.adapter.empty()) {
    auto st = model::load_adapter(o.adapter, *policy.model);
    if (!st.is_ok()) throw StatusError(st.status());
  }
  return policy;
}

}  // namespace meshrl::cli

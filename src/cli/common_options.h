// Options every model-using subcommand shares: --model, --device, --threads, --seed of weights.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "rollout/policy.h"

namespace meshrl::cli {

struct ModelOptions {
  std::string model = "tiny";   // HF folder or preset
  std::string device = "auto";  // auto | cpu | cuda | mps
  int threads = 1;              // intra-op threads; 1 when processes share a machine
  uint64_t weight_seed = 0;     // presets only
  std::string adapter;          // a LoRA adapter folder (model/lora_io.h) applied on top; "" = none
};

void add_model_options(CLI::App* cmd, ModelOptions& o);

// Resolves the device, sets the thread count, loads (and applies --adapter, checked against the
// base); throws StatusError with the reason.
rollout::Policy load_policy_or_throw(const ModelOptions& o);

}  // namespace meshrl::cli

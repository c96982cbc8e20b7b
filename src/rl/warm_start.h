// The SFT warm start as a folder: train a policy with run_sft and write it as a Hugging Face
// folder (`meshrl sft`), and the cache `meshrl train` uses so that a second run with the same
// model, task and [sft] settings reuses the folder instead of training again.
// Knows nothing about GRPO or the CLI.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "core/status.h"
#include "rl/run_config.h"
#include "rl/sft.h"

namespace meshrl::rl {

struct WarmStart {
  std::string policy_spec;  // what GRPO starts from: the SFT folder, or model.init unchanged
  bool trained = false;     // SFT ran in this call
  bool cached = false;      // an earlier run's folder was reused
  SftResult sft;            // when trained
};

// 16 hex digits identifying what the warm start depends on: model.init, model.weight_seed, the
// whole task config and the [sft] keys that change the weights (not cache_dir, log_every).
std::string warm_start_key(const RunConfig& config);

// Loads model.init, runs SFT with config.sft and writes `out` (save_policy_folder, plus
// meshrl_sft.json with the losses and the key). Threads and device come from config.model.
Result<SftResult> sft_to_folder(const RunConfig& config, const std::filesystem::path& out,
                                const std::function<void(const SftProgress&)>& on_step = {});

// When sft.steps > 0 and model.init is a preset: <sft.cache_dir>/sft-<warm_start_key>, trained now
// unless it exists already. Otherwise model.init as it is (a folder is used without SFT).
Result<WarmStart> ensure_warm_start(const RunConfig& config, const std::function<void(const SftProgress&)>& on_step = {});

}  // namespace meshrl::rl

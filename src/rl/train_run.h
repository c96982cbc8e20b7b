// One single-node training run as a recipe over a run directory:
//   effective config -> warm start (SFT, cached) -> eval before -> GRPO steps (metrics, periodic
//   eval and checkpoints) -> final checkpoint -> eval after -> summary.json.
// Layout of RUN_DIR (format "meshrl-run/1"):
//   config.toml            the effective config (every key)
//   metrics.jsonl          one object per step (step 0 = the warm-start eval), appended + flushed
//   checkpoints/step-N/    Hugging Face folders, written atomically (temp folder, then rename)
//   summary.json           pass_at_1_before/after, steps, samples, wall_seconds, seed, config, ...
// Knows nothing about terminals: progress goes to the callbacks.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "rl/run_config.h"
#include "rl/sft.h"
#include "rl/trainer.h"

namespace meshrl::rl {

struct TrainRunCallbacks {
  std::function<void(const std::string&)> log;        // one human-readable line
  std::function<void(const SftProgress&)> on_sft_step;
  std::function<void(const StepMetrics&)> on_step;    // after each GRPO step (and its eval, if any)
  std::function<void(int64_t rows_done, int64_t rows_total)> on_eval_progress;  // inside each evaluation
};

struct TrainRunSummary {
  double pass_at_1_before = 0;
  double pass_at_1_after = 0;
  int64_t steps = 0;
  int64_t samples = 0;
  double wall_seconds = 0;
  std::filesystem::path final_checkpoint;
  nlohmann::json json;  // what summary.json holds
};

// Fails before any work when the run directory already holds a run (metrics.jsonl or summary.json).
Result<TrainRunSummary> run_training(const RunConfig& config, const std::filesystem::path& run_dir,
                                     const TrainRunCallbacks& callbacks = {});

}  // namespace meshrl::rl

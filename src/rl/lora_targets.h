// The run file's [lora] targets key turned into LoRA targets. Torch-free (model/lora_config.h), so
// the run file's validation (rl/run_config.cpp) can be built, and fuzzed, without libtorch;
// rl/lora_setup.h does the rest of [lora] on a model.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/lora_config.h"
#include "rl/run_config.h"

namespace meshrl::rl {

// The comma-separated targets ("q_proj, v_proj" or "q,v"); errors name `where` and the module.
Result<std::vector<model::LoraTarget>> lora_targets_of(const LoraSection& section, const std::string& where);

}  // namespace meshrl::rl

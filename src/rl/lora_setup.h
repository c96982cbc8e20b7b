// The run file's [lora] section turned into adapters on a policy's model: fresh adapters (A from
// the run's seed, B zero) or an adapter folder to continue from. Knows nothing about the mesh; the
// mesh sees the result only as the model's trainable set (the B matrices).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/lora_config.h"
#include "model/transformer.h"
#include "rl/lora_targets.h"  // lora_targets_of
#include "rl/run_config.h"

namespace meshrl::rl {

// nullopt when the section asks for no adapters (rank 0 and no adapter folder).
Result<std::optional<model::LoraConfig>> lora_config_of(const LoraSection& section, const std::string& source);

// Attaches what the section asks for to `model` (nothing when it asks for nothing): fresh
// adapters, or section.adapter's folder (its base hash checked against `model`; a rank given in
// the section must equal the folder's). Returns whether adapters are attached.
Result<bool> setup_lora(const LoraSection& section, model::TransformerImpl& model, const std::string& source);

}  // namespace meshrl::rl

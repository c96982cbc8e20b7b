// Loading and saving a Transformer: from a Hugging Face folder or a built-in preset name, and back
// to a Hugging Face folder (config.json + safetensors). Knows nothing about tokenizers.
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"
#include "model/transformer.h"

namespace meshrl::model {

// `spec` is a folder holding config.json + *.safetensors, or a preset name ("tiny", "small")
// initialised from `seed`. The model is moved to `device` ("cpu", "cuda", "mps").
Result<Transformer> load_transformer(const std::string& spec, const std::string& device = "cpu", uint64_t seed = 0);

// Writes config.json and model.safetensors (F32) atomically into `dir` (created if missing).
Status save_transformer(const std::filesystem::path& dir, const Transformer& model);

}  // namespace meshrl::model

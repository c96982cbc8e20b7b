// Where `meshrl plan` gets a model's architecture: a Hugging Face folder, its config.json alone, or a
// preset name (tiny, small). Knows nothing about weights: no safetensors file is opened.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace meshrl::plan {

struct PlanModel {
  model::ModelConfig config;
  std::string name;                // the folder's or file's name, or the preset
  std::vector<std::string> notes;  // what was set aside to count (e.g. rope_scaling)
};

// `spec`: a directory holding config.json, a path to a .json file, or a preset. rope_scaling does
// not change any parameter's shape, so a config that has it (Llama 3.x) is counted with it set
// aside and a note saying so, although the model itself would refuse to run it.
Result<PlanModel> load_plan_model(const std::string& spec);
Result<PlanModel> parse_plan_model(const std::string& json_text, const std::string& source);

}  // namespace meshrl::plan

#include "rl/lora_setup.h"

#include "model/lora_io.h"

namespace meshrl::rl {

Result<std::optional<model::LoraConfig>> lora_config_of(const LoraSection& section, const std::string& source) {
  if (section.rank == 0) return std::optional<model::LoraConfig>();
  model::LoraConfig c;
  c.rank = section.rank;
  c.alpha = section.alpha;
  c.seed = section.seed;
  MESHRL_ASSIGN_OR_RETURN(c.targets, lora_targets_of(section, source + ": [lora] targets"));
  MESHRL_RETURN_IF_ERROR(model::check_lora_config(c, source + ": [lora]"));
  return std::optional<model::LoraConfig>(c);
}

Result<bool> setup_lora(const LoraSection& section, model::TransformerImpl& model, const std::string& source) {
  if (!section.adapter.empty()) {
    MESHRL_ASSIGN_OR_RETURN(auto info, model::load_adapter(section.adapter, model));
    if (section.rank != 0 && section.rank != info.lora.rank)
      return invalid_argument(source + ": [lora] rank is " + std::to_string(section.rank) + " but the adapter " + section.adapter +
                              " has r = " + std::to_string(info.lora.rank) + "; set rank = 0 to take the folder's");
    return true;
  }
  MESHRL_ASSIGN_OR_RETURN(auto lora, lora_config_of(section, source));
  if (!lora) return false;
  MESHRL_RETURN_IF_ERROR(model.attach_lora(*lora));
  return true;
}

}  // namespace meshrl::rl

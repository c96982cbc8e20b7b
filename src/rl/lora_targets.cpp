// The [lora] targets key. See lora_targets.h.
#include "rl/lora_targets.h"

namespace meshrl::rl {

Result<std::vector<model::LoraTarget>> lora_targets_of(const LoraSection& section, const std::string& where) {
  std::vector<std::string> names;
  std::string cur;
  auto flush = [&] {
    const auto b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
    if (b != std::string::npos) names.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char ch : section.targets) {
    if (ch == ',') flush();
    else cur += ch;
  }
  flush();
  if (names.empty()) return invalid_argument(where + " is empty; list modules, e.g. \"q_proj,v_proj\"");
  return model::parse_lora_targets(names, where);
}

}  // namespace meshrl::rl

#include "plan/plan_model.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace meshrl::plan {

Result<PlanModel> parse_plan_model(const std::string& json_text, const std::string& source) {
  PlanModel out;
  std::string text = json_text;
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    out.notes.push_back(source + ": rope_scaling set aside (it changes no parameter count; `meshrl train` refuses it)");
    j.erase("rope_scaling");
    text = j.dump();
  }
  MESHRL_ASSIGN_OR_RETURN(out.config, model::parse_hf_config(text, source));
  return out;
}

Result<PlanModel> load_plan_model(const std::string& spec) {
  if (model::is_preset_name(spec) && !std::filesystem::exists(spec)) {
    PlanModel out;
    MESHRL_ASSIGN_OR_RETURN(out.config, model::preset_config(spec));
    out.name = spec;
    return out;
  }
  std::filesystem::path path(spec);
  std::string name;
  if (std::filesystem::is_directory(path)) {
    name = path.filename().empty() ? path.parent_path().filename().string() : path.filename().string();
    path /= "config.json";
  } else {
    name = path.parent_path().filename().string();
    if (name.empty()) name = path.stem().string();
  }
  if (!std::filesystem::exists(path))
    return not_found("[plan] --model " + spec + ": no " + path.string() + "; give a model folder, its config.json, or tiny|small");
  MESHRL_ASSIGN_OR_RETURN(auto text, read_file(path, /*max_bytes=*/16 << 20));
  MESHRL_ASSIGN_OR_RETURN(auto out, parse_plan_model(text, path.string()));
  out.name = name;
  return out;
}

}  // namespace meshrl::plan

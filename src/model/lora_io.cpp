#include "model/lora_io.h"

#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "model/safetensors_torch.h"
#include "model/shape_str.h"

namespace meshrl::model {
namespace {

using nlohmann::json;

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

bool is_attention(LoraTarget t) {
  return t == LoraTarget::kQ || t == LoraTarget::kK || t == LoraTarget::kV || t == LoraTarget::kO;
}

std::string hex128(XXH128_hash_t h) {
  char b[33];
  std::snprintf(b, sizeof b, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return b;
}

}  // namespace

std::string peft_tensor_name(int64_t layer, LoraTarget t, bool is_b) {
  return "base_model.model.model.layers." + std::to_string(layer) + (is_attention(t) ? ".self_attn." : ".mlp.") +
         std::string(lora_target_name(t)) + (is_b ? ".lora_B.weight" : ".lora_A.weight");
}

std::string base_content_hash(const TransformerImpl& model) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const char domain[] = "meshrl-base-v1";
  XXH3_128bits_update(st, domain, sizeof domain - 1);
  for (const auto& [name, t] : model.hf_tensors()) {
    const uint64_t len = name.size(), rank = static_cast<uint64_t>(t.dim());
    XXH3_128bits_update(st, &len, sizeof len);
    XXH3_128bits_update(st, name.data(), name.size());
    XXH3_128bits_update(st, &rank, sizeof rank);
    for (int64_t d : t.sizes()) XXH3_128bits_update(st, &d, sizeof d);
    auto v = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    XXH3_128bits_update(st, v.data_ptr<float>(), static_cast<size_t>(v.numel()) * sizeof(float));
  }
  const auto h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return hex128(h);
}

Status save_adapter(const std::filesystem::path& dir, const TransformerImpl& model, const std::string& base_name_or_path) {
  auto lora = model.lora();
  if (!lora) return invalid_argument("[adapter] " + dir.string() + ": the model has no adapters to save");
  const LoraConfig& c = lora->config();
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (int64_t l = 0; l < lora->n_layers(); ++l)
    for (LoraTarget t : c.targets) {
      tensors.emplace_back(peft_tensor_name(l, t, false), lora->a(l, t).detach());
      tensors.emplace_back(peft_tensor_name(l, t, true), lora->b(l, t).detach());
    }
  std::vector<std::string> targets;
  for (LoraTarget t : c.targets) targets.emplace_back(lora_target_name(t));
  json j = {{"peft_type", "LORA"},
            {"task_type", "CAUSAL_LM"},
            {"r", c.rank},
            {"lora_alpha", c.alpha},
            {"lora_dropout", 0.0},
            {"target_modules", targets},
            {"bias", "none"},
            {"fan_in_fan_out", false},
            {"use_rslora", false},
            {"use_dora", false},
            {"inference_mode", true},
            {"base_model_name_or_path", base_name_or_path},
            {"meshrl_adapter_format", kAdapterFormatVersion},
            {"meshrl_base_hash", base_content_hash(model)},
            {"meshrl_lora_seed", c.seed}};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("[adapter] cannot create " + dir.string() + ": " + ec.message());
  MESHRL_RETURN_IF_ERROR(write_safetensors(dir / kWeightsFile, tensors, {{"format", "pt"}}));
  return write_file_atomic(dir / kConfigFile, j.dump(2) + "\n");
}

Result<AdapterInfo> load_adapter_config(const std::filesystem::path& dir) {
  const std::string src = "[adapter] " + (dir / kConfigFile).string();
  MESHRL_ASSIGN_OR_RETURN(auto text, read_file(dir / kConfigFile, /*max_bytes=*/1 << 20));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return invalid_argument(src + ": not a JSON object");
  auto str = [&](const char* k) -> std::string { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
  if (str("peft_type") != "LORA") return invalid_argument(src + ": peft_type must be \"LORA\", got " + (j.contains("peft_type") ? j["peft_type"].dump() : "nothing"));
  AdapterInfo info;
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1 || j["r"].get<int64_t>() > 65536)
    return invalid_argument(src + ": r must be an integer in 1..65536, got " + (j.contains("r") ? j["r"].dump() : "nothing"));
  info.lora.rank = j["r"].get<int64_t>();
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number() || !(j["lora_alpha"].get<double>() > 0) ||
      !std::isfinite(j["lora_alpha"].get<double>()))
    return invalid_argument(src + ": lora_alpha must be a number > 0");
  info.lora.alpha = j["lora_alpha"].get<double>();
  // Features whose math we do not implement: refuse rather than compute something else.
  for (const char* k : {"use_rslora", "use_dora"})
    if (j.contains(k) && j[k].is_boolean() && j[k].get<bool>()) return invalid_argument(src + ": " + k + " is true; not supported");
  if (j.contains("bias") && str("bias") != "none") return invalid_argument(src + ": bias is " + j["bias"].dump() + "; only \"none\" is supported");
  if (j.contains("modules_to_save") && !j["modules_to_save"].is_null() && !j["modules_to_save"].empty())
    return invalid_argument(src + ": modules_to_save is set; adapters with fully trained extra modules are not supported");
  if (j.contains("rank_pattern") && j["rank_pattern"].is_object() && !j["rank_pattern"].empty())
    return invalid_argument(src + ": rank_pattern is set; one rank for every module is supported");
  if (j.contains("alpha_pattern") && j["alpha_pattern"].is_object() && !j["alpha_pattern"].empty())
    return invalid_argument(src + ": alpha_pattern is set; one alpha for every module is supported");
  const json& tm = j.contains("target_modules") ? j["target_modules"] : json();
  if (tm.is_string() && tm.get<std::string>() == "all-linear") {
    // PEFT's shorthand: every linear but the output head, i.e. the default list.
  } else if (tm.is_array()) {
    std::vector<std::string> names;
    for (const auto& x : tm) {
      if (!x.is_string()) return invalid_argument(src + ": target_modules must hold strings, got " + x.dump());
      names.push_back(x.get<std::string>());
    }
    MESHRL_ASSIGN_OR_RETURN(info.lora.targets, parse_lora_targets(names, (dir / kConfigFile).string() + ": target_modules"));
  } else {
    return invalid_argument(src + ": target_modules must be a list of module names or \"all-linear\"");
  }
  MESHRL_RETURN_IF_ERROR(check_lora_config(info.lora, (dir / kConfigFile).string()));
  info.base_model_name_or_path = str("base_model_name_or_path");
  info.base_hash = str("meshrl_base_hash");
  if (j.contains("meshrl_lora_seed") && j["meshrl_lora_seed"].is_number_unsigned())
    info.lora.seed = j["meshrl_lora_seed"].get<uint64_t>();
  return info;
}

Result<AdapterInfo> load_adapter(const std::filesystem::path& dir, TransformerImpl& model) {
  MESHRL_ASSIGN_OR_RETURN(auto info, load_adapter_config(dir));
  if (!info.base_hash.empty()) {
    const std::string have = base_content_hash(model);
    if (have != info.base_hash)
      return invalid_argument("[adapter] " + dir.string() + " was trained on base weights with hash " + info.base_hash +
                              ", this model's weights hash to " + have + "; is --model the adapter's base (" +
                              info.base_model_name_or_path + ")?");
  }
  const auto weights = dir / kWeightsFile;
  MESHRL_ASSIGN_OR_RETURN(auto tensors, read_safetensors(weights));
  // Check every name and shape before attaching anything, so a refused adapter leaves the model as it was.
  const ModelConfig& c = model.config();
  std::map<std::string, std::vector<int64_t>> expected;
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (LoraTarget t : info.lora.targets) {
      const auto d = lora_linear_dims(c, t);
      expected[peft_tensor_name(l, t, false)] = {info.lora.rank, d.in};
      expected[peft_tensor_name(l, t, true)] = {d.out, info.lora.rank};
    }
  for (const auto& [name, shape] : expected) {
    auto it = tensors.find(name);
    if (it == tensors.end())
      return not_found("[adapter] " + weights.string() + ": missing tensor " + name + " (adapter_config.json lists " +
                       std::string(name.find("mlp") != std::string::npos ? "this MLP" : "this attention") +
                       " module with r = " + std::to_string(info.lora.rank) + ")");
    if (it->second.sizes().vec() != shape)
      return invalid_argument("[adapter] " + weights.string() + ": shape of " + name + " is " + shape_str(it->second.sizes()) +
                              ", the model and r = " + std::to_string(info.lora.rank) + " imply " + shape_str(shape) +
                              "; was this adapter made for another model or rank?");
    if (!it->second.is_floating_point()) return invalid_argument("[adapter] " + weights.string() + ": " + name + " is not a float tensor");
  }
  for (const auto& [name, t] : tensors)
    if (!expected.count(name))
      return invalid_argument("[adapter] " + weights.string() + ": unexpected tensor " + name +
                              " (not a target of adapter_config.json, or a layer this model lacks)");
  MESHRL_RETURN_IF_ERROR(model.attach_lora(info.lora));
  torch::NoGradGuard no_grad;
  auto lora = model.lora();
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (LoraTarget t : info.lora.targets) {
      lora->a(l, t).copy_(tensors.at(peft_tensor_name(l, t, false)).to(torch::kFloat32));
      lora->b(l, t).copy_(tensors.at(peft_tensor_name(l, t, true)).to(torch::kFloat32));
    }
  return info;
}

}  // namespace meshrl::model

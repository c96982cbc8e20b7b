#include "model/model_io.h"

#include "model/checkpoint.h"

namespace meshrl::model {

Result<Transformer> load_transformer(const std::string& spec, const std::string& device, uint64_t seed) {
  if (is_preset_name(spec) && !std::filesystem::exists(spec)) {
    MESHRL_ASSIGN_OR_RETURN(auto config, preset_config(spec));
    Transformer model(config);
    model->init_weights(seed);
    model->to(torch::Device(device));
    return model;
  }
  if (!std::filesystem::is_directory(spec))
    return not_found("[model] '" + spec + "' is neither a model folder nor a preset (tiny, small)");
  MESHRL_ASSIGN_OR_RETURN(auto ckpt, load_checkpoint(spec));
  // load_checkpoint has already checked the weights against config.json.
  Transformer model(ckpt.config);
  auto st = model->load_hf_tensors(ckpt.tensors);
  if (!st.is_ok()) return Status(st.code(), st.message() + " (folder " + spec + ")");
  model->to(torch::Device(device));
  return model;
}

Status save_transformer(const std::filesystem::path& dir, const Transformer& model) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (auto& [name, t] : model->hf_tensors()) tensors.emplace_back(name, t.detach().to(torch::kCPU).contiguous());
  return save_checkpoint(dir, model->config(), tensors);
}

}  // namespace meshrl::model

// Parameter sets and fingerprints of a policy. See policy_params.h.
#include "mesh/policy_params.h"

#include <cstdio>

#include <xxhash.h>

#include "model/config.h"

namespace meshrl::mesh {

namespace {
std::string hex64(uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}
}  // namespace

NamedTensors trainable_parameters(model::TransformerImpl& model) {
  NamedTensors set;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    set.names.push_back(item.key());
    set.tensors.push_back(item.value());
  }
  return set;
}

Status copy_parameters(const NamedTensors& src, NamedTensors& dst, std::string_view what) {
  MESHRL_RETURN_IF_ERROR(check_same_layout(src, dst, what));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < dst.size(); ++i) dst.tensors[i].copy_(src.tensors[i]);
  return Status::ok();
}

std::string model_config_hash(const model::ModelConfig& config) {
  const std::string text = model::to_hf_config_json(config);
  return hex64(XXH3_64bits(text.data(), text.size()));
}

std::string tokenizer_hash(const tokenizer::Tokenizer& tok) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  const int32_t n = tok.n_vocab();
  XXH3_64bits_update(st, &n, sizeof n);
  for (int32_t id = 0; id < n; ++id) {
    auto bytes = tok.token_bytes(id);
    const std::string_view b = bytes.is_ok() ? bytes.value() : std::string_view{};
    const uint64_t len = bytes.is_ok() ? b.size() : ~uint64_t{0};
    const uint8_t special = tok.is_special(id) ? 1 : 0;
    XXH3_64bits_update(st, &len, sizeof len);
    XXH3_64bits_update(st, b.data(), b.size());
    XXH3_64bits_update(st, &special, 1);
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return hex64(h);
}

}  // namespace meshrl::mesh

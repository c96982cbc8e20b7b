// Adapter folders in the layout PEFT (Hugging Face's adapter library) reads and writes:
//   DIR/adapter_config.json        {"peft_type": "LORA", "r", "lora_alpha", "target_modules",
//                                   "base_model_name_or_path", ..., and ours: "meshrl_base_hash",
//                                   "meshrl_lora_seed", "meshrl_adapter_format": 1}
//   DIR/adapter_model.safetensors  base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight [r, in]
//                                  base_model.model.model.layers.N.self_attn.q_proj.lora_B.weight [out, r]
//                                  (mlp.gate_proj / up_proj / down_proj likewise), F32
// Owns the names, the config keys and every check that an adapter fits a base model; knows nothing
// about training or the mesh.
//
// The base hash ties an adapter to the exact weights it was trained on: an adapter applied to
// another base computes something else without any shape telling. It is XXH3-128 over the base's
// Hugging Face tensors as float32 (names, shapes, values, in hf_tensors() order), so the same
// weights stored as F32 or re-saved give the same hash; a BF16 copy of them does not.
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"
#include "model/lora_config.h"
#include "model/transformer.h"

namespace meshrl::model {

inline constexpr int64_t kAdapterFormatVersion = 1;

struct AdapterInfo {
  LoraConfig lora;
  std::string base_model_name_or_path;
  std::string base_hash;  // "" when the file has none (an adapter from elsewhere)
};

// 32 hex digits; the base weights only (adapters, if attached, are not part of it).
std::string base_content_hash(const TransformerImpl& model);

// Writes DIR/adapter_config.json and DIR/adapter_model.safetensors for the model's attached
// adapters (each file atomically; DIR created). Fails when no adapter is attached.
Status save_adapter(const std::filesystem::path& dir, const TransformerImpl& model, const std::string& base_name_or_path);

// Reads and checks DIR/adapter_config.json: peft_type "LORA", r >= 1, lora_alpha > 0, known
// target_modules (a list, or PEFT's "all-linear"), no features we do not compute (use_rslora,
// use_dora, bias other than "none", modules_to_save). Errors name the file and the key.
Result<AdapterInfo> load_adapter_config(const std::filesystem::path& dir);

// Reads the adapter onto `model`: checks the base hash (when the file has one) against the model,
// attaches adapters of the file's config and copies A and B in, every name and shape checked; a
// missing, extra or misshapen tensor is refused naming it. Returns what was read.
Result<AdapterInfo> load_adapter(const std::filesystem::path& dir, TransformerImpl& model);

// The PEFT name of a target's A or B in layer l ("lora_A" / "lora_B").
std::string peft_tensor_name(int64_t layer, LoraTarget t, bool is_b);

}  // namespace meshrl::model

// Hugging Face model folders: config.json plus model.safetensors, or shards listed by
// model.safetensors.index.json. Owns the folder layout and the check that weights fit the config;
// knows nothing about how the transformer uses the tensors (it uses the names listed here).
//
// Pickle checkpoints (pytorch_model.bin, *.pt, *.pth, *.ckpt) are never loaded: unpickling runs
// arbitrary code. A folder holding only those is refused with a hint to convert it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace meshrl::model {

struct Checkpoint {
  ModelConfig config;
  std::map<std::string, torch::Tensor> tensors;  // HF names -> CPU tensors in their stored dtype
};

// HF names and shapes the config implies, in model order: model.embed_tokens.weight [V, E]; per
// layer N: model.layers.N.input_layernorm.weight [E], self_attn.{q,k,v,o}_proj.weight
// ([H*D, E], [KV*D, E], [KV*D, E], [E, H*D]), self_attn.{q,k,v}_proj.bias ([H*D], [KV*D], [KV*D])
// when attention_bias, post_attention_layernorm.weight [E], mlp.{gate,up,down}_proj.weight
// ([F, E], [F, E], [E, F]); then model.norm.weight [E]; lm_head.weight [V, E] unless tied.
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_hf_tensor_shapes(const ModelConfig& config);

// Every expected tensor present with its shape and a floating dtype (F32/F16/BF16/F64), and nothing
// else. Messages: "[checkpoint] config.json says 4 layers, weights have 6 (model.layers.5.*); is
// this the right folder?", "missing tensor model.layers.2.mlp.up_proj.weight", "shape of X is
// [a, b], config.json implies [c, d]", "unexpected tensor X".
Status check_weights_match_config(const ModelConfig& config, const std::map<std::string, torch::Tensor>& tensors);

// Reads dir/config.json and dir/model.safetensors, or dir/model.safetensors.index.json and every
// shard it names (each read once; shard names must be plain file names inside dir). Fails when a
// listed tensor is missing from its shard, a shard file is missing, a shard holds a tensor the index
// does not list, both a single file and an index are present (a stale leftover), or the weights do
// not match the config (check_weights_match_config). Buffers HF never needs (*.rotary_emb.inv_freq)
// are dropped, and so is lm_head.weight when the config ties it to the embeddings.
Result<Checkpoint> load_checkpoint(const std::filesystem::path& dir);

// Writes dir/config.json and the weights (dir is created if missing), each file atomically, with
// safetensors metadata {"format": "pt"} as transformers expects. max_shard_bytes == 0: one
// model.safetensors. Otherwise tensors are packed in the given order into shards of at most
// max_shard_bytes (a larger tensor gets a shard of its own), named model-00001-of-0000N.safetensors,
// with model.safetensors.index.json ({"metadata": {"total_size": bytes}, "weight_map": {...}}); a
// single shard is written as model.safetensors, as transformers does. Weight files of the other
// layout left from an earlier save are removed after the new files are in place. The tensors must
// pass check_weights_match_config.
Status save_checkpoint(const std::filesystem::path& dir, const ModelConfig& config,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors, int64_t max_shard_bytes = 0);

}  // namespace meshrl::model

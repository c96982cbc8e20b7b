// ModelConfig: the architecture hyperparameters of a decoder-only model, read from and written to a
// Hugging Face config.json, or taken from a built-in preset (tiny, small; ../shared/BENCH.md).
// Knows nothing about tensors or weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace meshrl::model {

enum class Arch { kLlama, kQwen2 };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  int64_t n_vocab = 512;        // vocab_size
  int64_t n_embd = 256;         // hidden_size
  int64_t n_layers = 4;         // num_hidden_layers
  int64_t n_heads = 8;          // num_attention_heads
  int64_t n_kv_heads = 4;       // num_key_value_heads (GQA: n_heads % n_kv_heads == 0)
  int64_t n_ff = 768;           // intermediate_size
  int64_t max_positions = 2048; // max_position_embeddings
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = true;
  bool attention_bias = false;  // q/k/v projections carry a bias (true for Qwen2)
  int64_t bos_token_id = -1;    // -1: none
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id, an int or a list
  std::string torch_dtype = "float32";  // as written in config.json; informational

  int64_t head_dim() const { return n_embd / n_heads; }
};

// Parses config.json text. `source` names the file in error messages. Checks types, required
// fields (vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size),
// positivity, n_embd % n_heads == 0, n_heads % n_kv_heads == 0, and a known architecture
// (architectures[0] LlamaForCausalLM / Qwen2ForCausalLM, or model_type llama / qwen2).
Result<ModelConfig> parse_hf_config(const std::string& json_text, const std::string& source);
Result<ModelConfig> load_hf_config(const std::filesystem::path& config_json);

// config.json text for this config (architectures, model_type and all the fields above).
std::string to_hf_config_json(const ModelConfig& config);

// Built-in presets: "tiny" (vocab 512, hidden 256, 4 layers, 8 heads, 4 kv heads, ff 768) and
// "small" (vocab 8192, hidden 512, 8 layers, 8 heads, 4 kv heads, ff 1536); Llama, tied.
Result<ModelConfig> preset_config(const std::string& name);
bool is_preset_name(const std::string& name);

}  // namespace meshrl::model

// config.json parsing (Hugging Face Llama / Qwen2), writing, presets.
//   cmake --build build --target test_model && build/tests/test_model --gtest_filter='HfConfig*'
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace meshrl::model {
namespace {

// What transformers 4.46 writes for a small LlamaForCausalLM, extra keys included.
const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": [2, 7],
  "head_dim": 8,
  "hidden_act": "silu",
  "hidden_size": 32,
  "initializer_range": 0.02,
  "intermediate_size": 64,
  "max_position_embeddings": 4096,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 4,
  "num_hidden_layers": 3,
  "num_key_value_heads": 2,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.46.0",
  "use_cache": true,
  "vocab_size": 100
})";

std::string with(const char* base, const std::string& key, const nlohmann::json& value) {
  auto j = nlohmann::json::parse(base);
  if (value.is_discarded()) j.erase(key);
  else j[key] = value;
  return j.dump();
}
const nlohmann::json kErase = nlohmann::json(nlohmann::json::value_t::discarded);

std::string error_of(const std::string& text) {
  auto r = parse_hf_config(text, "dir/config.json");
  EXPECT_FALSE(r.is_ok());
  if (r.is_ok()) return "";
  EXPECT_NE(r.status().message().find("dir/config.json"), std::string::npos) << r.status().message();
  return r.status().message();
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

TEST(HfConfig, ParsesLlama) {
  auto r = parse_hf_config(kLlama, "config.json");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const auto& c = *r;
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.n_vocab, 100);
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_layers, 3);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.n_ff, 64);
  EXPECT_EQ(c.head_dim(), 8);
  EXPECT_EQ(c.max_positions, 4096);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(HfConfig, Qwen2DefaultsAndHfDefaults) {
  std::string q = R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 64,
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
    "eos_token_id": 5, "bos_token_id": null, "sliding_window": null, "use_sliding_window": false,
    "max_window_layers": 28})";
  auto r = parse_hf_config(q, "q.json");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->arch, Arch::kQwen2);
  EXPECT_TRUE(r->attention_bias);          // Qwen2 always has q/k/v biases
  EXPECT_EQ(r->n_kv_heads, 4);             // missing: as many as query heads
  EXPECT_EQ(r->max_positions, 2048);       // missing: 2048
  EXPECT_DOUBLE_EQ(r->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(r->rms_norm_eps, 1e-6);  // LlamaConfig / Qwen2Config default
  EXPECT_FALSE(r->tie_word_embeddings);     // LlamaConfig / Qwen2Config default
  EXPECT_EQ(r->bos_token_id, -1);
  EXPECT_EQ(r->eos_token_ids, (std::vector<int64_t>{5}));
  // model_type alone is enough; an explicit attention_bias wins.
  auto only_type = parse_hf_config(with(with(q.c_str(), "architectures", kErase).c_str(), "attention_bias", false),
                                   "q.json");
  ASSERT_TRUE(only_type.is_ok()) << only_type.status().message();
  EXPECT_EQ(only_type->arch, Arch::kQwen2);
  EXPECT_FALSE(only_type->attention_bias);
}

TEST(HfConfig, RefusesUnsupportedFeatures) {
  auto m = error_of(with(kLlama, "rope_scaling", {{"type", "linear"}, {"factor", 2.0}}));
  EXPECT_CONTAINS(m, "field 'rope_scaling'");
  EXPECT_CONTAINS(m, "not supported");
  EXPECT_CONTAINS(error_of(with(kLlama, "hidden_act", "gelu")), "field 'hidden_act'");
  EXPECT_CONTAINS(error_of(with(kLlama, "head_dim", 16)), "field 'head_dim'");
  EXPECT_CONTAINS(error_of(with(kLlama, "mlp_bias", true)), "field 'mlp_bias'");
  EXPECT_CONTAINS(error_of(with(kLlama, "use_sliding_window", true)), "field 'use_sliding_window'");
  EXPECT_CONTAINS(error_of(with(kLlama, "architectures", {"MistralForCausalLM"})), "MistralForCausalLM");
  EXPECT_CONTAINS(error_of(with(with(kLlama, "architectures", kErase).c_str(), "model_type", "gpt2")), "gpt2");
  EXPECT_CONTAINS(error_of(with(kLlama, "model_type", "qwen2")), "contradicts");
  EXPECT_CONTAINS(error_of(with(with(kLlama, "architectures", kErase).c_str(), "model_type", kErase)),
                  "cannot tell the architecture");
}

TEST(HfConfig, RefusesBadValues) {
  EXPECT_CONTAINS(error_of("{not json"), "not valid JSON");
  EXPECT_CONTAINS(error_of("[1]"), "JSON object");
  EXPECT_CONTAINS(error_of(with(kLlama, "vocab_size", kErase)), "field 'vocab_size' is required");
  EXPECT_CONTAINS(error_of(with(kLlama, "hidden_size", "32")), "field 'hidden_size' must be an integer, got string");
  EXPECT_CONTAINS(error_of(with(kLlama, "hidden_size", 32.5)), "field 'hidden_size' must be an integer");
  EXPECT_CONTAINS(error_of(with(kLlama, "num_hidden_layers", 0)), "must be positive");
  EXPECT_CONTAINS(error_of(with(kLlama, "num_hidden_layers", -2)), "must be positive");
  EXPECT_CONTAINS(error_of(with(kLlama, "vocab_size", uint64_t{1} << 63)), "over the limit");
  EXPECT_CONTAINS(error_of(with(kLlama, "num_attention_heads", 3)), "not divisible");
  EXPECT_CONTAINS(error_of(with(kLlama, "num_key_value_heads", 3)), "field 'num_key_value_heads'");
  EXPECT_CONTAINS(error_of(with(with(kLlama, "head_dim", kErase).c_str(), "hidden_size", 36)), "odd head dimension");
  EXPECT_CONTAINS(error_of(with(kLlama, "rope_theta", -1.0)), "field 'rope_theta'");
  EXPECT_CONTAINS(error_of(with(kLlama, "tie_word_embeddings", 1)), "field 'tie_word_embeddings' must be true or false");
  EXPECT_CONTAINS(error_of(with(kLlama, "eos_token_id", "2")), "field 'eos_token_id'");
  EXPECT_CONTAINS(error_of(with(kLlama, "eos_token_id", {2, -1})), "field 'eos_token_id'");
  EXPECT_CONTAINS(error_of(with(kLlama, "torch_dtype", 3)), "field 'torch_dtype'");
}

TEST(HfConfig, WriteThenParseRoundTrips) {
  for (Arch arch : {Arch::kLlama, Arch::kQwen2}) {
    ModelConfig c;
    c.arch = arch;
    c.n_vocab = 77, c.n_embd = 48, c.n_layers = 5, c.n_heads = 6, c.n_kv_heads = 2, c.n_ff = 100;
    c.max_positions = 512, c.rope_theta = 1e6, c.rms_norm_eps = 1e-6, c.tie_word_embeddings = false;
    c.attention_bias = arch == Arch::kQwen2, c.bos_token_id = 3, c.eos_token_ids = {4, 9}, c.torch_dtype = "float16";
    std::string text = to_hf_config_json(c);
    auto j = nlohmann::json::parse(text);
    EXPECT_EQ(j["architectures"][0], arch == Arch::kQwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
    EXPECT_TRUE(j["rope_scaling"].is_null());
    auto r = parse_hf_config(text, "written");
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->arch, c.arch);
    EXPECT_EQ(r->n_vocab, c.n_vocab);
    EXPECT_EQ(r->n_embd, c.n_embd);
    EXPECT_EQ(r->n_layers, c.n_layers);
    EXPECT_EQ(r->n_heads, c.n_heads);
    EXPECT_EQ(r->n_kv_heads, c.n_kv_heads);
    EXPECT_EQ(r->n_ff, c.n_ff);
    EXPECT_EQ(r->max_positions, c.max_positions);
    EXPECT_EQ(r->rope_theta, c.rope_theta);
    EXPECT_EQ(r->rms_norm_eps, c.rms_norm_eps);
    EXPECT_EQ(r->tie_word_embeddings, c.tie_word_embeddings);
    EXPECT_EQ(r->attention_bias, c.attention_bias);
    EXPECT_EQ(r->bos_token_id, c.bos_token_id);
    EXPECT_EQ(r->eos_token_ids, c.eos_token_ids);
    EXPECT_EQ(r->torch_dtype, c.torch_dtype);
  }
  ModelConfig none;  // no bos / eos: written as null, read back as none
  auto r = parse_hf_config(to_hf_config_json(none), "written").value();
  EXPECT_EQ(r.bos_token_id, -1);
  EXPECT_TRUE(r.eos_token_ids.empty());
  EXPECT_EQ(parse_hf_config(to_hf_config_json(none), "w").value().eos_token_ids.size(), 0u);
}

TEST(HfConfig, Presets) {
  EXPECT_TRUE(is_preset_name("tiny"));
  EXPECT_TRUE(is_preset_name("small"));
  EXPECT_FALSE(is_preset_name("huge"));
  auto tiny = preset_config("tiny").value();
  EXPECT_EQ(tiny.n_vocab, 512);
  EXPECT_EQ(tiny.n_embd, 256);
  EXPECT_EQ(tiny.n_layers, 4);
  EXPECT_EQ(tiny.n_heads, 8);
  EXPECT_EQ(tiny.n_kv_heads, 4);
  EXPECT_EQ(tiny.n_ff, 768);
  EXPECT_TRUE(tiny.tie_word_embeddings);
  EXPECT_EQ(tiny.arch, Arch::kLlama);
  auto small = preset_config("small").value();
  EXPECT_EQ(small.n_vocab, 8192);
  EXPECT_EQ(small.n_embd, 512);
  EXPECT_EQ(small.n_layers, 8);
  EXPECT_EQ(small.n_ff, 1536);
  EXPECT_DOUBLE_EQ(small.rms_norm_eps, 1e-5);
  auto bad = preset_config("huge");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_CONTAINS(bad.status().message(), "tiny, small");
}

TEST(HfConfig, LoadMissingFile) {
  auto r = load_hf_config("/nonexistent/meshrl/config.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_CONTAINS(r.status().message(), "/nonexistent/meshrl/config.json");
}

}  // namespace
}  // namespace meshrl::model

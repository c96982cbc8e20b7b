// Model folders written by Python (tests/oracle/hf_fixtures.py, committed in tests/data/hf/) load
// with the same bytes, and single-file ones re-save byte-identically.
//   /usr/bin/python3 tests/oracle/hf_fixtures.py --out tests/data/hf     (regenerate)
//   cmake --build build --target test_model && build/tests/test_model --gtest_filter='CheckpointHfFixture*'
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "model/checkpoint.h"
#include "model/safetensors_torch.h"
#include "support/temp_dir.h"

namespace meshrl::model {
namespace {
namespace fs = std::filesystem;

const fs::path kHf = fs::path(MESHRL_TEST_DATA) / "hf";

// FNV-1a 64 of the raw little-endian bytes, as hf_fixtures.fnv1a64 computes it.
std::string fnv1a64_hex(const torch::Tensor& t) {
  auto c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < c.numel() * static_cast<int64_t>(c.element_size()); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void expect_matches_python(const std::string& folder, const Checkpoint& ck) {
  auto expected = nlohmann::json::parse(read_file(kHf / folder / "expected.json").value());
  ASSERT_EQ(ck.tensors.size(), expected.size()) << folder;
  for (const auto& [name, e] : expected.items()) {
    ASSERT_TRUE(ck.tensors.count(name)) << folder << ": " << name;
    const auto& t = ck.tensors.at(name);
    EXPECT_EQ(dtype_from_torch(t.scalar_type()), dtype_from_name(e["dtype"].get<std::string>())) << name;
    EXPECT_EQ(t.sizes().vec(), e["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(fnv1a64_hex(t), e["fnv1a64"].get<std::string>()) << name;
    EXPECT_NEAR(t.to(torch::kFloat64).sum().item<double>(), e["sum"].get<double>(), 1e-9) << name;
  }
}

TEST(CheckpointHfFixture, LlamaF32Tied) {
  auto ck = load_checkpoint(kHf / "llama_f32_tied");
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_EQ(ck->config.arch, Arch::kLlama);
  EXPECT_EQ(ck->config.n_vocab, 64);
  EXPECT_EQ(ck->config.n_embd, 32);
  EXPECT_EQ(ck->config.n_layers, 2);
  EXPECT_EQ(ck->config.n_heads, 4);
  EXPECT_EQ(ck->config.n_kv_heads, 2);
  EXPECT_EQ(ck->config.n_ff, 64);
  EXPECT_TRUE(ck->config.tie_word_embeddings);
  EXPECT_FALSE(ck->config.attention_bias);
  EXPECT_EQ(ck->config.eos_token_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ck->tensors.count("lm_head.weight"), 0u);
  EXPECT_EQ(ck->tensors.at("model.embed_tokens.weight").scalar_type(), torch::kFloat32);
  expect_matches_python("llama_f32_tied", *ck);
}

TEST(CheckpointHfFixture, Qwen2Bf16Untied) {
  auto ck = load_checkpoint(kHf / "qwen2_bf16_untied");
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_EQ(ck->config.arch, Arch::kQwen2);
  EXPECT_TRUE(ck->config.attention_bias);
  EXPECT_FALSE(ck->config.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(ck->config.rope_theta, 1e6);
  EXPECT_EQ(ck->config.max_positions, 32768);
  EXPECT_EQ(ck->tensors.at("model.layers.1.self_attn.k_proj.bias").sizes(), torch::IntArrayRef({16}));
  EXPECT_EQ(ck->tensors.at("lm_head.weight").scalar_type(), torch::kBFloat16);
  expect_matches_python("qwen2_bf16_untied", *ck);
}

TEST(CheckpointHfFixture, LlamaF16Sharded) {
  ASSERT_TRUE(fs::exists(kHf / "llama_f16_sharded" / "model-00002-of-00002.safetensors"));
  auto ck = load_checkpoint(kHf / "llama_f16_sharded");
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_FALSE(ck->config.tie_word_embeddings);
  EXPECT_EQ(ck->tensors.at("lm_head.weight").scalar_type(), torch::kFloat16);
  expect_matches_python("llama_f16_sharded", *ck);
}

TEST(CheckpointHfFixture, ResaveOfPythonFileIsByteIdentical) {
  // The layout (tensor order, header JSON, padding) matches the one the Python module writes,
  // which follows the reference safetensors writer.
  for (const char* folder : {"llama_f32_tied", "qwen2_bf16_untied"}) {
    auto ck = load_checkpoint(kHf / folder).value();
    const test_support::TempDir tmp;
    const fs::path dir = tmp.path() / folder;
    std::vector<std::pair<std::string, torch::Tensor>> tensors(ck.tensors.begin(), ck.tensors.end());
    auto st = save_checkpoint(dir, ck.config, tensors);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(read_file(dir / "model.safetensors").value(), read_file(kHf / folder / "model.safetensors").value())
        << folder;
  }
}

}  // namespace
}  // namespace meshrl::model

// Hugging Face model folders: save/load (single file and shards), weight/config checks, refusals.
//   cmake --build build --target test_model && build/tests/test_model --gtest_filter='Checkpoint*'
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "model/checkpoint.h"
#include "model/safetensors_torch.h"
#include "support/temp_dir.h"

namespace meshrl::model {
namespace {
namespace fs = std::filesystem;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

ModelConfig small_config(Arch arch = Arch::kLlama, bool tied = true) {
  ModelConfig c;
  c.arch = arch;
  c.n_vocab = 16, c.n_embd = 8, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.n_ff = 12;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == Arch::kQwen2;
  c.eos_token_ids = {2};
  return c;
}

std::vector<std::pair<std::string, torch::Tensor>> random_weights(const ModelConfig& c, uint64_t seed,
                                                                  torch::ScalarType dtype = torch::kFloat32) {
  torch::manual_seed(seed);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, shape] : expected_hf_tensor_shapes(c))
    out.emplace_back(name, (torch::randn(shape) * 0.02).to(dtype));
  return out;
}

std::map<std::string, torch::Tensor> as_map(const std::vector<std::pair<std::string, torch::Tensor>>& v) {
  return {v.begin(), v.end()};
}

void expect_same_tensors(const std::map<std::string, torch::Tensor>& got,
                         const std::vector<std::pair<std::string, torch::Tensor>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(got.at(name), t)) << name;
  }
}

TEST(CheckpointShapes, ExpectedNamesInModelOrder) {
  auto qwen = small_config(Arch::kQwen2, /*tied=*/false);
  auto shapes = expected_hf_tensor_shapes(qwen);
  // embed + 2 layers x (2 norms + 4 attn + 3 bias + 3 mlp) + norm + lm_head
  ASSERT_EQ(shapes.size(), 1u + 2 * 12 + 1 + 1);
  EXPECT_EQ(shapes[0].first, "model.embed_tokens.weight");
  EXPECT_EQ(shapes[0].second, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(shapes[1].first, "model.layers.0.input_layernorm.weight");
  std::map<std::string, std::vector<int64_t>> m(shapes.begin(), shapes.end());
  EXPECT_EQ(m.at("model.layers.1.self_attn.q_proj.weight"), (std::vector<int64_t>{8, 8}));  // H*D = 2*4
  EXPECT_EQ(m.at("model.layers.1.self_attn.k_proj.weight"), (std::vector<int64_t>{4, 8}));  // KV*D = 1*4
  EXPECT_EQ(m.at("model.layers.1.self_attn.v_proj.bias"), (std::vector<int64_t>{4}));
  EXPECT_EQ(m.at("model.layers.1.self_attn.o_proj.weight"), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(m.at("model.layers.0.mlp.gate_proj.weight"), (std::vector<int64_t>{12, 8}));
  EXPECT_EQ(m.at("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(shapes[shapes.size() - 2].first, "model.norm.weight");
  EXPECT_EQ(shapes.back().first, "lm_head.weight");
  auto llama = expected_hf_tensor_shapes(small_config(Arch::kLlama, /*tied=*/true));
  EXPECT_EQ(llama.size(), 1u + 2 * 9 + 1);
  EXPECT_EQ(llama.back().first, "model.norm.weight");
}

TEST(CheckpointCheck, ExplainsMismatches) {
  auto c = small_config();
  auto w = as_map(random_weights(c, 1));
  EXPECT_TRUE(check_weights_match_config(c, w).is_ok());

  auto more = w;  // weights of a 6-layer model against a 2-layer config
  more["model.layers.5.mlp.up_proj.weight"] = torch::zeros({12, 8});
  EXPECT_EQ(check_weights_match_config(c, more).message(),
            "[checkpoint] config.json says 2 layers, weights have 6 (model.layers.5.*); is this the right folder?");

  auto fewer = c;
  fewer.n_layers = 4;
  EXPECT_EQ(check_weights_match_config(fewer, w).message(),
            "[checkpoint] config.json says 4 layers, weights have 2 (no model.layers.2.*); is this the right folder?");

  auto missing = w;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  EXPECT_EQ(check_weights_match_config(c, missing).message(),
            "[checkpoint] missing tensor model.layers.1.mlp.up_proj.weight");

  auto shape = w;
  shape["model.layers.0.self_attn.k_proj.weight"] = torch::zeros({8, 8});
  EXPECT_EQ(check_weights_match_config(c, shape).message(),
            "[checkpoint] shape of model.layers.0.self_attn.k_proj.weight is [8, 8], config.json implies [4, 8]");

  auto extra = w;
  extra["model.layers.0.self_attn.q_proj.bias"] = torch::zeros({8});  // Llama without attention_bias
  EXPECT_CONTAINS(check_weights_match_config(c, extra).message(),
                  "unexpected tensor model.layers.0.self_attn.q_proj.bias");

  auto ints = w;
  ints["model.norm.weight"] = torch::ones({8}, torch::kInt64);
  EXPECT_CONTAINS(check_weights_match_config(c, ints).message(), "model.norm.weight has dtype");

  auto untied = small_config(Arch::kLlama, /*tied=*/false);
  EXPECT_EQ(check_weights_match_config(untied, w).message(), "[checkpoint] missing tensor lm_head.weight");
  auto tied_with_head = w;  // some tied checkpoints still carry lm_head.weight
  tied_with_head["lm_head.weight"] = torch::zeros({16, 8});
  EXPECT_TRUE(check_weights_match_config(c, tied_with_head).is_ok());
}

TEST(Checkpoint, SaveLoadSingleFile) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto c = small_config(Arch::kQwen2, /*tied=*/false);
  auto w = random_weights(c, 2, torch::kBFloat16);
  auto st = save_checkpoint(dir, c, w);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  auto meta = read_safetensors_with_metadata(dir / "model.safetensors").value().metadata;
  EXPECT_EQ(meta.at("format"), "pt");  // transformers refuses safetensors files without it

  auto ck = load_checkpoint(dir);
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_EQ(ck->config.arch, Arch::kQwen2);
  EXPECT_EQ(ck->config.n_layers, 2);
  EXPECT_TRUE(ck->config.attention_bias);
  expect_same_tensors(ck->tensors, w);

  // Saving what was loaded gives the same bytes.
  auto before = read_file(dir / "model.safetensors").value();
  std::vector<std::pair<std::string, torch::Tensor>> again(ck->tensors.begin(), ck->tensors.end());
  ASSERT_TRUE(save_checkpoint(dir, ck->config, again).is_ok());
  EXPECT_EQ(read_file(dir / "model.safetensors").value(), before);
}

TEST(Checkpoint, SaveLoadShardsThenBackToOneFile) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto c = small_config();
  auto w = random_weights(c, 3);
  int64_t total = 0;
  for (const auto& [n, t] : w) total += t.numel() * 4;
  ASSERT_TRUE(save_checkpoint(dir, c, w, /*max_shard_bytes=*/700).is_ok());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  auto index = nlohmann::json::parse(read_file(dir / "model.safetensors.index.json").value());
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), total);
  std::set<std::string> shard_files;
  for (const auto& [name, file] : index["weight_map"].items()) shard_files.insert(file.get<std::string>());
  ASSERT_GT(shard_files.size(), 2u);
  const std::string n = std::to_string(shard_files.size());
  EXPECT_EQ(*shard_files.begin(), "model-00001-of-0000" + n + ".safetensors");
  for (const auto& f : shard_files) {
    ASSERT_TRUE(fs::exists(dir / f)) << f;
    // Each shard stays under the budget unless it holds a single larger tensor.
    auto shard = read_safetensors(dir / f).value();
    int64_t bytes = 0;
    for (const auto& [name, t] : shard) bytes += t.numel() * 4;
    if (shard.size() > 1) {
      EXPECT_LE(bytes, 700) << f;
    }
  }
  auto ck = load_checkpoint(dir);
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  expect_same_tensors(ck->tensors, w);

  // Re-saving as one file removes the shards and the index.
  ASSERT_TRUE(save_checkpoint(dir, c, w).is_ok());
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  for (const auto& f : shard_files) EXPECT_FALSE(fs::exists(dir / f)) << f;
  expect_same_tensors(load_checkpoint(dir).value().tensors, w);
}

TEST(Checkpoint, ShardBudgetLargerThanModelGivesOneFile) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto c = small_config();
  ASSERT_TRUE(save_checkpoint(dir, c, random_weights(c, 4), int64_t{1} << 30).is_ok());
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
}

TEST(Checkpoint, ShardErrorsNameIndexAndShard) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto c = small_config();
  auto w = random_weights(c, 5);
  ASSERT_TRUE(save_checkpoint(dir, c, w, 700).is_ok());
  const auto index_path = dir / "model.safetensors.index.json";
  const auto index_text = read_file(index_path).value();
  auto index = nlohmann::json::parse(index_text);

  // A tensor listed for a shard that does not hold it.
  auto moved = index;
  moved["weight_map"]["model.norm.weight"] = index["weight_map"]["model.embed_tokens.weight"];  // shard 1
  ASSERT_TRUE(write_file_atomic(index_path, moved.dump()).is_ok());
  auto r = load_checkpoint(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_CONTAINS(r.status().message(), "tensor model.norm.weight is listed in");
  EXPECT_CONTAINS(r.status().message(), "model-00001-of-");

  // A shard file that is gone.
  ASSERT_TRUE(write_file_atomic(index_path, index_text).is_ok());
  const std::string last = index["weight_map"]["model.norm.weight"];
  fs::rename(dir / last, dir / "moved.bin.away");
  r = load_checkpoint(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_CONTAINS(r.status().message(), "shard " + last);
  EXPECT_CONTAINS(r.status().message(), "does not exist");
  fs::rename(dir / "moved.bin.away", dir / last);

  // A shard name that escapes the folder.
  auto escape = index;
  escape["weight_map"]["model.norm.weight"] = "../model.safetensors";
  ASSERT_TRUE(write_file_atomic(index_path, escape.dump()).is_ok());
  r = load_checkpoint(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_CONTAINS(r.status().message(), "not a plain file name");

  // A tensor a shard holds but the index does not list.
  auto unlisted = index;
  unlisted["weight_map"].erase("model.norm.weight");
  ASSERT_TRUE(write_file_atomic(index_path, unlisted.dump()).is_ok());
  r = load_checkpoint(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_CONTAINS(r.status().message(), "does not list");

  ASSERT_TRUE(write_file_atomic(index_path, "{\"weight_map\": []}").is_ok());
  EXPECT_CONTAINS(load_checkpoint(dir).status().message(), "field 'weight_map'");

  // Index and single file side by side: a leftover, refused rather than guessed.
  ASSERT_TRUE(write_file_atomic(index_path, index_text).is_ok());
  ASSERT_TRUE(write_safetensors(dir / "model.safetensors", w).is_ok());
  EXPECT_CONTAINS(load_checkpoint(dir).status().message(), "holds both");
}

TEST(Checkpoint, RefusesPickleOnlyFolders) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  ASSERT_TRUE(write_file_atomic(dir / "config.json", to_hf_config_json(small_config())).is_ok());
  ASSERT_TRUE(write_file_atomic(dir / "pytorch_model.bin", std::string("\x80\x02}q\x00.", 6)).is_ok());
  auto r = load_checkpoint(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_CONTAINS(r.status().message(), "pytorch_model.bin");
  EXPECT_CONTAINS(r.status().message(), "never loads pickle");
  EXPECT_CONTAINS(r.status().message(), "safetensors");

  fs::remove(dir / "pytorch_model.bin");
  ASSERT_TRUE(write_file_atomic(dir / "weights.pth", std::string("x")).is_ok());
  EXPECT_CONTAINS(load_checkpoint(dir).status().message(), "weights.pth");

  fs::remove(dir / "weights.pth");
  auto empty = load_checkpoint(dir);
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(empty.status().message(), "has no model.safetensors");
}

TEST(Checkpoint, LoadRejectsMismatchAndMissingConfig) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto c = small_config();
  auto six = c;
  six.n_layers = 6;
  ASSERT_TRUE(write_safetensors(dir / "model.safetensors", random_weights(six, 6), {{"format", "pt"}}).is_ok());
  auto no_config = load_checkpoint(dir);
  EXPECT_CONTAINS(no_config.status().message(), "has no config.json");
  ASSERT_TRUE(write_file_atomic(dir / "config.json", to_hf_config_json(c)).is_ok());
  auto r = load_checkpoint(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_CONTAINS(r.status().message(), "config.json says 2 layers, weights have 6 (model.layers.5.*)");
  EXPECT_CONTAINS(r.status().message(), dir.string());
  EXPECT_CONTAINS(load_checkpoint(dir / "nope").status().message(), "is not a folder");
}

TEST(Checkpoint, LoadDropsRotaryBuffersAndTiedHead) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto c = small_config();  // tied
  auto w = random_weights(c, 7);
  auto extra = w;
  extra.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", torch::ones({2}));
  extra.emplace_back("lm_head.weight", torch::zeros({16, 8}));
  ASSERT_TRUE(write_file_atomic(dir / "config.json", to_hf_config_json(c)).is_ok());
  ASSERT_TRUE(write_safetensors(dir / "model.safetensors", extra).is_ok());
  auto ck = load_checkpoint(dir);
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  expect_same_tensors(ck->tensors, w);
}

TEST(Checkpoint, SaveRefusesBadInput) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto c = small_config();
  auto w = random_weights(c, 8);
  w.pop_back();  // model.norm.weight
  EXPECT_EQ(save_checkpoint(dir, c, w).message(), "[checkpoint] missing tensor model.norm.weight");
  auto dup = random_weights(c, 8);
  dup.push_back(dup.front());
  EXPECT_CONTAINS(save_checkpoint(dir, c, dup).message(), "duplicate tensor model.embed_tokens.weight");
  EXPECT_FALSE(save_checkpoint(dir, c, random_weights(c, 8), -1).is_ok());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
}

}  // namespace
}  // namespace meshrl::model

// Adapter folders (PEFT layout): a saved adapter reads back to the same forward, PEFT's names and
// config keys are used, and an adapter that does not fit the model is refused with the reason.
//   ctest --test-dir build -R AdapterIo
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "model/lora_io.h"
#include "model/safetensors_torch.h"
#include "support/small_model.h"
#include "support/temp_dir.h"

using namespace meshrl::model;
namespace fs = std::filesystem;

namespace {
ModelConfig cfg() { return meshrl::test_support::small_model_config(/*attention_bias=*/true); }

// A base with seeded weights and a trained-looking adapter (random B) saved into `dir`.
Transformer saved_adapter(const fs::path& dir, const LoraConfig& lora) {
  Transformer m(cfg());
  m->init_weights(4, 0.1);
  EXPECT_TRUE(m->attach_lora(lora).is_ok());
  {
    torch::NoGradGuard no_grad;
    auto gen = at::detail::createCPUGenerator(8);
    for (int64_t l = 0; l < 2; ++l)
      for (auto t : lora.targets) m->lora()->b(l, t).normal_(0.0, 0.2, gen);
  }
  EXPECT_TRUE(save_adapter(dir, *m, "test-base").is_ok());
  return m;
}

Transformer fresh_base() {
  Transformer m(cfg());
  m->init_weights(4, 0.1);
  return m;
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(meshrl::read_file(dir / "adapter_config.json").value());
  edit(j);
  ASSERT_TRUE(meshrl::write_file_atomic(dir / "adapter_config.json", j.dump()).is_ok());
}

std::string load_error(const fs::path& dir) {
  auto m = fresh_base();
  auto r = load_adapter(dir, *m);
  EXPECT_FALSE(r.is_ok());
  EXPECT_FALSE(m->lora());  // a refused adapter leaves the model untouched
  return r.is_ok() ? "" : r.status().message();
}

TEST(AdapterIo, RoundTripGivesTheSameForward) {
  const meshrl::test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "roundtrip";
  LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 12;
  lora.seed = 5;
  lora.targets = parse_lora_targets({"q_proj", "v_proj", "down_proj"}, "test").value();
  auto trained = saved_adapter(dir, lora);

  auto cfg_json = nlohmann::json::parse(meshrl::read_file(dir / "adapter_config.json").value());
  EXPECT_EQ(cfg_json["peft_type"], "LORA");
  EXPECT_EQ(cfg_json["r"], 4);
  EXPECT_EQ(cfg_json["lora_alpha"], 12.0);
  EXPECT_EQ(cfg_json["target_modules"], nlohmann::json({"q_proj", "v_proj", "down_proj"}));
  EXPECT_EQ(cfg_json["base_model_name_or_path"], "test-base");
  EXPECT_EQ(cfg_json["meshrl_base_hash"], base_content_hash(*trained));
  auto st = read_safetensors(dir / "adapter_model.safetensors").value();
  EXPECT_EQ(st.size(), 2u * 3u * 2u);
  ASSERT_TRUE(st.count("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"));
  EXPECT_EQ(st.at("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight").sizes().vec(), (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(st.at("base_model.model.model.layers.0.mlp.down_proj.lora_B.weight").sizes().vec(), (std::vector<int64_t>{32, 4}));

  auto m = fresh_base();
  auto info = load_adapter(dir, *m).value();
  EXPECT_EQ(info.lora.rank, 4);
  EXPECT_EQ(info.lora.seed, 5u);
  auto tokens = torch::randint(0, 50, {2, 6}, at::detail::createCPUGenerator(1), torch::kInt64);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(m->forward(tokens), trained->forward(tokens)));
}

TEST(AdapterIo, AllLinearShorthandIsEveryTarget) {
  const meshrl::test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "alllinear";
  saved_adapter(dir, LoraConfig{});
  edit_config(dir, [](auto& j) { j["target_modules"] = "all-linear"; });
  EXPECT_EQ(load_adapter_config(dir).value().lora.targets.size(), 7u);
}

TEST(AdapterIo, WrongBaseIsRefused) {
  const meshrl::test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "wrongbase";
  saved_adapter(dir, LoraConfig{});
  Transformer other(cfg());
  other->init_weights(99, 0.1);  // same shapes, other weights
  auto r = load_adapter(dir, *other);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("hash"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("test-base"), std::string::npos);
}

TEST(AdapterIo, RankOrShapeMismatchIsRefused) {
  const meshrl::test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "rank";
  LoraConfig lora;
  lora.rank = 4;
  saved_adapter(dir, lora);
  edit_config(dir, [](auto& j) { j["r"] = 8; });
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("shape of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("r = 8"), std::string::npos) << msg;
}

TEST(AdapterIo, UnknownOrMissingTargetsAreRefused) {
  const meshrl::test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "targets";
  LoraConfig lora;
  lora.targets = parse_lora_targets({"q_proj"}, "test").value();
  saved_adapter(dir, lora);
  edit_config(dir, [](auto& j) { j["target_modules"] = {"q_proj", "c_attn"}; });
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("unknown target module 'c_attn'"), std::string::npos) << msg;
  edit_config(dir, [](auto& j) { j["target_modules"] = {"q_proj", "k_proj"}; });  // k_proj has no tensors
  msg = load_error(dir);
  EXPECT_NE(msg.find("missing tensor base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight"), std::string::npos) << msg;
  edit_config(dir, [](auto& j) { j["target_modules"] = nlohmann::json::array(); });
  load_error(dir);
  edit_config(dir, [](auto& j) {
    j["target_modules"] = {"q_proj"};
    j["use_dora"] = true;
  });
  msg = load_error(dir);
  EXPECT_NE(msg.find("use_dora"), std::string::npos) << msg;
}

TEST(AdapterIo, ExtraTensorIsRefused) {
  const meshrl::test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "extra";
  LoraConfig lora;
  lora.targets = parse_lora_targets({"q_proj", "o_proj"}, "test").value();
  saved_adapter(dir, lora);
  edit_config(dir, [](auto& j) { j["target_modules"] = {"q_proj"}; });  // o_proj tensors now unexpected
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("unexpected tensor"), std::string::npos) << msg;
}

}  // namespace

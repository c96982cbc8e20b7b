// Training adapters: the run file's [lora] section, a GRPO run that changes only B (the base and A
// stay bit-identical), a KL reference that copies the adapters, and checkpoints that carry the
// adapter folder.
//   OMP_NUM_THREADS=1 build/tests/test_rl --gtest_filter='Lora*'
#include <gtest/gtest.h>

#include <filesystem>

#include "model/lora_io.h"
#include "rl/lora_setup.h"
#include "rl/optimizer.h"
#include "rl/policy_folder.h"
#include "rl/run_config.h"
#include "rl/train_run.h"
#include "rl/trainer.h"
#include "support/micro_policy.h"
#include "support/temp_dir.h"

namespace meshrl::rl {
namespace {

namespace fs = std::filesystem;

std::map<std::string, torch::Tensor> snapshot(model::TransformerImpl& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : m.named_parameters()) out[item.key()] = item.value().detach().clone();
  return out;
}

TEST(LoraRunConfig, SectionParsesAndIsChecked) {
  auto c = parse_run_config("[lora]\nrank = 8\nalpha = 32.0\ntargets = \"q, v_proj\"\nseed = 7\n", "run.toml").value();
  EXPECT_EQ(c.lora.rank, 8);
  auto lora = lora_config_of(c.lora, "run.toml").value();
  ASSERT_TRUE(lora);
  EXPECT_EQ(lora->targets, (std::vector<model::LoraTarget>{model::LoraTarget::kQ, model::LoraTarget::kV}));
  EXPECT_DOUBLE_EQ(lora->scale(), 4.0);
  EXPECT_EQ(lora->seed, 7u);
  // The effective config reads back to the same section.
  auto again = parse_run_config(run_config_to_toml(c), "config.toml").value();
  EXPECT_EQ(again.lora.targets, c.lora.targets);
  EXPECT_EQ(again.lora.rank, 8);
  // Off by default.
  EXPECT_FALSE(lora_config_of(RunConfig{}.lora, "x").value());

  auto bad = parse_run_config("[lora]\nrank = 4\ntargets = \"q_proj,lm_head\"\n", "run.toml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("[lora] targets"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("lm_head"), std::string::npos);
  EXPECT_FALSE(parse_run_config("[lora]\nrank = -1\n", "run.toml").is_ok());
  EXPECT_FALSE(parse_run_config("[lora]\nalpha = 0.0\n", "run.toml").is_ok());
  EXPECT_FALSE(parse_run_config("[lora]\nrang = 4\n", "run.toml").is_ok());
  EXPECT_FALSE(parse_run_config("x", "run.toml", {"--lora.rank=abc"}).is_ok());
}

TEST(LoraTraining, OptimizerMovesOnlyB) {
  auto policy = test_support::micro_policy(1);
  LoraSection s;
  s.rank = 4;
  ASSERT_TRUE(setup_lora(s, *policy.model, "test").value());
  {
    // B starts at zero; give it a value so A's gradient path is live too (A must still not move).
    torch::NoGradGuard no_grad;
    for (auto& p : policy.model->parameters())
      if (p.requires_grad()) p.fill_(0.01);
  }
  const auto before = snapshot(*policy.model);
  OptimizerConfig oc;
  oc.schedule.lr = 1e-2;
  Optimizer opt(policy.model->parameters(), oc);
  auto tokens = torch::randint(0, 200, {2, 8}, at::detail::createCPUGenerator(3), torch::kInt64);
  policy.model->forward(tokens).log_softmax(-1).select(-1, 5).mean().backward();
  opt.step();
  int64_t moved_b = 0;
  for (const auto& item : policy.model->named_parameters()) {
    const bool same = torch::equal(item.value(), before.at(item.key()));
    const bool is_b = item.key().size() > 2 && item.key().substr(item.key().size() - 2) == "_B";
    if (!is_b) EXPECT_TRUE(same) << item.key() << " moved but is frozen";
    if (is_b && !same) ++moved_b;
  }
  EXPECT_EQ(moved_b, 2 * 7);  // every B of both layers
}

TEST(LoraTraining, RunTrainsAdaptersAndCheckpointsThem) {
  const test_support::TempDir tmp;
  const fs::path init = tmp.path() / "init";
  auto policy = test_support::micro_policy(2);
  ASSERT_TRUE(save_policy_folder(init, policy.model, *policy.tokenizer, "tiny").is_ok());
  RunConfig c;
  c.model.init = init.string();
  c.task.arithmetic.digits = 1;
  c.task.arithmetic.operators = "+";
  c.task.n_eval = 4;
  c.grpo.steps = 2;
  c.grpo.prompts_per_step = 2;
  c.grpo.group_size = 2;
  c.grpo.max_new_tokens = 4;
  c.grpo.kl_coef = 0.01;  // the reference copy must carry the adapters too
  c.eval.n_eval = 4;
  c.lora.rank = 2;
  c.lora.targets = "q_proj,down_proj";
  const fs::path run = tmp.path() / "run";
  std::vector<std::string> lines;
  TrainRunCallbacks cb;
  cb.log = [&](const std::string& s) { lines.push_back(s); };
  auto sum = run_training(c, run, cb).value();
  EXPECT_EQ(sum.steps, 2);
  // The checkpoint's base is the untouched init, and its adapter loads back onto it.
  const fs::path ckpt = sum.final_checkpoint;
  ASSERT_TRUE(fs::exists(ckpt / "adapter" / "adapter_config.json"));
  auto base = rollout::load_policy(ckpt.string()).value();
  auto orig = rollout::load_policy(init.string()).value();
  EXPECT_EQ(model::base_content_hash(*base.model), model::base_content_hash(*orig.model));
  auto info = model::load_adapter(ckpt / "adapter", *base.model).value();
  EXPECT_EQ(info.lora.rank, 2);
  EXPECT_EQ(info.lora.targets.size(), 2u);
  bool logged = false;
  for (const auto& l : lines) logged = logged || l.rfind("lora: r = 2", 0) == 0;
  EXPECT_TRUE(logged);
  fs::remove_all(init);
  fs::remove_all(run);
}

}  // namespace
}  // namespace meshrl::rl

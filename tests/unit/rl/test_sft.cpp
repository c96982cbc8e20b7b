// SFT: the batch masks prompts, the loss falls, the folder it writes loads back identically.
//   OMP_NUM_THREADS=1 build/tests/test_rl --gtest_filter='Sft*:PolicyFolder*:WarmStart*'
#include <gtest/gtest.h>

#include <filesystem>

#include "model/model_io.h"
#include "rl/evaluate.h"
#include "rl/policy_folder.h"
#include "rl/sft.h"
#include "rl/warm_start.h"
#include "rollout/policy.h"
#include "support/micro_policy.h"
#include "support/temp_dir.h"
#include "tasks/task.h"

namespace meshrl::rl {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<tasks::Task> one_digit_addition() {
  tasks::TaskConfig c;
  c.arithmetic.digits = 1;
  c.arithmetic.operators = "+";
  c.n_eval = 10;
  return tasks::make_task(c).value();
}

TEST(Sft, BatchMasksThePromptAndKeepsTheStopNewline) {
  auto task = one_digit_addition();
  auto tok = tokenizer::make_char_tokenizer(264).value();
  const tasks::Problem p{"arithmetic:3+4", "3+4=", "7"};
  const tasks::Problem q{"arithmetic:9+9", "9+9=", "18"};
  auto b = make_sft_batch(*tok, *task, {p, q}).value();
  // "3+4=7\n" (6 tokens) and "9+9=18\n" (7 tokens): T = 7, right-padded with 0.
  ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(b.tokens[0][4].item<int64_t>(), '7');
  EXPECT_EQ(b.tokens[0][5].item<int64_t>(), '\n');
  EXPECT_EQ(b.tokens[0][6].item<int64_t>(), 0);
  // Position t predicts token t+1: row 0 learns '7' (t=3) and '\n' (t=4); row 1 '1','8','\n'.
  const std::vector<float> m0 = {0, 0, 0, 1, 1, 0}, m1 = {0, 0, 0, 1, 1, 1};
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(b.mask[0][t].item<float>(), m0[t]) << "t=" << t;
    EXPECT_EQ(b.mask[1][t].item<float>(), m1[t]) << "t=" << t;
  }
}

TEST(Sft, LossFallsOnOneDigitAddition) {
  torch::manual_seed(0);
  auto policy = test_support::micro_policy(1);
  auto task = one_digit_addition();
  SftSection c;
  c.steps = 60;
  c.batch_size = 32;
  c.lr = 3e-3;
  c.warmup_steps = 5;
  auto r = run_sft(*policy.model, *policy.tokenizer, *task, c).value();
  ASSERT_EQ(r.losses.size(), 60u);
  // From ln(264) ~ 5.6 nats for a uniform guess; 60 steps learn at least the digit/newline format.
  EXPECT_GT(r.first_loss, 4.0);
  EXPECT_LT(r.final_loss, 0.5 * r.first_loss);
  EXPECT_GT(r.tokens, 60 * 32 * 2 - 1);
}

TEST(Sft, StopsOnceTrainingAccuracyReachesTheTarget) {
  torch::manual_seed(0);
  auto policy = test_support::micro_policy(1);
  auto task = one_digit_addition();
  SftSection c;
  c.steps = 600;
  c.batch_size = 32;
  c.lr = 3e-3;
  c.warmup_steps = 5;
  c.stop_at_pass1 = 0.3;
  c.check_every = 20;
  c.check_problems = 64;
  int64_t calls = 0, checks_seen = 0;
  auto r = run_sft(*policy.model, *policy.tokenizer, *task, c,
                   [&](const SftProgress& p) {
                     ++calls;
                     checks_seen += p.check_pass1 >= 0;
                   },
                   policy.stop_ids)
               .value();
  ASSERT_TRUE(r.reached_target) << "the check never reached 30% in 600 steps";
  ASSERT_FALSE(r.checks.empty());
  // It stopped at the first check that reached the target, every earlier one below it.
  EXPECT_EQ(static_cast<int64_t>(r.losses.size()), r.checks.back().first);
  EXPECT_LT(r.checks.back().first, c.steps);
  EXPECT_GE(r.checks.back().second, c.stop_at_pass1);
  for (size_t i = 0; i + 1 < r.checks.size(); ++i) {
    EXPECT_EQ(r.checks[i].first, static_cast<int64_t>(20 * (i + 1)));
    EXPECT_LT(r.checks[i].second, c.stop_at_pass1);
  }
  EXPECT_EQ(calls, static_cast<int64_t>(r.losses.size()));
  EXPECT_EQ(checks_seen, static_cast<int64_t>(r.checks.size()));
  // The model it returns is the one that passed the check: greedy accuracy on the same training
  // problems, scored independently here, is the last check's.
  policy.model->eval();
  const auto g = greedy_score(*policy.model, *policy.tokenizer, *task, sft_check_problems(*task, c), 4, policy.stop_ids).value();
  EXPECT_DOUBLE_EQ(g.pass_at_1, r.checks.back().second);
}

TEST(Sft, UnreachedTargetRunsEveryStep) {
  torch::manual_seed(0);
  auto policy = test_support::micro_policy(1);
  auto task = one_digit_addition();
  SftSection c;
  c.steps = 30;
  c.batch_size = 8;
  c.stop_at_pass1 = 0.99;
  c.check_every = 10;
  c.check_problems = 16;
  auto r = run_sft(*policy.model, *policy.tokenizer, *task, c, {}, policy.stop_ids).value();
  EXPECT_FALSE(r.reached_target);
  EXPECT_EQ(r.losses.size(), 30u);
  ASSERT_EQ(r.checks.size(), 3u);
  EXPECT_EQ(r.checks[2].first, 30);
}

TEST(Sft, TaskWithoutSolutionsIsAnErrorNamingTheProblem) {
  class NoSolution : public tasks::Task {
   public:
    std::string name() const override { return "nosol"; }
    tasks::Problem sample(uint64_t) const override { return {"nosol:1", "q", "a"}; }
    size_t n_eval() const override { return 1; }
    tasks::Problem eval_problem(size_t) const override { return {"nosol:e", "q", "a"}; }
    Result<tasks::Score> score(const tasks::Problem&, std::string_view) const override { return tasks::Score{}; }
    std::optional<std::string> solution(const tasks::Problem&) const override { return std::nullopt; }
    std::vector<std::string> stop_strings() const override { return {"\n"}; }
  };
  auto tok = tokenizer::make_char_tokenizer(264).value();
  auto r = make_sft_batch(*tok, NoSolution{}, {{"nosol:1", "q", "a"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("nosol:1"), std::string::npos);
}

TEST(PolicyFolder, CharPolicyLoadsBackWithIdenticalLogits) {
  auto policy = test_support::micro_policy(3);
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "policy_folder";
  ASSERT_TRUE(save_policy_folder(dir, policy.model, *policy.tokenizer, "tiny").is_ok());
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / rollout::kCharTokenizerMarker));
  EXPECT_FALSE(fs::exists(dir / "tokenizer.json"));
  auto back = rollout::load_policy(dir.string()).value();
  EXPECT_EQ(back.tokenizer->n_vocab(), 264);
  EXPECT_EQ(back.tokenizer->encode("7+8=").value(), policy.tokenizer->encode("7+8=").value());
  EXPECT_EQ(back.stop_ids, std::vector<int64_t>{tokenizer::kCharImEnd});
  torch::NoGradGuard ng;
  auto x = torch::tensor({{'1', '2', '+', '3', '='}}, torch::kInt64);
  EXPECT_TRUE(torch::equal(policy.model->forward(x), back.model->forward(x)));
  // Saving again over the folder replaces it (atomic swap), leaving no temp folders behind.
  ASSERT_TRUE(save_policy_folder(dir, policy.model, *policy.tokenizer, "tiny").is_ok());
  std::vector<std::string> entries;
  for (auto& e : fs::directory_iterator(tmp.path())) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"policy_folder"});
}

TEST(PolicyFolder, BadMarkerIsRefusedNamingTheField) {
  auto policy = test_support::micro_policy(3);
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path() / "bad_marker";
  ASSERT_TRUE(save_policy_folder(dir, policy.model, *policy.tokenizer, "tiny").is_ok());
  std::FILE* f = std::fopen((dir / rollout::kCharTokenizerMarker).c_str(), "w");
  std::fputs("{\"type\": \"char\", \"n_vocab\": 100}", f);
  std::fclose(f);
  auto r = rollout::load_policy(dir.string());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("n_vocab"), std::string::npos) << r.status().message();
}

TEST(WarmStart, SecondRunReusesTheCachedFolder) {
  RunConfig c;
  c.model.init = "tiny";
  c.task.arithmetic.digits = 1;
  c.sft.steps = 2;
  c.sft.batch_size = 2;
  const test_support::TempDir tmp;
  c.sft.cache_dir = (tmp.path() / "sft_cache").string();
  auto first = ensure_warm_start(c).value();
  EXPECT_TRUE(first.trained);
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(fs::exists(fs::path(first.policy_spec) / "meshrl_sft.json"));
  auto second = ensure_warm_start(c).value();
  EXPECT_FALSE(second.trained);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.policy_spec, first.policy_spec);
  // A different SFT setting is a different warm start.
  c.sft.lr *= 2;
  EXPECT_NE(warm_start_key(c), fs::path(first.policy_spec).filename().string().substr(4));
  // A folder init is used as is, without SFT.
  c.model.init = first.policy_spec;
  auto third = ensure_warm_start(c).value();
  EXPECT_FALSE(third.trained);
  EXPECT_EQ(third.policy_spec, first.policy_spec);
}

TEST(WarmStart, StopRuleIsPartOfTheKeyOnlyWhenOn) {
  RunConfig c;
  c.model.init = "tiny";
  c.sft.steps = 900;
  const std::string off = warm_start_key(c);
  // Off, its check settings do not matter: warm starts cached before the rule existed stay valid.
  c.sft.check_every = 7;
  c.sft.check_problems = 9;
  EXPECT_EQ(warm_start_key(c), off);
  c.sft.stop_at_pass1 = 0.35;
  const std::string on = warm_start_key(c);
  EXPECT_NE(on, off);
  c.sft.check_every = 25;
  EXPECT_NE(warm_start_key(c), on);
  c.sft.stop_at_pass1 = 0.4;
  c.sft.check_every = 7;
  EXPECT_NE(warm_start_key(c), on);
}

}  // namespace
}  // namespace meshrl::rl

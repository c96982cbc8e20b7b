// Run file parsing: defaults, overrides, one-line errors naming the key, round trip.
//   cmake --build build --target test_rl && OMP_NUM_THREADS=1 build/tests/test_rl --gtest_filter='RunConfig*'
#include <gtest/gtest.h>

#include "rl/run_config.h"

namespace meshrl::rl {
namespace {

std::string error_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  auto r = parse_run_config(toml, "run.toml", overrides);
  EXPECT_FALSE(r.is_ok()) << "expected an error for:\n" << toml;
  if (r.is_ok()) return "";
  const std::string m = r.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << "error must be one line: " << m;
  return m;
}

TEST(RunConfig, EmptyFileGivesTheStructDefaults) {
  auto r = parse_run_config("", "run.toml");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const RunConfig d;
  EXPECT_EQ(r->grpo.group_size, d.grpo.group_size);
  EXPECT_EQ(r->grpo.lr, d.grpo.lr);
  EXPECT_EQ(r->model.init, "tiny");
  EXPECT_EQ(r->model.threads, 1);
  EXPECT_EQ(r->task.kind, "arithmetic");
  EXPECT_EQ(r->sft.steps, 0);
}

TEST(RunConfig, ReadsEverySectionAndTheTaskAsDottedPairs) {
  auto r = parse_run_config(R"(
[model]
init = "tiny"
threads = 2
[task]
kind = "arithmetic"
n_eval = 50
countdown.n_numbers = 3
[task.arithmetic]
digits = 1
operators = "+"
[sft]
steps = 10
lr = 1          # an integer is a fine number
[grpo]
group_size = 4
clip_high = 0.3
normalize_std = false
loss_normalization = "sequence"
seed = 7
[eval]
every_steps = 5
pass_k = 4
[checkpoint]
every_steps = 3
)",
                            "run.toml");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->model.threads, 2);
  EXPECT_EQ(r->task.n_eval, 50);
  EXPECT_EQ(r->task.arithmetic.digits, 1);
  EXPECT_EQ(r->task.arithmetic.operators, "+");
  EXPECT_EQ(r->task.countdown.n_numbers, 3);
  EXPECT_EQ(r->sft.steps, 10);
  EXPECT_DOUBLE_EQ(r->sft.lr, 1.0);
  EXPECT_EQ(r->grpo.group_size, 4);
  EXPECT_DOUBLE_EQ(r->grpo.clip_high, 0.3);
  EXPECT_FALSE(r->grpo.normalize_std);
  EXPECT_EQ(r->grpo.loss_normalization, "sequence");
  EXPECT_EQ(r->grpo.seed, 7u);
  EXPECT_EQ(r->eval.every_steps, 5);
  EXPECT_EQ(r->eval.pass_k, 4);
  EXPECT_EQ(r->checkpoint.every_steps, 3);
}

TEST(RunConfig, GroupSizeBelowTwoIsOneLineNamingTheKey) {
  EXPECT_EQ(error_of("[grpo]\ngroup_size = 1\n"), "run.toml: [grpo] group_size must be >= 2, got 1");
}

TEST(RunConfig, OutOfRangeValuesNameTheirKey) {
  EXPECT_NE(error_of("[grpo]\nclip_low = 0\n").find("[grpo] clip_low must be in (0, 1), got 0"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nnegative_scale = 1.5\n").find("[grpo] negative_scale must be in [0, 1], got 1.5"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nclip_high = -0.1\n").find("[grpo] clip_high must be"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nlr = 0\n").find("[grpo] lr must be > 0"), std::string::npos);
  EXPECT_NE(error_of("[sft]\nlr = -1e-3\n").find("[sft] lr must be > 0"), std::string::npos);
  EXPECT_NE(error_of("[sft]\nstop_at_pass1 = 1.0\n").find("[sft] stop_at_pass1 must be in [0, 1)"), std::string::npos);
  EXPECT_NE(error_of("[sft]\ncheck_every = 0\n").find("[sft] check_every must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nloss_normalization = \"tokens\"\n").find("[grpo] loss_normalization"), std::string::npos);
  EXPECT_NE(error_of("[model]\nthreads = 0\n").find("[model] threads"), std::string::npos);
  EXPECT_NE(error_of("[eval]\npass_k = 4\nn_samples = 2\n").find("[eval] n_samples"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nprompts_per_step = 2\ngroup_size = 2\nminibatches = 5\n").find("[grpo] minibatches"),
            std::string::npos);
}

TEST(RunConfig, OverrideValueGivenApartMustBeUtf8) {
  // "--task.jsonl.stop" then its value as the next argument: the value is checked too (fuzz_run_file).
  EXPECT_EQ(error_of("", {"--task.jsonl.stop", std::string("a\xF3w\xB9")}), "command line: an override is not valid UTF-8");
  EXPECT_TRUE(parse_run_config("", "run.toml", {"--task.jsonl.stop", "caf\xC3\xA9"}).is_ok());
}

TEST(RunConfig, UnknownKeysAndSectionsAreErrors) {
  EXPECT_EQ(error_of("[grpo]\ngroup_sise = 4\n"), "run.toml:2:1: [grpo] unknown key 'group_sise'; see configs/README.md");
  EXPECT_NE(error_of("[gpro]\nsteps = 4\n").find("unknown section [gpro]"), std::string::npos);
  EXPECT_NE(error_of("steps = 4\n").find("unknown top-level key 'steps'"), std::string::npos);
  EXPECT_NE(error_of("[task]\narithmetic.digitz = 2\n").find("arithmetic.digitz"), std::string::npos);
}

TEST(RunConfig, WrongTypesNameTheKeyAndWhatArrived) {
  EXPECT_EQ(error_of("[grpo]\nlr = \"fast\"\n"), "run.toml:2:6: [grpo] lr must be a number, got string \"fast\"");
  EXPECT_NE(error_of("[grpo]\nsteps = 1.5\n").find("[grpo] steps must be an integer, got float"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nnormalize_std = 1\n").find("[grpo] normalize_std must be true or false"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nseed = -3\n").find("[grpo] seed must be a non-negative integer"), std::string::npos);
  EXPECT_NE(error_of("[model]\ninit = 3\n").find("[model] init must be a string"), std::string::npos);
  EXPECT_NE(error_of("[task]\narithmetic.digits = \"two\"\n").find("arithmetic.digits"), std::string::npos);
  EXPECT_NE(error_of("[grpo]\nlr = nan\n").find("[grpo] lr must be a finite number"), std::string::npos);
}

TEST(RunConfig, SyntaxErrorsNameFileAndLine) {
  const auto m = error_of("[grpo]\nsteps = = 3\n");
  EXPECT_EQ(m.rfind("run.toml:2:", 0), 0u) << m;
}

TEST(RunConfig, OverridesAreTypedByTheField) {
  auto r = parse_run_config("[grpo]\ngroup_size = 4\n", "run.toml",
                            {"--grpo.group_size=6", "--grpo.lr", "1e-4", "--grpo.normalize_std=false",
                             "--model.init=some/folder", "--task.arithmetic.digits=1", "--task.arithmetic.operators=+",
                             "--task.split_seed=9"});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->grpo.group_size, 6);
  EXPECT_DOUBLE_EQ(r->grpo.lr, 1e-4);
  EXPECT_FALSE(r->grpo.normalize_std);
  EXPECT_EQ(r->model.init, "some/folder");
  EXPECT_EQ(r->task.arithmetic.digits, 1);
  EXPECT_EQ(r->task.arithmetic.operators, "+");
  EXPECT_EQ(r->task.split_seed, 9u);
}

TEST(RunConfig, BadOverridesNameTheKey) {
  EXPECT_NE(error_of("", {"--grpo.steps=abc"}).find("[grpo] steps (command line) must be an integer, got 'abc'"), std::string::npos);
  EXPECT_NE(error_of("", {"--grpo.group_size=1"}).find("[grpo] group_size must be >= 2, got 1"), std::string::npos);
  EXPECT_NE(error_of("", {"--grpo.nope=1"}).find("[grpo] unknown key 'nope'"), std::string::npos);
  EXPECT_NE(error_of("", {"--nope.x=1"}).find("unknown section [nope]"), std::string::npos);
  EXPECT_NE(error_of("", {"--task.arithmetic.digitz=1"}).find("arithmetic.digitz"), std::string::npos);
  EXPECT_NE(error_of("", {"--task.arithmetic.digits=x"}).find("arithmetic.digits"), std::string::npos);
  EXPECT_NE(error_of("", {"--task.arithmetic.digits=9"}).find("arithmetic.digits"), std::string::npos);
  EXPECT_NE(error_of("", {"--grpo"}).find("not an override"), std::string::npos);
  EXPECT_NE(error_of("", {"--grpo.adam_pooled_batches=0"}).find("[grpo] adam_pooled_batches must be in [1, 1024], got 0"),
            std::string::npos);
  EXPECT_NE(error_of("", {"--grpo.adam_pooled_clip=true"}).find("[grpo] adam_pooled_clip must be false unless adam_pooled_batches > 1"),
            std::string::npos);
}

TEST(RunConfig, EffectiveConfigReadsBackToTheSameValues) {
  auto r = parse_run_config("[grpo]\nlr = 3e-5\nclip_high = 0.31\nseed = 12\n[task]\nkind = \"countdown\"\n", "run.toml",
                            {"--eval.pass_k=3", "--sft.cache_dir=x/y"});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::string text = run_config_to_toml(*r);
  auto back = parse_run_config(text, "config.toml");
  ASSERT_TRUE(back.is_ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(run_config_to_json(*back), run_config_to_json(*r));
  EXPECT_DOUBLE_EQ(back->grpo.lr, 3e-5);
  EXPECT_EQ(back->task.kind, "countdown");
  EXPECT_EQ(back->eval.pass_k, 3);
}

}  // namespace
}  // namespace meshrl::rl

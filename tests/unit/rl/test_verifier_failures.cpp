// A verifier that hangs, crashes or prints garbage on some completions costs those samples, not
// the run: they are masked from the loss and from their groups' statistics and counted by kind
// in the step's metrics and in evaluation; past [task] max_failure_rate the step stops with the
// verifier's error. Also `meshrl eval`'s task overrides (a verifier's argv as a JSON array).
//   OMP_NUM_THREADS=1 build/tests/test_rl --gtest_filter='VerifierFailures*:EvalTaskArgs*'
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "rl/evaluate.h"
#include "rl/run_config.h"
#include "rl/trainer.h"
#include "support/micro_policy.h"
#include "support/temp_dir.h"

namespace meshrl::rl {
namespace {

namespace fs = std::filesystem;
using tasks::VerifierFailure;

tasks::Score reward(double r) { return tasks::make_score(r >= 1, true, 0, "scripted"); }
tasks::Score failure(VerifierFailure f) {
  tasks::Score s;
  s.failure = f;
  s.detail = std::string("scripted ") + tasks::verifier_failure_name(f);
  return s;
}

// Prompts from 1-digit addition; score() hands out a fixed list of outcomes in call order (the
// trainer scores rows in order), so every row's reward or failure is known in advance.
class ScriptedTask : public tasks::Task {
 public:
  explicit ScriptedTask(std::vector<tasks::Score> outcomes) : outcomes_(std::move(outcomes)) {
    tasks::TaskConfig c;
    c.arithmetic.digits = 1;
    c.arithmetic.operators = "+";
    inner_ = tasks::make_task(c).value();
  }
  std::string name() const override { return "scripted"; }
  tasks::Problem sample(uint64_t seed) const override { return inner_->sample(seed); }
  size_t n_eval() const override { return inner_->n_eval(); }
  tasks::Problem eval_problem(size_t i) const override { return inner_->eval_problem(i); }
  Result<tasks::Score> score(const tasks::Problem&, std::string_view) const override {
    return outcomes_[calls_++ % outcomes_.size()];
  }
  std::optional<std::string> solution(const tasks::Problem& p) const override { return inner_->solution(p); }
  std::vector<std::string> stop_strings() const override { return inner_->stop_strings(); }

 private:
  std::unique_ptr<tasks::Task> inner_;
  std::vector<tasks::Score> outcomes_;
  mutable std::atomic<size_t> calls_{0};
};

// Group 0: {1, timeout, 0, 1}; group 1: {crash, garbage, 1, 0}.
std::vector<tasks::Score> two_groups_with_failures() {
  return {reward(1), failure(VerifierFailure::kTimeout), reward(0), reward(1),
          failure(VerifierFailure::kCrash), failure(VerifierFailure::kGarbage), reward(1), reward(0)};
}

GrpoSection two_groups_of_four() {
  GrpoSection g;
  g.steps = 10;
  g.prompts_per_step = 2;
  g.group_size = 4;
  g.max_new_tokens = 4;
  g.lr = 1e-3;
  return g;
}

TEST(VerifierFailures, FailedRowsAreMaskedFromAdvantagesAndCountedByKind) {
  auto task = std::make_shared<ScriptedTask>(two_groups_with_failures());
  GrpoTrainer t(test_support::micro_policy(0), task, two_groups_of_four());
  auto r = t.generate_rollouts(t.sample_prompts()).value();
  ASSERT_TRUE(t.score(r).is_ok());
  EXPECT_TRUE(torch::equal(r.scored, torch::tensor({true, false, true, true, false, false, true, true}))) << r.scored;
  EXPECT_TRUE(torch::equal(r.rewards, torch::tensor({1.f, 0.f, 0.f, 1.f, 0.f, 0.f, 1.f, 0.f}))) << r.rewards;
  EXPECT_EQ(r.verifier_failures.timeout, 1);
  EXPECT_EQ(r.verifier_failures.crash, 1);
  EXPECT_EQ(r.verifier_failures.garbage, 1);
  EXPECT_EQ(r.scores[5].failure, VerifierFailure::kGarbage);
  // Group 0 scored {1, 0, 1}: mean 2/3, sample std sqrt(1/3) -> {0.57735, 0, -1.1547, 0.57735}.
  // Group 1 scored {1, 0}: mean 1/2, sample std sqrt(1/2) -> {0, 0, 0.70711, -0.70711}.
  const auto adv = t.compute_advantages(r);
  EXPECT_TRUE(torch::allclose(adv, torch::tensor({0.57735f, 0.f, -1.15470f, 0.57735f, 0.f, 0.f, 0.70711f, -0.70711f}), 1e-4, 1e-4)) << adv;
  const auto st = t.train_step(r, adv);
  EXPECT_EQ(st.groups_kept, 2);
  EXPECT_EQ(st.updates, 1);
  int64_t scored_tokens = 0;
  for (int64_t row : {0, 2, 3, 6, 7}) scored_tokens += static_cast<int64_t>(r.completions[row].token_ids.size());
  EXPECT_EQ(st.tokens, scored_tokens);  // the failed rows' tokens are not in the loss
}

TEST(VerifierFailures, AFailedRowHasZeroLossWeight) {
  // The same rollouts trained twice, once with a huge advantage put on a failed row: if that row
  // had any weight in the loss, the two updates would differ.
  auto task = std::make_shared<ScriptedTask>(two_groups_with_failures());
  GrpoSection g = two_groups_of_four();
  g.filter_equal_groups = false;  // also when no group is dropped
  GrpoTrainer a(test_support::micro_policy(0), task, g), b(test_support::micro_policy(0), task, g);
  auto r = a.generate_rollouts(a.sample_prompts()).value();
  ASSERT_TRUE(a.score(r).is_ok());
  const auto adv = a.compute_advantages(r);
  EXPECT_EQ(adv[1].item<float>(), 0.f);
  auto loud = adv.clone();
  loud[1] = 100.f;
  loud[4] = -100.f;
  const auto sa = a.train_step(r, adv), sb = b.train_step(r, loud);
  EXPECT_EQ(sa.loss, sb.loss);
  auto pa = a.policy().model->parameters(), pb = b.policy().model->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
}

TEST(VerifierFailures, StepGoesOnAndReportsFailuresInItsMetrics) {
  auto task = std::make_shared<ScriptedTask>(two_groups_with_failures());
  GrpoTrainer t(test_support::micro_policy(0), task, two_groups_of_four());
  auto m = t.step();
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->samples, 8);
  EXPECT_EQ(m->scored, 5);
  EXPECT_EQ(m->verifier_failures.timeout, 1);
  EXPECT_EQ(m->verifier_failures.crash, 1);
  EXPECT_EQ(m->verifier_failures.garbage, 1);
  EXPECT_NEAR(m->reward_mean, 3.0 / 5.0, 1e-6);       // over the 5 scored completions
  EXPECT_DOUBLE_EQ(m->correct_rate, 3.0 / 8.0);       // a failed one is not correct
  EXPECT_NEAR(m->reward_std, std::sqrt(0.24), 1e-6);  // population std of {1, 0, 1, 1, 0}
  const auto j = step_metrics_to_json(*m);
  EXPECT_EQ(j["verifier_failures"], (nlohmann::json{{"timeout", 1}, {"crash", 1}, {"garbage", 1}}));
  EXPECT_EQ(j["scored"], 5);
}

// A real external verifier (/bin/sh) that misbehaves by call number: call n (from 0) hangs when
// n % 8 == 1, crashes when n % 8 == 3, prints garbage when n % 8 == 5, else gives reward
// (n / 2) % 2: calls 0, 2, 4, 6, 7 of every 8 give 0, 1, 0, 1, 1.
struct CountingVerifier {
  test_support::TempDir tmp;
  fs::path dir = tmp.path();
  std::string prompts, script;
  CountingVerifier() {
    prompts = (dir / "p.jsonl").string();
    std::ofstream p(prompts);
    for (int i = 0; i < 40; ++i) p << "{\"prompt\": \"" << i % 10 << "+" << i / 10 << "=\"}\n";
    script = (dir / "v.sh").string();
    std::ofstream(script) << "#!/bin/sh\n"
                             "cat >/dev/null\n"
                             "f='" << (dir / "n").string() << "'\n"
                             "n=$(cat \"$f\" 2>/dev/null || echo 0)\n"
                             "echo $((n + 1)) > \"$f\"\n"
                             "case $((n % 8)) in\n"
                             "  1) sleep 10 ;;\n"
                             "  3) exit 3 ;;\n"
                             "  5) echo 'not a reward' ;;\n"
                             "  *) echo $(((n / 2) % 2)) ;;\n"
                             "esac\n";
    fs::permissions(script, fs::perms::owner_all, fs::perm_options::add);
  }
  tasks::TaskConfig config(double max_failure_rate, int failure_window) const {
    tasks::TaskConfig c;
    c.kind = "command";
    c.jsonl.path = prompts;
    c.eval_fraction = 0.5;
    c.command.argv = {script};
    c.command.timeout_ms = 200;
    c.max_failure_rate = max_failure_rate;
    c.failure_window = failure_window;
    return c;
  }
};

TEST(VerifierFailures, RunGoesOnWithACommandVerifierThatFailsSometimes) {
  CountingVerifier v;
  std::shared_ptr<const tasks::Task> task = tasks::make_task(v.config(0.5, 8)).value();  // 4 of 8 may fail
  GrpoTrainer t(test_support::micro_policy(0), task, two_groups_of_four());
  for (int s = 0; s < 2; ++s) {
    auto m = t.step();
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(m->verifier_failures.timeout, 1);
    EXPECT_EQ(m->verifier_failures.crash, 1);
    EXPECT_EQ(m->verifier_failures.garbage, 1);
    EXPECT_EQ(m->scored, 5);
    EXPECT_EQ(m->train.groups_kept, 2);  // groups {0, -, 1, -} and {0, -, 1, 1}: both have signal
  }
}

TEST(VerifierFailures, PastTheRateTheStepStopsWithTheVerifiersError) {
  CountingVerifier v;
  std::shared_ptr<const tasks::Task> task = tasks::make_task(v.config(0.25, 8)).value();  // 2 of 8 may fail
  GrpoTrainer t(test_support::micro_policy(0), task, two_groups_of_four());
  auto m = t.step();  // calls 0..5: timeout, crash, then garbage is the third failure
  ASSERT_FALSE(m.is_ok());
  const std::string& msg = m.status().message();
  EXPECT_NE(msg.find("failed on 3 of the last 6 calls (timeout 1, crash 1, garbage 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_failure_rate = 0.25"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a reward"), std::string::npos) << msg;
  EXPECT_EQ(t.step_count(), 0);  // no update was made from the step
}

TEST(VerifierFailures, EvaluationCountsAFailedCompletionAsWrong) {
  CountingVerifier v;
  auto task = tasks::make_task(v.config(0.5, 100)).value();
  auto policy = test_support::micro_policy(1);
  EvalOptions o;
  o.n_problems = 8;  // greedy calls 0..7: rewards 0, -, 1, -, 0, -, 1, 1 (calls 1, 3, 5 failed)
  o.max_new_tokens = 2;
  ASSERT_GE(task->n_eval(), 8u);
  auto r = evaluate(*policy.model, *policy.tokenizer, *task, o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->verifier_failures.timeout, 1);
  EXPECT_EQ(r->verifier_failures.crash, 1);
  EXPECT_EQ(r->verifier_failures.garbage, 1);
  EXPECT_DOUBLE_EQ(r->pass_at_1, 3.0 / 8.0);  // a failed call is not a solved problem
  EXPECT_EQ(eval_result_to_json(*r)["verifier_failures"]["crash"], 1);

  // Past the rate, evaluation stops too.
  CountingVerifier strict;
  auto strict_task = tasks::make_task(strict.config(0.0, 100)).value();
  auto e = evaluate(*policy.model, *policy.tokenizer, *strict_task, o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("max_failure_rate = 0"), std::string::npos) << e.status().message();
}

TEST(EvalTaskArgs, AVerifiersArgvIsAJsonArray) {
  auto c = task_config_from_args("command", {"--task.jsonl.path=p.jsonl", "--task.command.argv=[\"python3\", \"v.py\"]",
                                             "--task.command.timeout_ms=300", "--task.max_failure_rate=0.3"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->kind, "command");
  EXPECT_EQ(c->command.argv, (std::vector<std::string>{"python3", "v.py"}));
  EXPECT_EQ(c->jsonl.path, "p.jsonl");
  EXPECT_EQ(c->command.timeout_ms, 300);
  EXPECT_EQ(c->max_failure_rate, 0.3);

  // The value as the next argument, the argv before the path, and one bare string.
  c = task_config_from_args("command", {"--task.command.argv", "[\"/bin/sh\", \"-c\", \"echo 1\"]", "--task.jsonl.path", "p.jsonl"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->command.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo 1"}));
  c = task_config_from_args("command", {"--task.jsonl.path=p.jsonl", "--task.command.argv=./verify"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->command.argv, (std::vector<std::string>{"./verify"}));
  // Later wins.
  c = task_config_from_args("command", {"--task.jsonl.path=p.jsonl", "--task.command.argv=a", "--task.command.argv=[\"b\"]"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->command.argv, (std::vector<std::string>{"b"}));
}

TEST(EvalTaskArgs, MistakesNameTheKey) {
  auto error_of = [](const std::string& kind, const std::vector<std::string>& args) {
    auto c = task_config_from_args(kind, args);
    return c.is_ok() ? std::string("ok") : c.status().message();
  };
  EXPECT_NE(error_of("command", {"--task.jsonl.path=p.jsonl"}).find("command.argv"), std::string::npos);
  EXPECT_NE(error_of("command", {"--task.command.argv=[\"v\"]"}).find("jsonl.path"), std::string::npos);
  EXPECT_NE(error_of("command", {"--task.jsonl.path=p.jsonl", "--task.command.argv=[1, 2]"}).find("command.argv"), std::string::npos);
  EXPECT_NE(error_of("arithmetic", {"--grpo.lr=1"}).find("unknown option '--grpo.lr=1'"), std::string::npos);
  EXPECT_NE(error_of("arithmetic", {"stray"}).find("unexpected argument 'stray'"), std::string::npos);
  EXPECT_NE(error_of("arithmetic", {"--task.arithmetic.digitz=1"}).find("arithmetic.digitz"), std::string::npos);
  EXPECT_NE(error_of("nope", {}).find("kind"), std::string::npos);
  EXPECT_EQ(error_of("arithmetic", {"--task.arithmetic.digits=3"}), "ok");
}

}  // namespace
}  // namespace meshrl::rl

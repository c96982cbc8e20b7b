// External-command verifier and the subprocess runner under it: normal answers, timeout, crash,
// garbage and huge output (each a failed Score of its kind, not an error), never a hang and never
// a zombie. The verifiers are tiny sh/python3
// scripts written into a scratch directory.
//   build/tests/test_tasks --gtest_filter='Command*:Subprocess*'
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/temp_dir.h"
#include "tasks/command_task.h"
#include "tasks/subprocess.h"

namespace meshrl::tasks {
namespace {

using test_support::TempDir;

class CommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prompts_ = dir_.write("p.jsonl", "{\"prompt\":\"2+2=\",\"answer\":\"4\"}\n{\"prompt\":\"3+3=\",\"answer\":6}\n{\"prompt\":\"q\"}\n");
  }
  void TearDown() override {
    // Every child was reaped: there is nothing left to wait for.
    int st = 0;
    errno = 0;
    EXPECT_EQ(::waitpid(-1, &st, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
  }
  // A task whose verifier is the given shell script.
  std::unique_ptr<Task> with_script(const std::string& body, int timeout_ms = 5000, int64_t max_output = 65536) {
    const std::string script = dir_.write("v" + std::to_string(n_++) + ".sh", "#!/bin/sh\n" + body + "\n", true);
    return with_argv({script}, timeout_ms, max_output);
  }
  std::unique_ptr<Task> with_argv(std::vector<std::string> argv, int timeout_ms = 5000, int64_t max_output = 65536) {
    TaskConfig c;
    c.kind = "command";
    c.jsonl.path = prompts_;
    c.command.argv = std::move(argv);
    c.command.timeout_ms = timeout_ms;
    c.command.max_output_bytes = max_output;
    auto t = make_task(c);
    EXPECT_TRUE(t.is_ok()) << t.status().message();
    return std::move(t).value();
  }

  TempDir dir_;
  std::string prompts_;
  int n_ = 0;
  const Problem p_{"p.jsonl:1", "2+2=", "4"};
};

TEST_F(CommandTest, PythonVerifierJudgesTheCompletion) {
  const std::string py = dir_.write("verify.py",
                                    "import json, sys\n"
                                    "req = json.load(sys.stdin)\n"
                                    "ok = req['completion'].strip() == req['answer']\n"
                                    "print(json.dumps({'reward': 1.0 if ok else 0.0, 'detail': 'saw ' + req['prompt']}))\n");
  auto t = with_argv({"/usr/bin/python3", py});
  auto s = t->score(p_, "4\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->reward, 1.0);
  EXPECT_TRUE(s->correct);
  EXPECT_EQ(s->detail, "saw 2+2=");
  s = t->score(p_, "5\n");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->reward, 0.0);
  EXPECT_FALSE(s->correct);
  EXPECT_FALSE(t->solution(p_).has_value());
}

TEST_F(CommandTest, ReceivesOneJsonObjectWithInvalidUtf8Replaced) {
  const std::string seen = (dir_.path() / "seen.json").string();
  auto t = with_script("cat > '" + seen + "'\necho 0.5");
  auto s = t->score(p_, "4\xFF\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->reward, 0.5);  // a bare number is the reward
  EXPECT_FALSE(s->correct);
  std::ifstream in(seen);
  const auto req = nlohmann::json::parse(in);
  EXPECT_EQ(req["prompt"], "2+2=");
  EXPECT_EQ(req["answer"], "4");
  EXPECT_EQ(req["completion"], "4\xEF\xBF\xBD\n");  // U+FFFD
}

TEST_F(CommandTest, ObjectFieldsOverrideDefaults) {
  auto t = with_script("cat >/dev/null\necho '{\"reward\": 0.25, \"correct\": true, \"format_ok\": false}'");
  auto s = t->score(p_, "4\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->reward, 0.25);
  EXPECT_TRUE(s->correct);
  EXPECT_FALSE(s->format_ok);
}

TEST_F(CommandTest, TimeoutKillsTheWholeGroupQuickly) {
  // The script's own child (sleep) holds stdout open too; the group kill must take it down.
  auto t = with_script("sleep 10 &\nsleep 10\necho 1", 300);
  const auto start = std::chrono::steady_clock::now();
  auto s = t->score(p_, "4\n");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->failure, VerifierFailure::kTimeout);
  EXPECT_EQ(s->reward, 0.0);
  EXPECT_FALSE(s->correct);
  EXPECT_NE(s->detail.find("did not finish within 300 ms"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("p.jsonl:1"), std::string::npos);
  EXPECT_LT(seconds, 5.0);  // generous bound on a loaded machine; the script alone would take 10 s
}

TEST_F(CommandTest, CrashIsAFailureWithItsExitCodeAndStderr) {
  auto t = with_script("echo 'verifier broke' >&2\nexit 3");
  auto s = t->score(p_, "4\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->failure, VerifierFailure::kCrash);
  EXPECT_NE(s->detail.find("exited with code 3"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("verifier broke"), std::string::npos);

  auto k = with_script("echo 1\nkill -9 $$");
  s = k->score(p_, "4\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->failure, VerifierFailure::kCrash);
  EXPECT_NE(s->detail.find("killed by signal 9"), std::string::npos) << s->detail;
}

TEST_F(CommandTest, GarbageOutputIsAFailure) {
  for (const std::string out : {"echo hello", "echo '{\"score\": 1}'", "echo '{\"reward\": \"high\"}'", "true", "echo '[1]'",
                                "echo '1 2'"}) {
    auto t = with_script("cat >/dev/null\n" + out);
    auto s = t->score(p_, "4\n");
    ASSERT_TRUE(s.is_ok()) << out << ": " << s.status().message();
    EXPECT_EQ(s->failure, VerifierFailure::kGarbage) << out;
    EXPECT_EQ(s->reward, 0.0);
    EXPECT_NE(s->detail.find("expected a number or {\"reward\": x}"), std::string::npos) << s->detail;
  }
}

TEST_F(CommandTest, HugeOutputIsCutOffTheProgramKilledAndCountedAsGarbage) {
  auto t = with_script("yes", 5000, 1000);  // would never stop by itself
  auto s = t->score(p_, "4\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->failure, VerifierFailure::kGarbage);
  EXPECT_NE(s->detail.find("more than 1000 bytes"), std::string::npos) << s->detail;
}

TEST_F(CommandTest, IgnoringStdinDoesNotKillUsWithSigpipe) {
  auto t = with_script("echo 1");
  auto s = t->score(p_, std::string(4 << 20, 'x'));  // far more than a socket buffer
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->reward, 1.0);
}

TEST_F(CommandTest, MissingProgramIsAnError) {
  auto t = with_argv({(dir_.path() / "no_such_verifier").string()});
  auto s = t->score(p_, "4\n");
  ASSERT_FALSE(s.is_ok());  // no completion can cause this: an error at once, not a failed sample
  EXPECT_NE(s.status().message().find("cannot start"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("command.argv"), std::string::npos) << s.status().message();
}

TEST_F(CommandTest, PromptsComeFromTheFileWithOptionalAnswers) {
  auto t = with_script("cat >/dev/null\necho 1");
  std::set<std::string> prompts;
  for (uint64_t s = 0; s < 100; ++s) prompts.insert(t->sample(s).prompt);
  for (size_t i = 0; i < t->n_eval(); ++i) EXPECT_EQ(prompts.count(t->eval_problem(i).prompt), 0u);
  EXPECT_EQ(prompts.size() + t->n_eval(), 3u);
}

TEST_F(CommandTest, FormatRewardIsRefused) {
  TaskConfig c;
  c.kind = "command";
  c.jsonl.path = prompts_;
  c.command.argv = {"true"};
  c.format_reward = 0.1;
  auto t = make_task(c);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("format_reward"), std::string::npos);
}

TEST(Subprocess, ReturnsOutputAndExitCode) {
  auto r = run_subprocess({"/bin/sh", "-c", "cat; echo err >&2; exit 4"}, "hello", {});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->out, "hello");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_FALSE(r->ok());
  SubprocessOptions small;
  small.max_stderr_bytes = 10;
  r = run_subprocess({"/bin/sh", "-c", "head -c 100000 /dev/zero >&2; echo done"}, "", small);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->out, "done\n");
  EXPECT_EQ(r->err.size(), 10u);  // stderr is capped, and draining it kept the child going
  EXPECT_TRUE(r->ok());
}

TEST(Subprocess, TimeoutAndOversizedOutputAreResultsNotErrors) {
  SubprocessOptions o;
  o.timeout_ms = 200;
  auto r = run_subprocess({"/bin/sh", "-c", "sleep 10"}, "", o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->ok());
  o.timeout_ms = 5000;
  o.max_output_bytes = 100;
  r = run_subprocess({"/bin/sh", "-c", "yes"}, "", o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->output_over);
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(r->ok());
}

}  // namespace
}  // namespace meshrl::tasks

// A verifier that hangs, crashes or prints garbage on some completions: each such call is a
// failed Score of its kind and the next completion is scored as usual; only past [task]
// max_failure_rate over the last failure_window calls does score() stop with an error.
//   build/tests/test_tasks --gtest_filter='VerifierFailure*'
#include <gtest/gtest.h>

#include <chrono>

#include "support/temp_dir.h"
#include "tasks/command_task.h"
#include "tasks/verifier_failures.h"

namespace meshrl::tasks {
namespace {

using test_support::TempDir;

// Completions holding a marker make the verifier misbehave; others get reward 1.
constexpr const char* kMarkerVerifier =
    "#!/bin/sh\n"
    "in=$(cat)\n"
    "case \"$in\" in\n"
    "  *HANG*) sleep 10 ;;\n"
    "  *CRASH*) echo 'no luck' >&2; exit 2 ;;\n"
    "  *GARBAGE*) echo 'reward: lots' ;;\n"
    "  *) echo 1 ;;\n"
    "esac\n";

class VerifierFailureTest : public ::testing::Test {
 protected:
  std::unique_ptr<Task> marker_task(double max_failure_rate, int failure_window) {
    TaskConfig c;
    c.kind = "command";
    c.jsonl.path = dir_.write("p.jsonl", "{\"prompt\":\"2+2=\"}\n{\"prompt\":\"3+3=\"}\n");
    c.command.argv = {dir_.write("v.sh", kMarkerVerifier, true)};
    c.command.timeout_ms = 250;
    c.max_failure_rate = max_failure_rate;
    c.failure_window = failure_window;
    auto t = make_task(c);
    EXPECT_TRUE(t.is_ok()) << t.status().message();
    return std::move(t).value();
  }

  TempDir dir_;
  const Problem p_{"p.jsonl:1", "2+2=", ""};
};

TEST_F(VerifierFailureTest, EachMarkedCompletionFailsByKindAndTheOthersAreScored) {
  auto t = marker_task(0.5, 10);  // up to 5 failures in 10 calls
  auto ok = t->score(p_, "4\n");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_FALSE(ok->failed());
  EXPECT_EQ(ok->reward, 1.0);

  const auto t0 = std::chrono::steady_clock::now();
  auto hang = t->score(p_, "HANG\n");
  const double hang_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(hang.is_ok()) << hang.status().message();
  EXPECT_EQ(hang->failure, VerifierFailure::kTimeout);
  EXPECT_LT(hang_s, 5.0);  // killed near 250 ms, not after the script's 10 s

  auto crash = t->score(p_, "CRASH\n");
  ASSERT_TRUE(crash.is_ok()) << crash.status().message();
  EXPECT_EQ(crash->failure, VerifierFailure::kCrash);
  EXPECT_NE(crash->detail.find("no luck"), std::string::npos) << crash->detail;

  auto garbage = t->score(p_, "GARBAGE\n");
  ASSERT_TRUE(garbage.is_ok()) << garbage.status().message();
  EXPECT_EQ(garbage->failure, VerifierFailure::kGarbage);
  EXPECT_NE(garbage->detail.find("reward: lots"), std::string::npos) << garbage->detail;

  for (auto* s : {&hang, &crash, &garbage}) {
    EXPECT_EQ((*s)->reward, 0.0);
    EXPECT_FALSE((*s)->correct);
    EXPECT_FALSE((*s)->format_ok);
    EXPECT_NE((*s)->detail.find("p.jsonl:1"), std::string::npos) << (*s)->detail;  // names the problem
  }
  ok = t->score(p_, "6\n");  // the verifier still works for the next completion
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->reward, 1.0);
}

TEST_F(VerifierFailureTest, PastTheRateScoringStopsWithAClearError) {
  auto t = marker_task(0.2, 5);  // one failure in 5 calls is allowed, two are not
  auto s = t->score(p_, "CRASH\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->failure, VerifierFailure::kCrash);
  ASSERT_TRUE(t->score(p_, "4\n").is_ok());
  s = t->score(p_, "GARBAGE\n");
  ASSERT_FALSE(s.is_ok());
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("failed on 2 of the last 3 calls (timeout 0, crash 1, garbage 1)"), std::string::npos) << m;
  EXPECT_NE(m.find("max_failure_rate = 0.2"), std::string::npos) << m;
  EXPECT_NE(m.find("failure_window = 5"), std::string::npos) << m;
  EXPECT_NE(m.find("p.jsonl:1"), std::string::npos) << m;  // the last failure, located
  EXPECT_NE(m.find("reward: lots"), std::string::npos) << m;
}

TEST_F(VerifierFailureTest, RateZeroStopsAtTheFirstFailure) {
  auto t = marker_task(0.0, 100);
  ASSERT_TRUE(t->score(p_, "4\n").is_ok());
  auto s = t->score(p_, "CRASH\n");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("exited with code 2"), std::string::npos) << s.status().message();
}

TEST(VerifierFailureWindow, CountsTheLastWindowCallsOnly) {
  VerifierFailureWindow w(0.25, 8);  // at most 2 failures among the last 8 calls
  const auto ok = VerifierFailure::kNone;
  ASSERT_TRUE(w.record(VerifierFailure::kTimeout, "a").is_ok());
  ASSERT_TRUE(w.record(ok, "").is_ok());
  ASSERT_TRUE(w.record(VerifierFailure::kCrash, "b").is_ok());
  EXPECT_EQ(w.recent().total(), 2);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w.record(ok, "").is_ok());
  // 8 calls so far; the 9th pushes the first failure (timeout) out of the window.
  ASSERT_TRUE(w.record(VerifierFailure::kGarbage, "c").is_ok());
  EXPECT_EQ(w.recent().timeout, 0);
  EXPECT_EQ(w.recent().crash, 1);
  EXPECT_EQ(w.recent().garbage, 1);
  const Status st = w.record(VerifierFailure::kCrash, "d");  // 3 of the last 8
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("failed on 3 of the last 8 calls (timeout 0, crash 2, garbage 1)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("the last: d"), std::string::npos) << st.message();
}

TEST(VerifierFailureWindow, AVerifierThatAlwaysFailsStopsBeforeTheWindowFills) {
  VerifierFailureWindow w(0.1, 100);  // 10 failures allowed whenever they come
  int calls = 0;
  while (w.record(VerifierFailure::kCrash, "x").is_ok()) ++calls;
  EXPECT_EQ(calls, 10);
}

TEST(VerifierFailureCounts, AddsByKindAndWritesJson) {
  VerifierFailureCounts c;
  for (auto f : {VerifierFailure::kNone, VerifierFailure::kTimeout, VerifierFailure::kCrash, VerifierFailure::kCrash,
                 VerifierFailure::kGarbage})
    c.add(f);
  EXPECT_EQ(c.total(), 4);
  EXPECT_EQ(verifier_failures_to_json(c), (nlohmann::json{{"timeout", 1}, {"crash", 2}, {"garbage", 1}}));
  EXPECT_STREQ(verifier_failure_name(VerifierFailure::kGarbage), "garbage");
}

TEST(VerifierFailureConfig, KeysAreReadCheckedAndWrittenBack) {
  auto c = task_config_from_json({{"max_failure_rate", 0.25}, {"failure_window", 40}}, "run.toml: [task]");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->max_failure_rate, 0.25);
  EXPECT_EQ(c->failure_window, 40);
  auto back = task_config_from_json(task_config_to_json(*c), "again");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->max_failure_rate, 0.25);
  EXPECT_EQ(back->failure_window, 40);

  auto bad = task_config_from_json({{"max_failure_rate", 1.5}}, "run.toml: [task]");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("max_failure_rate must be in [0, 1]"), std::string::npos) << bad.status().message();
  bad = task_config_from_json({{"failure_window", 0}}, "run.toml: [task]");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("failure_window must be in [1, 1000000]"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace meshrl::tasks

// A coordinator killed (SIGKILL) in the middle of a sequence of commits: the run directory reopens
// consistent, at the ledger's version, and the run continues. The child is this test binary
// re-executed with a filter and MESHRL_STORE_CRASH_DIR set (a fresh process: no fork of a process
// that already runs libtorch's thread pools).
//   OMP_NUM_THREADS=1 ./build-store/tests/test_store --gtest_filter='StoreCrash*'
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "store/run_store.h"
#include "support/temp_dir.h"

extern char** environ;

namespace meshrl::store {
namespace {

namespace fs = std::filesystem;
constexpr const char* kCrashDirEnv = "MESHRL_STORE_CRASH_DIR";
constexpr int kNodes = 2;
constexpr int kKills = 6;

TensorSet weights_at(int64_t version) {
  return {{"layer.weight", "layer.bias"}, {torch::full({64, 64}, static_cast<float>(version)), torch::full({64}, -1.0f * version)}};
}
std::string hash_at(int64_t version) { return "hash-" + std::to_string(version); }

// One coordinator round as the mesh will run it: spool + record each update, write the version,
// commit, drop the spool files.
void run_round(RunStore& store, int64_t version) {
  std::vector<std::pair<UpdateKey, double>> applied;
  for (int n = 0; n < kNodes; ++n) {
    UpdateKey k{"node" + std::to_string(n), version - 1, version};
    auto found = store.ledger().find(k).value();
    if (!found) {  // after a crash the updates of the interrupted round are already received
      ASSERT_TRUE(store.spool_update(k.str(), std::string(1000, static_cast<char>('a' + n))).is_ok());
      ASSERT_TRUE(store.ledger().record_received(k, 16, 1000).value());
    }
    applied.push_back({k, 1.0 / kNodes});
  }
  ASSERT_TRUE(store.write_version(version, hash_at(version), hash_at(version - 1), weights_at(version),
                                  weights_at(-version), "delta-" + std::to_string(version))
                  .is_ok());
  ASSERT_TRUE(store.ledger().commit_round(version, hash_at(version), applied, "quorum").is_ok());
  for (const auto& [k, w] : applied) ASSERT_TRUE(store.remove_spooled(k.str()).is_ok());
}

// The child: resume the run and commit rounds until killed.
TEST(StoreCrashChild, CommitUntilKilled) {
  const char* dir = std::getenv(kCrashDirEnv);
  if (!dir) GTEST_SKIP() << "only runs as the child of StoreCrash.*";
  auto store = RunStore::open(dir).value();
  for (int64_t v = store.ledger().current_version() + 1; v < 100000; ++v) run_round(store, v);
}

pid_t spawn_child(const fs::path& dir) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind(std::string(kCrashDirEnv) + "=", 0) != 0) env_strings.push_back(*e);
  env_strings.push_back(std::string(kCrashDirEnv) + "=" + dir.string());
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=StoreCrashChild.CommitUntilKilled";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;  // the child's gtest banner would clutter this test's output
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// What must hold in a reopened run whatever instant the crash hit.
void expect_consistent(RunStore& store) {
  const int64_t current = store.ledger().current_version();
  EXPECT_EQ(store.list_versions().back(), current);  // orphans above it are gone
  auto rounds = store.ledger().rounds();
  ASSERT_EQ(static_cast<int64_t>(rounds.size()), current + 1);
  for (int64_t v = 0; v <= current; ++v) {
    EXPECT_EQ(rounds[v].version, v);
    EXPECT_EQ(rounds[v].hash, hash_at(v));
  }
  auto rec = store.load_version(current).value();
  EXPECT_EQ(rec.hash, hash_at(current));
  EXPECT_TRUE(torch::equal(rec.weights.tensors[0], weights_at(current).tensors[0]));
  std::map<int64_t, int> applied_per_version;
  for (const auto& u : store.ledger().updates()) {
    if (u.state == UpdateState::kApplied) {
      ASSERT_TRUE(u.applied_version.has_value());
      EXPECT_LE(*u.applied_version, current);
      EXPECT_EQ(u.key.seq, *u.applied_version);  // applied in its own round, once
      ++applied_per_version[*u.applied_version];
    } else {
      EXPECT_EQ(u.state, UpdateState::kReceived);
      EXPECT_EQ(u.key.seq, current + 1);  // only the interrupted round's updates are pending
      EXPECT_TRUE(store.read_spooled(u.key.str()).is_ok()) << "pending update without its payload: " << u.key.str();
    }
  }
  for (int64_t v = 1; v <= current; ++v) EXPECT_EQ(applied_per_version[v], kNodes) << "version " << v;
}

TEST(StoreCrash, KilledMidCommitReopensConsistentAndContinues) {
  test_support::TempDir tmp;
  const auto dir = tmp.path() / "run";
  {
    auto store = RunStore::create(dir, {{"test", "crash"}}).value();
    ASSERT_TRUE(store.write_version(0, hash_at(0), "", weights_at(0), {}, "").is_ok());
    ASSERT_TRUE(store.ledger().commit_initial(hash_at(0)).is_ok());
  }
  int64_t reached = 0;
  int seen_tmp = 0, seen_orphan = 0, seen_pending = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    const pid_t pid = spawn_child(dir);
    ASSERT_GT(pid, 0);
    // Let it commit two rounds (read through a second connection: WAL readers do not block), time
    // the second, then kill it at a point spread over a round: the k-th kill lands k/kKills of
    // the way into the following round.
    auto watcher = Ledger::open(dir / "ledger.sqlite").value();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto wait_for = [&](int64_t v) {
      while (watcher.current_version() < v && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      return std::chrono::steady_clock::now();
    };
    const auto t1 = wait_for(reached + 1);
    const auto t2 = wait_for(reached + 2);
    std::this_thread::sleep_for((t2 - t1) * (kill + 0.5) / kKills);
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped on its own (status " << status << "): did it fail?";
    ASSERT_GE(watcher.current_version(), reached + 2) << "the child made no progress in 60 s";

    // What the kill interrupted (informational: it varies from run to run).
    for (const auto& e : fs::directory_iterator(dir / "versions"))
      if (e.path().filename().string().rfind(".tmp-", 0) == 0) ++seen_tmp;
    char next[32];
    std::snprintf(next, sizeof next, "v-%06lld", static_cast<long long>(watcher.current_version() + 1));
    if (fs::exists(dir / "versions" / next)) ++seen_orphan;
    if (!watcher.pending().empty()) ++seen_pending;

    auto store = RunStore::open(dir).value();
    expect_consistent(store);
    reached = store.ledger().current_version();
  }
  std::printf("[crash] %d kills, reached v%lld: interrupted %d while writing a folder, %d between folder and commit, "
              "%d with received updates pending\n",
              kKills, static_cast<long long>(reached), seen_tmp, seen_orphan, seen_pending);
  // And the run continues in this process from where the last crash left it.
  auto store = RunStore::open(dir).value();
  run_round(store, reached + 1);
  EXPECT_EQ(store.ledger().current_version(), reached + 1);
  expect_consistent(store);
  EXPECT_TRUE(store.ledger().pending().empty());
}

}  // namespace
}  // namespace meshrl::store

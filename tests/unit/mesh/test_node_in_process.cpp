// Real nodes (mesh/node.h run_node) against a real Coordinator in the same process, through the
// in-process client (tests/support/in_process_client.h): no gRPC, the tiny preset, one inner
// step per update. A node runs a sync run to its end on the coordinator's final hash, with the
// samples it claimed equal to the completions it scored; two nodes in async overlap mode end on
// the final version, each acknowledged update on a newer base than the one before; a node rides
// out a partition at its join; a node whose session expired while partitioned joins again and
// its update counts.
//   build/tests/test_mesh --gtest_filter='NodeInProcess*'
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "mesh/coordinator.h"
#include "mesh/node.h"
#include "support/in_process_client.h"

namespace meshrl::mesh {
namespace {

namespace fs = std::filesystem;
using test_support::InProcessClient;

// The tiny preset without a warm start: 2 prompts x 2 samples per inner step, one step per update.
std::string tiny_run(int rounds, const std::string& mesh_extra = "") {
  return R"(
[model]
init = "tiny"
[sft]
steps = 0
[grpo]
prompts_per_step = 2
group_size = 2
max_new_tokens = 4
[eval]
n_eval = 4
[mesh]
inner_steps = 1
codec = "int8"
zstd_level = 0
heartbeat_s = 0.2
rounds = )" + std::to_string(rounds) + "\n" + mesh_extra;
}

// A node's log lines, kept for the test to read (from the node's several threads).
struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lk(mu);
      lines.push_back(l);
    };
  }
  bool has(const std::string& part) {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& l : lines)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
  // Base versions of the acknowledged updates, in the order the node logged them.
  std::vector<int64_t> acknowledged_bases() {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<int64_t> out;
    const std::regex re(R"(^update \w+\.v(\d+)\.s\d+ acknowledged)");
    std::smatch m;
    for (const auto& l : lines)
      if (std::regex_search(l, m, re)) out.push_back(std::stoll(m[1]));
    return out;
  }
};

class NodeInProcess : public ::testing::Test {
 protected:
  void start(const std::string& toml) {
    dir_ = fs::temp_directory_path() /
           ("meshrl-node-inproc-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    CoordinatorOptions o;
    o.run_dir = dir_;
    o.config = parse_mesh_run_config(toml, "test.toml").value();
    o.on_version = [this](const VersionReport& v) {
      std::lock_guard<std::mutex> lk(versions_mu_);
      versions_.push_back(v);
    };
    coord_ = Coordinator::start(o).value();
    client_ = std::make_unique<InProcessClient>(*coord_);
  }
  void TearDown() override {
    if (client_) client_->close();
    if (coord_) coord_->stop();
    fs::remove_all(dir_);
  }
  NodeOptions node(const std::string& name, LogLines& log) const {
    NodeOptions o;
    o.name = name;
    o.give_up_s = 30;
    o.max_backoff_s = 0.1;
    o.log = log.sink();
    return o;
  }

  // Completions behind the updates applied in every version after the first.
  int64_t samples_applied() {
    std::lock_guard<std::mutex> lk(versions_mu_);
    int64_t n = 0;
    for (const VersionReport& v : versions_) n += v.samples;
    return n;
  }

  fs::path dir_;
  std::mutex versions_mu_;
  std::vector<VersionReport> versions_;
  std::unique_ptr<Coordinator> coord_;
  std::unique_ptr<InProcessClient> client_;
};

TEST_F(NodeInProcess, ANodeRunsASyncRunToTheCoordinatorsFinalHash) {
  start(tiny_run(2));
  LogLines log;
  auto r = run_node(*client_, node("paris", log));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const NodeReport& rep = r.value();
  EXPECT_EQ(rep.final_version, 2);
  EXPECT_EQ(rep.final_version, coord_->version());
  EXPECT_EQ(rep.final_hash, coord_->hash());
  EXPECT_EQ(rep.inner_steps, 2);
  EXPECT_EQ(rep.updates_sent, 2);
  EXPECT_EQ(rep.updates_accepted, 2);
  EXPECT_EQ(rep.full_downloads, 1);      // the join's
  EXPECT_EQ(rep.broadcasts_applied, 2);  // every later version by its broadcast
  EXPECT_EQ(log.acknowledged_bases(), (std::vector<int64_t>{0, 1}));
  const NodeRecord rec = coord_->nodes().at("paris");
  EXPECT_EQ(rec.updates_applied, 2);
  // Arithmetic never fails its verifier: every completion is scored and claimed, 2 x 2 per step.
  EXPECT_EQ(samples_applied(), 2 * 2 * 2);
  EXPECT_TRUE(rec.left);
  EXPECT_EQ(rec.last_progress.hash(), coord_->hash());
  EXPECT_EQ(client_->calls("submit"), 2);
}

TEST_F(NodeInProcess, TwoNodesInOverlapModeEndOnTheFinalVersion) {
  start(tiny_run(4, "mode = \"async\"\noverlap = true\n"));
  LogLines log_a, log_b;
  Result<NodeReport> a = Status(StatusCode::kInternal, "not run"), b = Status(StatusCode::kInternal, "not run");
  std::thread ta([&] { a = run_node(*client_, node("zurich", log_a)); });
  std::thread tb([&] { b = run_node(*client_, node("dublin", log_b)); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(coord_->version(), 4);
  for (const NodeReport* rep : {&a.value(), &b.value()}) {
    EXPECT_EQ(rep->final_version, 4);
    EXPECT_EQ(rep->final_hash, coord_->hash());
  }
  EXPECT_GE(a.value().updates_accepted + b.value().updates_accepted, 4);
  // The coordinator takes one update per node per base version: a node waits for a version newer
  // than its last accepted update's base before it cuts the next.
  for (LogLines* log : {&log_a, &log_b}) {
    const std::vector<int64_t> bases = log->acknowledged_bases();
    for (size_t i = 1; i < bases.size(); ++i) EXPECT_GT(bases[i], bases[i - 1]) << "update " << i;
  }
}

TEST_F(NodeInProcess, ANodeRidesOutAPartitionAtItsJoin) {
  start(tiny_run(2));
  client_->set_reachable(false);
  std::thread heal([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    client_->set_reachable(true);
  });
  LogLines log;
  auto r = run_node(*client_, node("toronto", log));
  heal.join();
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_GE(client_->calls("join"), 3);
  EXPECT_EQ(r.value().final_hash, coord_->hash());
}

TEST_F(NodeInProcess, ANodeWhoseLeaseExpiredJoinsAgainAndItsUpdateCounts) {
  start(tiny_run(2, "lease_s = 1\n"));
  LogLines log;
  // Cut the link once the node holds its first version, for longer than its lease.
  std::atomic<bool> done{false};
  std::thread partition([&] {
    while (!done && !log.has("holding version 0")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    client_->set_reachable(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    client_->set_reachable(true);
  });
  auto r = run_node(*client_, node("paris", log));
  done = true;
  partition.join();
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_GE(client_->calls("join"), 2);
  EXPECT_TRUE(log.has("not joined")) << "the coordinator never refused the expired session";
  EXPECT_EQ(r.value().final_version, 2);
  EXPECT_EQ(r.value().final_hash, coord_->hash());
  EXPECT_EQ(coord_->nodes().at("paris").updates_applied, 2);
}

}  // namespace
}  // namespace meshrl::mesh

// The node's session (mesh/node_session.h) and its watch (mesh/node_watch.h) against a scripted
// coordinator: joins retry a name still held by the node's own earlier session, the rate limit
// and transport failures, and stop on any other refusal; a call refused "not joined" rejoins once
// and retries with the new session; transport failures back off until give_up_s without contact;
// the watch thread turns announcements into what the training loops wait on (never an older over
// a newer) and rejoins when its session is gone; heartbeats and the leave carry the progress.
//   build/tests/test_mesh --gtest_filter='NodeSession*:NodeWatch*'
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mesh/node_session.h"
#include "mesh/node_watch.h"
#include "mesh/protocol.h"

namespace meshrl::mesh {
namespace {

// Join answers in the order given ("accept", "io", or a refusal reason); every accepted join gets
// the next session id. The watch sends the queued announcements once each; `watch_not_joined`
// refuses the next watch as the gRPC client reports a refused stream.
class ScriptedCoordinator : public CoordinatorClient {
 public:
  std::deque<std::string> join_script;
  bool watch_not_joined = false;
  std::deque<v1::VersionAnnouncement> to_announce;
  int joins = 0, heartbeats = 0, watches = 0;
  std::vector<v1::JoinRequest> join_requests;
  std::vector<v1::HeartbeatRequest> heartbeat_requests;
  std::vector<v1::LeaveRequest> leave_requests;
  uint64_t next_session = 1;
  mutable std::mutex mu;

  Result<v1::JoinReply> join(const v1::JoinRequest& req) override {
    std::lock_guard<std::mutex> lk(mu);
    ++joins;
    join_requests.push_back(req);
    const std::string what = join_script.empty() ? "accept" : join_script.front();
    if (!join_script.empty()) join_script.pop_front();
    if (what == "io") return io_error("[rpc] Join: connection refused");
    v1::JoinReply r;
    r.set_protocol_version(what == "old_protocol" ? kProtocolVersion + 1 : kProtocolVersion);
    if (what == "accept" || what == "old_protocol") {
      r.set_accepted(true);
      r.set_session(next_session++);
      r.mutable_manifest()->set_run_id("run-1");
      r.mutable_manifest()->set_current_version(0);
    } else {
      r.set_reason(what);
    }
    return r;
  }
  Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest& req) override {
    std::lock_guard<std::mutex> lk(mu);
    ++heartbeats;
    heartbeat_requests.push_back(req);
    v1::HeartbeatReply r;
    r.set_ok(true);
    return r;
  }
  Result<v1::LeaveReply> leave(const v1::LeaveRequest& req) override {
    std::lock_guard<std::mutex> lk(mu);
    leave_requests.push_back(req);
    return v1::LeaveReply();
  }
  Result<Download> download_weights(const std::string&, uint64_t, int64_t, uint64_t) override { return invalid_argument("unused"); }
  Result<Download> download_base(const std::string&, uint64_t, uint64_t) override { return invalid_argument("unused"); }
  Result<Download> get_broadcast(const std::string&, uint64_t, int64_t, uint64_t) override { return invalid_argument("unused"); }
  Result<v1::SubmitReply> submit(const v1::UpdateHeader&, const std::string&) override { return invalid_argument("unused"); }
  Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer&) override { return invalid_argument("unused"); }
  Status watch(const std::string&, uint64_t, const std::function<bool(const v1::VersionAnnouncement&)>& on_version) override {
    std::deque<v1::VersionAnnouncement> batch;
    {
      std::lock_guard<std::mutex> lk(mu);
      ++watches;
      if (watch_not_joined) {
        watch_not_joined = false;
        return io_error("[rpc] WatchVersions: not joined (unknown session or lease expired); join again (grpc code 9)");
      }
      batch.swap(to_announce);
    }
    for (const auto& a : batch)
      if (!on_version(a)) break;
    return Status::ok();
  }
};

NodeOptions fast_options() {
  NodeOptions o;
  o.name = "paris";
  o.max_backoff_s = 0.05;
  o.give_up_s = 30;
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(NodeSession, JoinRetriesItsOwnHeldNameTheRateLimitAndTransportFailures) {
  ScriptedCoordinator c;
  c.join_script = {"io", "'paris' already joined (session 3)", "rate_limited: 31 joins in the last minute", "accept"};
  const NodeOptions o = fast_options();
  NodeTally tally(nullptr);
  NodeSession s(c, o, "public-key", tally, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  auto j = s.join();
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(c.joins, 4);
  // Three backoffs: 0.2 s, then capped at max_backoff_s.
  EXPECT_GE(seconds_since(t0), 0.2 + 0.05 + 0.05 - 0.01);
  EXPECT_EQ(s.session(), 1u);
  EXPECT_EQ(s.run_id(), "run-1");
  EXPECT_EQ(c.join_requests.back().name(), "paris");
  EXPECT_EQ(c.join_requests.back().signing_key(), "public-key");
  EXPECT_EQ(c.join_requests.back().protocol_version(), kProtocolVersion);
}

TEST(NodeSession, JoinStopsOnARefusalRetryingCannotFix) {
  ScriptedCoordinator c;
  c.join_script = {"this node's model is not the run's"};
  const NodeOptions o = fast_options();
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  auto j = s.join();
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("join refused: this node's model is not the run's"), std::string::npos) << j.status().message();
  EXPECT_EQ(c.joins, 1);
}

TEST(NodeSession, JoinStopsWhenTheCoordinatorSpeaksAnotherProtocol) {
  ScriptedCoordinator c;
  c.join_script = {"old_protocol"};
  const NodeOptions o = fast_options();
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  auto j = s.join();
  ASSERT_FALSE(j.is_ok());
  EXPECT_NE(j.status().message().find("protocol version"), std::string::npos) << j.status().message();
  EXPECT_EQ(c.joins, 1);
}

TEST(NodeSession, ACallRefusedNotJoinedRejoinsOnceAndRetriesWithTheNewSession) {
  ScriptedCoordinator c;
  const NodeOptions o = fast_options();
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  ASSERT_TRUE(s.join().is_ok());
  ASSERT_EQ(s.session(), 1u);
  std::vector<uint64_t> sessions_seen;
  auto r = s.with_retry("submit", [&]() -> Result<int> {
    sessions_seen.push_back(s.session());
    if (sessions_seen.size() == 1) return invalid_argument("not joined (unknown session or lease expired); join again");
    return 7;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), 7);
  EXPECT_EQ(sessions_seen, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(c.joins, 2);
  // A second thread refused under the same old session does not join a third time.
  ASSERT_TRUE(s.rejoin(1).is_ok());
  EXPECT_EQ(c.joins, 2);
}

TEST(NodeSession, TransportFailuresAreRetriedAndOtherFailuresReturned) {
  ScriptedCoordinator c;
  const NodeOptions o = fast_options();
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  ASSERT_TRUE(s.join().is_ok());  // contact: give_up_s counts from here
  int calls = 0;
  auto r = s.with_retry("download", [&]() -> Result<int> {
    if (++calls < 3) return io_error("[rpc] DownloadWeights: connection reset");
    return 1;
  });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(calls, 3);

  calls = 0;
  auto bad = s.with_retry("download", [&]() -> Result<int> {
    ++calls;
    return data_loss("hash mismatch");
  });
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(c.joins, 1);  // a refusal that is not "not joined" never rejoins
}

TEST(NodeSession, GivesUpAfterGiveUpSecondsWithoutContact) {
  ScriptedCoordinator c;
  NodeOptions o = fast_options();
  o.give_up_s = 0.3;
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  c.join_script = {"io", "io", "io", "io", "io", "io", "io", "io", "io", "io", "io", "io", "io", "io", "io", "io"};
  const auto t0 = std::chrono::steady_clock::now();
  auto j = s.join();
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().code(), StatusCode::kIoError);
  EXPECT_NE(j.status().message().find("no contact with the coordinator for 0 s"), std::string::npos) << j.status().message();
  EXPECT_LT(seconds_since(t0), 2.0);
  EXPECT_GE(c.joins, 3);
}

TEST(NodeSession, StoppingWakesABackoffAtOnce) {
  ScriptedCoordinator c;
  NodeOptions o = fast_options();
  o.max_backoff_s = 60;
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  ASSERT_TRUE(s.join().is_ok());
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.request_stop();
  });
  const auto t0 = std::chrono::steady_clock::now();
  double delay = 30;
  Status st = s.backoff(delay, "test");
  stopper.join();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("stopped"), std::string::npos) << st.message();
  EXPECT_LT(seconds_since(t0), 5.0);
}

TEST(NodeWatch, FeedsTheLoopsAndRejoinsWhenItsSessionIsGone) {
  ScriptedCoordinator c;
  c.watch_not_joined = true;
  v1::VersionAnnouncement a;
  a.set_version(3);
  a.set_hash("h3");
  c.to_announce.push_back(a);
  const NodeOptions o = fast_options();
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  auto j = s.join();
  ASSERT_TRUE(j.is_ok());
  NodeWatch w(s, tally);
  w.start(j.value().manifest(), /*heartbeat_s=*/0.02);
  ASSERT_TRUE(w.wait_for_version(0).is_ok());
  const Announcement got = w.announced();
  EXPECT_EQ(got.version, 3);
  EXPECT_EQ(got.hash, "h3");
  EXPECT_FALSE(got.finished);
  // The refused watch made the node join again (session 2), and the announcement came after.
  EXPECT_EQ(s.session(), 2u);
  // Heartbeats carry the progress (the version the tally holds).
  tally.set_held(3, "h3");
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard<std::mutex> lk(c.mu);
      if (!c.heartbeat_requests.empty() && c.heartbeat_requests.back().progress().version() == 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard<std::mutex> lk(c.mu);
    ASSERT_FALSE(c.heartbeat_requests.empty());
    EXPECT_EQ(c.heartbeat_requests.back().progress().version(), 3);
    EXPECT_EQ(c.heartbeat_requests.back().session(), 2u);
  }
  w.stop();
  EXPECT_TRUE(s.stopping());
  s.leave(/*report_progress=*/true);
  ASSERT_EQ(c.leave_requests.size(), 1u);
  EXPECT_EQ(c.leave_requests[0].progress().hash(), "h3");
  EXPECT_EQ(c.leave_requests[0].session(), 2u);
}

TEST(NodeWatch, AnOlderAnnouncementNeverReplacesANewerOne) {
  ScriptedCoordinator c;
  for (int v : {5, 4}) {
    v1::VersionAnnouncement a;
    a.set_version(v);
    a.set_hash("h" + std::to_string(v));
    c.to_announce.push_back(a);
  }
  const NodeOptions o = fast_options();
  NodeTally tally(nullptr);
  NodeSession s(c, o, "pk", tally, nullptr);
  auto j = s.join();
  ASSERT_TRUE(j.is_ok());
  NodeWatch w(s, tally);
  w.start(j.value().manifest(), 1.0);
  ASSERT_TRUE(w.wait_for_version(4).is_ok());
  for (int i = 0; i < 50 && c.watches < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  w.stop();
  EXPECT_EQ(w.announced().version, 5);
  EXPECT_EQ(w.announced().hash, "h5");
}

}  // namespace
}  // namespace meshrl::mesh

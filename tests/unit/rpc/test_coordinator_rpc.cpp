// The coordinator over real gRPC on loopback, fed bad input: a node of
// another protocol version, run or model, a duplicate name, updates on unknown or too-old
// versions, of the wrong shape, with NaN, larger than declared or truncated. Each is refused with
// a reason sent back and written in the ledger, and the coordinator keeps serving.
//   build/tests/test_rpc
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "mesh/codec.h"
#include "mesh/content_hash.h"
#include "mesh/coordinator.h"
#include "mesh/protocol.h"
#include "mesh/update_signature.h"
#include "rpc/coordinator_service.h"
#include "rpc/grpc_client.h"
#include "support/loopback_coordinator.h"

namespace meshrl::rpc {
namespace {

namespace v1 = ::meshrl::v1;

// The fixture's run (support/loopback_coordinator.h: kLoopbackRun) is the tiny preset with raw int8
// payloads, so a test can corrupt them.
class CoordinatorRpc : public test_support::LoopbackCoordinator {
 protected:
  void expect_schedule_step_bounded();  // ScheduleStepIsBoundedByTheRunNotByWhatANodeReports
};

TEST_F(CoordinatorRpc, RefusesIncompatibleNodesAndKeepsServing) {
  auto other_protocol = hello("paris");
  other_protocol.set_protocol_version(mesh::kProtocolVersion + 1);
  auto r = client_->join(other_protocol).value();
  EXPECT_FALSE(r.accepted());
  EXPECT_NE(r.reason().find("protocol version"), std::string::npos) << r.reason();

  auto other_run = hello("paris");
  other_run.set_run_id("0123456789abcdef");
  r = client_->join(other_run).value();
  EXPECT_FALSE(r.accepted());
  EXPECT_NE(r.reason().find("run"), std::string::npos) << r.reason();

  auto other_model = hello("paris");
  other_model.set_model_config_hash("ffffffffffffffff");
  r = client_->join(other_model).value();
  EXPECT_FALSE(r.accepted());
  EXPECT_NE(r.reason().find("model"), std::string::npos) << r.reason();

  r = client_->join(hello("Bad/Name")).value();
  EXPECT_FALSE(r.accepted());

  auto no_key = hello("paris");
  no_key.clear_signing_key();
  r = client_->join(no_key).value();
  EXPECT_FALSE(r.accepted());
  EXPECT_NE(r.reason().find("signing key"), std::string::npos) << r.reason();

  auto paris = join("paris");
  ASSERT_TRUE(paris.accepted()) << paris.reason();
  EXPECT_EQ(paris.manifest().current_version(), 0);
  EXPECT_EQ(paris.manifest().current_hash(), coord_->hash());
  auto twice = join("paris");
  EXPECT_FALSE(twice.accepted());
  EXPECT_NE(twice.reason().find("already joined"), std::string::npos) << twice.reason();

  v1::HeartbeatRequest hb;
  hb.set_name("paris");
  hb.set_session(paris.session());
  EXPECT_TRUE(client_->heartbeat(hb).value().ok());
  hb.set_session(paris.session() + 2);
  EXPECT_TRUE(mesh::is_not_joined(client_->heartbeat(hb).value().reason()));

  int refusals = 0;
  for (const auto& e : coord_->store().ledger().node_events()) refusals += e.event == "join_refused";
  EXPECT_EQ(refusals, 6);
}

// The schedule step a joining node is given (Manifest.schedule_step) never runs ahead of the
// run: at version 0 it is 0 however far a node claims to be in its heartbeats, in sync mode (the
// fixture's) and in async mode, where the heartbeats are what it is read from.
TEST_F(CoordinatorRpc, ScheduleStepIsBoundedByTheRunNotByWhatANodeReports) {
  for (const bool async : {false, true}) {
    if (async) restart({"--mesh.mode=async"});
    SCOPED_TRACE(async ? "async" : "sync");
    expect_schedule_step_bounded();
  }
}

void CoordinatorRpc::expect_schedule_step_bounded() {
  auto paris = join("paris");
  ASSERT_TRUE(paris.accepted()) << paris.reason();
  EXPECT_EQ(paris.manifest().schedule_step(), 0);
  v1::HeartbeatRequest hb;
  hb.set_name("paris");
  hb.set_session(paris.session());
  hb.mutable_progress()->set_schedule_step(1'000'000'000);
  ASSERT_TRUE(client_->heartbeat(hb).value().ok());
  auto zurich = join("zurich");
  ASSERT_TRUE(zurich.accepted()) << zurich.reason();
  EXPECT_EQ(zurich.manifest().schedule_step(), 0);
}

TEST_F(CoordinatorRpc, RefusesBadUpdatesWithReasonsInTheLedger) {
  auto j = join("paris");
  ASSERT_TRUE(j.accepted());
  const std::string good = zero_update(j.session(), "paris", 0);

  auto submit = [&](v1::UpdateHeader h, const std::string& payload) {
    mesh::sign_update(h, coord_->run_id(), payload, key_);
    return client_->submit(h, payload).value();
  };
  auto expect_refused = [&](const v1::SubmitReply& r, const std::string& needle) {
    EXPECT_FALSE(r.accepted());
    EXPECT_NE(r.reason().find(needle), std::string::npos) << "reason: " << r.reason();
  };

  // Unknown base version.
  expect_refused(submit(header(j, "paris", 7, 1, good.size()), good), "does not exist");
  // Wrong shape: a one-tensor update.
  mesh::NamedTensors small{{"x"}, {torch::zeros({3})}};
  const std::string wrong = mesh::make_codec({}).value()->encode(small).value();
  expect_refused(submit(header(j, "paris", 0, 2, wrong.size()), wrong), "update paris.v0.s2");
  // NaN: the first int8 block's scale (raw payload, zstd off) overwritten with a NaN.
  std::string nan = good;
  auto parsed = mesh::parse_update(nan, {}).value();
  const float q = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.data() + parsed.tensors[0].stored_offset, &q, 4);
  expect_refused(submit(header(j, "paris", 0, 3, nan.size()), nan), "scale");
  // Larger than declared, and truncated: transport faults, answered but not keyed in the ledger.
  expect_refused(submit(header(j, "paris", 0, 4, good.size() - 10), good), "larger than declared");
  expect_refused(submit(header(j, "paris", 0, 5, good.size() + 10), good), "truncated");
  // Another protocol version inside the update header.
  auto h = header(j, "paris", 0, 6, good.size());
  h.set_protocol_version(99);
  expect_refused(submit(h, good), "protocol version");

  // A good update is acknowledged; its retry gets the same answer, marked duplicate.
  auto ok = submit(header(j, "paris", 0, 10, good.size()), good);
  EXPECT_TRUE(ok.accepted()) << ok.reason();
  auto again = submit(header(j, "paris", 0, 10, good.size()), good);
  EXPECT_TRUE(again.accepted());
  EXPECT_TRUE(again.duplicate());
  // A retry of a refused update also gets its recorded outcome.
  auto refused_again = submit(header(j, "paris", 7, 1, good.size()), good);
  EXPECT_FALSE(refused_again.accepted());
  EXPECT_TRUE(refused_again.duplicate());

  // paris is the only node: its update makes quorum and version 1 appears.
  for (int i = 0; i < 100 && coord_->version() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(coord_->version(), 1);
  // max_staleness = 0: an update on version 0 is now too old.
  expect_refused(submit(header(j, "paris", 0, 11, good.size()), good), "too old");

  // The ledger holds every keyed refusal with its reason, and the good update applied once.
  const auto rows = coord_->store().ledger().updates();
  int rejected = 0, applied = 0;
  for (const auto& row : rows) {
    if (row.state == store::UpdateState::kRejected) {
      ++rejected;
      EXPECT_FALSE(row.reason.empty());
    }
    if (row.state == store::UpdateState::kApplied) {
      ++applied;
      EXPECT_EQ(row.key.seq, 10);
      EXPECT_EQ(row.applied_version.value_or(-1), 1);
    }
  }
  EXPECT_EQ(applied, 1);
  EXPECT_EQ(rejected, 4);  // unknown base, wrong shape, NaN, too old
  int refused_events = 0;
  for (const auto& e : coord_->store().ledger().node_events()) refused_events += e.event == "update_refused";
  EXPECT_EQ(refused_events, 3);  // larger than declared, truncated, protocol

  // Still serving: the broadcast of version 1 is there and a heartbeat is answered.
  auto b = client_->get_broadcast("paris", j.session(), 1);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b.value().hash, coord_->hash());
  v1::HeartbeatRequest hb;
  hb.set_name("paris");
  hb.set_session(j.session());
  EXPECT_TRUE(client_->heartbeat(hb).value().ok());
}

TEST_F(CoordinatorRpc, DownloadResumesFromAnOffsetAndHashChecks) {
  auto j = join("zurich");
  auto full = client_->download_weights("zurich", j.session(), 0).value();
  EXPECT_GT(full.bytes.size(), mesh::kChunkBytes);  // several chunks
  auto w = mesh::decode_update(full.bytes, {}).value();
  EXPECT_EQ(mesh::content_hash(w), coord_->hash());
  auto refused = client_->download_weights("zurich", j.session() + 2, 0);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_TRUE(mesh::is_not_joined(refused.status().message()));
}

}  // namespace
}  // namespace meshrl::rpc

namespace meshrl::rpc {
namespace {

// [model] device is for the nodes: a coordinator told "cuda" keeps its weights on the CPU, where
// merging, hashing and encoding work. Before, it loaded them onto the device and its first download
// failed ("must be on the CPU", seen on an H200), or it refused to start on a machine without one.
TEST(CoordinatorRpcDevice, ModelDeviceIsForTheNodesTheCoordinatorServesFromTheCpu) {
  test_support::LoopbackRun run(test_support::kLoopbackRun, {"--model.device=cuda"});
  auto j = run.join("paris");
  ASSERT_TRUE(j.accepted());
  auto d = run.client_->download_weights("paris", j.session(), 0);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  auto w = mesh::decode_update(d.value().bytes, {});
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_GT(w.value().size(), 0u);
}

// With the fp32 codec, outer lr 1 and no momentum, one node's round must land the coordinator
// exactly on that node's local weights (theta - (theta - local) = local up to one float rounding):
// the sign and scale of the whole pseudo-gradient path, checked with numbers.
// One fp32 update from paris on version 0, with `others` more nodes joined (online, silent), in
// plain-averaging runs (outer lr 1, momentum 0). Returns version 0, paris's local weights and
// version 1, after checking that the broadcast replays version 0 into version 1 bit for bit.
struct OneUpdate {
  mesh::NamedTensors w0, local, w1;
};
OneUpdate one_update(const std::string& mode, int others) {
  test_support::LoopbackRun run(std::string(test_support::kLoopbackRun) + "outer_lr = 1.0\nouter_momentum = 0.0\n",
                                {"--mesh.codec=fp32", "--mesh.mode=" + mode});
  auto j = run.join("paris");
  EXPECT_TRUE(j.accepted());
  for (int k = 0; k < others; ++k) EXPECT_TRUE(run.join("other" + std::to_string(k)).accepted());

  OneUpdate r;
  r.w0 = run.weights(j.session(), "paris", 0);
  torch::manual_seed(7);
  r.local = mesh::clone_named_tensors(r.w0);
  for (auto& t : r.local.tensors) t.add_(torch::randn_like(t) * 1e-3);
  mesh::NamedTensors pg = mesh::subtract_named_tensors(r.w0, r.local).value();  // theta_v - theta_local
  mesh::CodecConfig cc;
  cc.id = mesh::CodecId::kFp32;
  const std::string bytes = mesh::make_codec(cc).value()->encode(pg).value();
  v1::UpdateHeader h = run.header(j, "paris", 0, 1, bytes.size());
  h.set_n_samples(4);
  mesh::sign_update(h, run.coord_->run_id(), bytes, run.key_);
  EXPECT_TRUE(run.client_->submit(h, bytes).value().accepted());
  for (int i = 0; i < 100 && run.coord_->version() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(run.coord_->version(), 1);

  r.w1 = run.weights(j.session(), "paris", 1);
  // The broadcast applied to version 0 gives version 1 bit for bit (what every node does).
  mesh::NamedTensors replay = mesh::clone_named_tensors(r.w0);
  auto delta = mesh::decode_update(run.client_->get_broadcast("paris", j.session(), 1).value().bytes, {}).value();
  EXPECT_TRUE(mesh::apply_delta(replay, delta).is_ok());
  EXPECT_EQ(mesh::content_hash(replay), run.coord_->hash());
  return r;
}

// max |a + t (b - a) - c| over every tensor: how far c is from the point t of the way from a to b.
double off_the_line(const mesh::NamedTensors& a, const mesh::NamedTensors& b, double t, const mesh::NamedTensors& c) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, (a.tensors[i] + t * (b.tensors[i] - a.tensors[i]) - c.tensors[i]).abs().max().item<double>());
  return m;
}

TEST(CoordinatorRpcMath, PlainAveragingOfOneNodeLandsOnItsWeights) {
  auto r = one_update("sync", 0);
  EXPECT_LT(off_the_line(r.w0, r.local, 1.0, r.w1), 1e-6);
}

// Async: a version of one fresh update among two online nodes is half a round (round.h,
// async_round_share), so the weights go halfway to paris's. Applied whole they would land on
// paris's weights, and two nodes would move the run twice as far per sample as a sync round.
TEST(CoordinatorRpcMath, AsyncVersionOfOneUpdateMovesByItsShareOfARound) {
  auto r = one_update("async", 1);
  EXPECT_LT(off_the_line(r.w0, r.local, 0.5, r.w1), 1e-6);
  EXPECT_GT(off_the_line(r.w0, r.local, 1.0, r.w1), 1e-4);  // not landed on paris's weights
}

}  // namespace
}  // namespace meshrl::rpc

// Signed updates over real gRPC on loopback: every update carries an
// Ed25519 signature over (run id, node, base version, seq, payload hash) by the key the node
// registered at join. Forgeries, updates of another run and replays (same or older seq) are
// refused with a typed code, recorded in the ledger, and a replayed valid update changes nothing.
//   build/tests/test_rpc --gtest_filter='SignedUpdates*'
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mesh/codec.h"
#include "mesh/coordinator.h"
#include "mesh/protocol.h"
#include "mesh/update_format.h"
#include "mesh/update_signature.h"
#include "rpc/coordinator_service.h"
#include "rpc/grpc_client.h"
#include "support/loopback_coordinator.h"

namespace meshrl::rpc {
namespace {

namespace v1 = ::meshrl::v1;

// support/loopback_coordinator.h's run, with updates one version old still taken.
const std::vector<std::string> kOneVersionStale = {"--mesh.max_staleness=1"};

// Everything in a row that the coordinator decides: a replay must leave all of it as it was.
std::string ledger_state(const store::Ledger& l) {
  std::string s;
  for (const auto& r : l.updates())
    s += r.key.str() + " " + store::update_state_name(r.state) + " " + std::to_string(r.applied_version.value_or(-1)) + " " +
         std::to_string(r.weight) + " " + r.reason + "\n";
  for (const auto& r : l.rounds()) s += "round " + std::to_string(r.version) + " " + r.hash + "\n";
  return s;
}

TEST(SignedUpdates, ForgeriesOtherRunsAndReplaysAreRefusedAndLeaveTheLedgerAlone) {
  test_support::LoopbackRun run(test_support::kLoopbackRun, kOneVersionStale);
  auto& coord = run.coord_;
  auto& client = run.client_;
  const trust::SigningKey& key = run.key_;  // the one paris registers at join
  const trust::SigningKey thief = trust::SigningKey::generate();
  auto j = run.join("paris");
  ASSERT_TRUE(j.accepted()) << j.reason();
  const std::string payload = run.zero_update(j.session(), "paris", 0);

  auto header = [&](int64_t base, int64_t seq) { return run.header(j, "paris", base, seq, payload.size()); };
  auto signed_by = [&](const trust::SigningKey& k, int64_t base, int64_t seq, const std::string& run) {
    v1::UpdateHeader h = header(base, seq);
    mesh::sign_update(h, run, payload, k);
    return h;
  };
  auto expect_code = [&](const v1::UpdateHeader& h, const std::string& bytes, const std::string& code) {
    auto r = client->submit(h, bytes).value();
    EXPECT_FALSE(r.accepted()) << code;
    EXPECT_EQ(r.code(), code) << r.reason();
    EXPECT_EQ(r.reason().rfind(code + ": ", 0), 0u) << r.reason();
  };

  // Forgeries: another key; no signature; the right signature over other bytes of the same size.
  expect_code(signed_by(thief, 0, 100, coord->run_id()), payload, "bad_signature");
  expect_code(header(0, 100), payload, "bad_signature");
  const v1::UpdateHeader good = signed_by(key, 0, 100, coord->run_id());
  std::string tampered = payload;
  tampered[tampered.size() - 1] ^= 0x01;
  expect_code(good, tampered, "bad_signature");
  // Another run: refused whether or not the header's run id was altered to look like ours.
  expect_code(signed_by(key, 0, 100, "0123456789abcdef"), payload, "wrong_run");
  v1::UpdateHeader relabelled = signed_by(key, 0, 100, "0123456789abcdef");
  relabelled.set_run_id(coord->run_id());
  expect_code(relabelled, payload, "bad_signature");
  EXPECT_TRUE(coord->store().ledger().updates().empty());  // none of these touched a key

  // The genuine update is acknowledged and applied (paris alone makes quorum).
  auto ok = client->submit(good, payload).value();
  ASSERT_TRUE(ok.accepted()) << ok.reason();
  for (int i = 0; i < 100 && coord->version() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(coord->version(), 1);
  const std::string before = ledger_state(coord->store().ledger());

  // Replays: the same signed update again is answered from the ledger and applies nothing; an
  // older seq under a new key (validly signed, captured earlier) is refused as a replay.
  auto again = client->submit(good, payload).value();
  EXPECT_TRUE(again.duplicate());
  EXPECT_TRUE(again.accepted());
  expect_code(signed_by(key, 1, 99, coord->run_id()), payload, "replay");
  expect_code(signed_by(key, 1, 100, coord->run_id()), payload, "replay");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a round would close here if anything counted
  EXPECT_EQ(coord->version(), 1);
  EXPECT_EQ(ledger_state(coord->store().ledger()), before);

  // Each refusal is in the ledger with its code.
  int forged = 0, foreign = 0, replayed = 0;
  for (const auto& e : coord->store().ledger().node_events()) {
    if (e.event != "update_refused") continue;
    forged += e.detail.find("bad_signature: ") != std::string::npos;
    foreign += e.detail.find("wrong_run: ") != std::string::npos;
    replayed += e.detail.find("replay: ") != std::string::npos;
  }
  EXPECT_EQ(forged, 4);
  EXPECT_EQ(foreign, 1);
  EXPECT_EQ(replayed, 2);

  // A later seq on the new version is fine.
  auto next = client->submit(signed_by(key, 1, 101, coord->run_id()), payload).value();
  EXPECT_TRUE(next.accepted()) << next.reason();
}

// Validation at ingest: after a few rounds set the norm scale, an update 100x the usual norm is
// refused (code "norm"), and so are NaN, +Inf and -Inf (code "not_finite"), each every time it is
// sent: 10 random 100x updates, and 10 x 3 non-finite values at random (tensor, block) positions.
TEST(SignedUpdates, IngestRefusesNaNInfAnd100xNormUpdates) {
  std::vector<std::string> overrides = kOneVersionStale;
  overrides.push_back("--mesh.rounds=10");
  test_support::LoopbackRun run(std::string(test_support::kLoopbackRun) + "norm_bound_factor = 10.0\n", overrides);
  auto& coord = run.coord_;
  auto& client = run.client_;
  auto j = run.join("zurich");
  ASSERT_TRUE(j.accepted()) << j.reason();
  auto like = run.weights(j.session(), "zurich", 0);
  mesh::CodecConfig cc;
  cc.zstd_level = 0;
  auto codec = mesh::make_codec(cc).value();
  int64_t seq = 0;
  auto send = [&](double scale, int64_t base) {
    mesh::NamedTensors u = mesh::clone_named_tensors(like);
    for (auto& t : u.tensors) t = torch::randn_like(t) * (1e-3 * scale);
    const std::string bytes = codec->encode(u).value();
    return client->submit(run.signed_header(j, "zurich", base, ++seq, bytes), bytes).value();
  };
  torch::manual_seed(3);
  for (int64_t v = 0; v < 3; ++v) {  // three honest rounds set the scale
    ASSERT_TRUE(send(1, v).accepted());
    for (int i = 0; i < 100 && coord->version() <= v; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(coord->version(), v + 1);
  }
  for (int i = 0; i < 10; ++i) {
    auto r = send(100, 3);
    EXPECT_FALSE(r.accepted());
    EXPECT_EQ(r.code(), "norm") << r.reason();
  }
  std::mt19937_64 pick(11);
  for (int trial = 0; trial < 30; ++trial) {
    const float bad = trial % 3 == 0 ? std::numeric_limits<float>::quiet_NaN()
                                     : (trial % 3 == 1 ? 1 : -1) * std::numeric_limits<float>::infinity();
    // A non-finite scale of a random int8 block of a random tensor (the payload is raw: zstd
    // off; int8 stores its n_blocks f32 scales first), signed as sent.
    mesh::NamedTensors u = mesh::clone_named_tensors(like);
    for (auto& t : u.tensors) t = torch::randn_like(t) * 1e-3;
    std::string bytes = codec->encode(u).value();
    auto parsed = mesh::parse_update(bytes, {}).value();
    const auto& pt = parsed.tensors[pick() % parsed.tensors.size()];
    const uint64_t n_blocks = (pt.numel + pt.block_size - 1) / pt.block_size;
    std::memcpy(bytes.data() + pt.stored_offset + 4 * (pick() % n_blocks), &bad, 4);
    auto r = client->submit(run.signed_header(j, "zurich", 3, ++seq, bytes), bytes).value();
    EXPECT_FALSE(r.accepted());
    EXPECT_EQ(r.code(), "not_finite") << r.reason();
  }
  // Every refusal is a ledger row with its code; nothing of them was applied.
  int norm = 0, nonfinite = 0;
  for (const auto& row : coord->store().ledger().updates()) {
    if (row.state != store::UpdateState::kRejected) continue;
    norm += row.reason.rfind("norm: ", 0) == 0;
    nonfinite += row.reason.rfind("not_finite: ", 0) == 0;
  }
  EXPECT_EQ(norm, 10);
  EXPECT_EQ(nonfinite, 30);
  EXPECT_EQ(coord->version(), 3);
  ASSERT_TRUE(send(1, 3).accepted());  // and the run goes on
}

}  // namespace
}  // namespace meshrl::rpc

// What an admitted node may claim, checked on the transport-free Coordinator (the same messages
// the gRPC service hands it): the samples that weigh an update are bounded by the run and signed,
// one node gets one vote per round under the mean, the median and the trimmed mean, a wild seq
// locks nobody out, and a flood of refused attempts writes almost nothing.
//   build/tests/test_mesh --gtest_filter='CoordinatorClaims*'
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "mesh/codec.h"
#include "mesh/coordinator.h"
#include "mesh/protocol.h"
#include "mesh/update_signature.h"

namespace meshrl::mesh {
namespace {

namespace fs = std::filesystem;

// tiny, no warm start, fp32 updates and plain averaging (outer lr 1, no momentum), so a version
// is exactly version 0 minus the aggregate of what the nodes sent. One update can hold
// inner_steps x prompts_per_step x group_size = 1 x 4 x 2 = 8 samples.
const char* kRun = R"(
[model]
init = "tiny"
[sft]
steps = 0
[grpo]
prompts_per_step = 4
group_size = 2
[mesh]
rounds = 3
inner_steps = 1
codec = "fp32"
zstd_level = 0
max_staleness = 1
lease_s = 60
outer_lr = 1.0
outer_momentum = 0.0
)";
constexpr int64_t kBound = 8;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class CoordinatorClaims : public ::testing::Test {
 protected:
  void start(const std::vector<std::string>& overrides = {}) {
    dir_ = fs::temp_directory_path() / ("meshrl-claims-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    CoordinatorOptions o;
    o.run_dir = dir_;
    o.config = parse_mesh_run_config(kRun, "test.toml", overrides).value();
    coord_ = Coordinator::start(o).value();
  }
  void TearDown() override {
    if (coord_) coord_->stop();
    coord_.reset();
    fs::remove_all(dir_);
  }

  uint64_t join(const std::string& name) {
    v1::JoinRequest r;
    r.set_protocol_version(kProtocolVersion);
    r.set_name(name);
    r.set_signing_key(key_.public_key());
    const v1::JoinReply j = coord_->join(r, "test");
    EXPECT_TRUE(j.accepted()) << j.reason();
    return j.session();
  }
  NamedTensors weights(const std::string& name, uint64_t session, int64_t version) {
    auto blob = coord_->weights(name, session, version).value();
    return decode_update(*blob.bytes, {}).value();
  }
  // The pseudo-gradient `scale` x (a fixed random direction), fp32-encoded.
  std::string update_bytes(const NamedTensors& like, double scale) {
    NamedTensors u = clone_named_tensors(like);
    torch::manual_seed(11);
    for (auto& t : u.tensors) t = torch::randn_like(t) * scale;
    CodecConfig cc;
    cc.id = CodecId::kFp32;
    cc.zstd_level = 0;
    return make_codec(cc).value()->encode(u).value();
  }
  v1::UpdateHeader signed_header(const std::string& name, uint64_t session, int64_t base, int64_t seq, int64_t n_samples,
                                 const std::string& bytes) {
    v1::UpdateHeader h;
    h.set_protocol_version(kProtocolVersion);
    h.set_name(name);
    h.set_session(session);
    h.set_base_version(base);
    h.set_seq(seq);
    h.set_n_samples(n_samples);
    h.set_declared_bytes(bytes.size());
    h.mutable_stats()->set_reward_mean(0.25);
    sign_update(h, coord_->run_id(), bytes, key_);
    return h;
  }
  void wait_version(int64_t v) {
    for (int i = 0; i < 200 && coord_->version() < v; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    ASSERT_EQ(coord_->version(), v);
  }
  // max |w0 - t * step - w1|: how far w1 is from moving t of `step` away from w0.
  static double off(const NamedTensors& w0, const NamedTensors& step, double t, const NamedTensors& w1) {
    double m = 0;
    for (size_t i = 0; i < w0.size(); ++i)
      m = std::max(m, (w0.tensors[i] - t * step.tensors[i] - w1.tensors[i]).abs().max().item<double>());
    return m;
  }
  NamedTensors decoded(const std::string& bytes) { return decode_update(bytes, {}).value(); }

  // Three nodes, one of them (mallory) sending `attack` several times before two honest zero
  // updates; returns how far version 1 moved along mallory's update (in units of it).
  double attacker_share(const std::string& aggregator, int repeats) {
    start({"--mesh.aggregator=" + aggregator, "--mesh.trim_fraction=0.34"});
    const uint64_t sa = join("alice"), sb = join("bob"), sm = join("mallory");
    const NamedTensors w0 = weights("alice", sa, 0);
    const std::string attack = update_bytes(w0, 1e-2), zero = update_bytes(w0, 0.0);
    int accepted = 0;
    for (int k = 0; k < repeats; ++k) {
      const v1::SubmitReply r = coord_->submit(signed_header("mallory", sm, 0, now_us() + k, kBound, attack), attack);
      accepted += r.accepted();
      if (k > 0) EXPECT_EQ(r.code(), "one_vote") << r.reason();
    }
    EXPECT_EQ(accepted, 1);
    EXPECT_TRUE(coord_->submit(signed_header("alice", sa, 0, now_us(), kBound, zero), zero).accepted());
    EXPECT_TRUE(coord_->submit(signed_header("bob", sb, 0, now_us(), kBound, zero), zero).accepted());
    wait_version(1);
    const NamedTensors w1 = weights("alice", sa, 1);
    const NamedTensors step = decoded(attack);
    // The share t that best explains w1 = w0 - t * step (least squares over every value).
    double num = 0, den = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      num += ((w0.tensors[i] - w1.tensors[i]) * step.tensors[i]).sum().item<double>();
      den += (step.tensors[i] * step.tensors[i]).sum().item<double>();
    }
    const double t = num / den;
    EXPECT_LT(off(w0, step, t, w1), 1e-6);
    return t;
  }

  const trust::SigningKey key_ = trust::SigningKey::generate();
  fs::path dir_;
  std::unique_ptr<Coordinator> coord_;
};

TEST_F(CoordinatorClaims, InflatedSamplesAreRefusedAndTheBoundedClaimWeighsOneThird) {
  start();
  const uint64_t sa = join("alice"), sb = join("bob"), sm = join("mallory");
  const NamedTensors w0 = weights("alice", sa, 0);
  const std::string attack = update_bytes(w0, 1e-2), zero = update_bytes(w0, 0.0);
  const v1::SubmitReply big = coord_->submit(signed_header("mallory", sm, 0, now_us(), 1'000'000'000'000, attack), attack);
  EXPECT_FALSE(big.accepted());
  EXPECT_EQ(big.code(), "claim") << big.reason();
  EXPECT_NE(big.reason().find("inner_steps x prompts_per_step x group_size"), std::string::npos) << big.reason();
  const v1::SubmitReply none = coord_->submit(signed_header("mallory", sm, 0, now_us(), 0, attack), attack);
  EXPECT_EQ(none.code(), "claim") << none.reason();
  ASSERT_TRUE(coord_->submit(signed_header("mallory", sm, 0, now_us(), kBound, attack), attack).accepted());
  ASSERT_TRUE(coord_->submit(signed_header("alice", sa, 0, now_us(), kBound, zero), zero).accepted());
  ASSERT_TRUE(coord_->submit(signed_header("bob", sb, 0, now_us(), kBound, zero), zero).accepted());
  wait_version(1);
  // Under the mean, the attacker moves the weights by 1/N of its bounded delta, not all of it.
  EXPECT_LT(off(w0, decoded(attack), 1.0 / 3.0, weights("alice", sa, 1)), 1e-6);
}

TEST_F(CoordinatorClaims, EveryClaimedFieldIsSigned) {
  start();
  const uint64_t sm = join("mallory");
  const std::string bytes = update_bytes(weights("mallory", sm, 0), 1e-3);
  const int64_t seq = now_us();
  auto tampered = [&](auto change) {
    v1::UpdateHeader h = signed_header("mallory", sm, 0, seq, 4, bytes);
    change(h);
    return coord_->submit(h, bytes);
  };
  EXPECT_EQ(tampered([](v1::UpdateHeader& h) { h.set_n_samples(8); }).code(), "bad_signature");
  EXPECT_EQ(tampered([](v1::UpdateHeader& h) { h.mutable_stats()->set_reward_mean(0.99); }).code(), "bad_signature");
  EXPECT_EQ(tampered([](v1::UpdateHeader& h) { h.mutable_stats()->set_n_scored(3); }).code(), "bad_signature");
  EXPECT_EQ(tampered([](v1::UpdateHeader& h) { h.mutable_stats()->set_scored_digest("x"); }).code(), "bad_signature");
  EXPECT_EQ(tampered([](v1::UpdateHeader& h) { h.mutable_stats()->set_verifier_timeouts(1); }).code(), "bad_signature");
  EXPECT_TRUE(tampered([](v1::UpdateHeader&) {}).accepted());
}

TEST_F(CoordinatorClaims, RepeatsGetOneVoteUnderTheMean) {
  EXPECT_NEAR(attacker_share("mean", 5), 1.0 / 3.0, 1e-4);
}

TEST_F(CoordinatorClaims, RepeatsGetOneVoteUnderTheMedian) {
  // Five copies of mallory among three would set the median exactly (share 1); one vote of three does not move it.
  EXPECT_NEAR(attacker_share("median", 5), 0.0, 1e-6);
}

TEST_F(CoordinatorClaims, RepeatsGetOneVoteUnderTheTrimmedMean) {
  EXPECT_NEAR(attacker_share("trimmed_mean", 5), 0.0, 1e-6);
}

TEST_F(CoordinatorClaims, AWildSeqLocksNobodyOut) {
  start();
  const uint64_t sm = join("paris");
  const NamedTensors w0 = weights("paris", sm, 0);
  const std::string bytes = update_bytes(w0, 1e-3);
  // seq 2^63-1: refused as a clock reading from the far future, and not remembered as the last seq.
  const v1::SubmitReply wild = coord_->submit(signed_header("paris", sm, 0, INT64_MAX, 4, bytes), bytes);
  EXPECT_EQ(wild.code(), "seq_ahead") << wild.reason();
  // A refused update with a seq a few minutes ahead (within the skew) does not count either.
  NamedTensors bad = clone_named_tensors(w0);
  bad.tensors.pop_back();
  bad.names.pop_back();
  CodecConfig cc;
  cc.id = CodecId::kFp32;
  cc.zstd_level = 0;
  const std::string bad_bytes = make_codec(cc).value()->encode(bad).value();
  const v1::SubmitReply shape = coord_->submit(signed_header("paris", sm, 0, now_us() + 120'000'000, 4, bad_bytes), bad_bytes);
  EXPECT_EQ(shape.code(), "shape") << shape.reason();
  const int64_t seq = now_us();
  const v1::UpdateHeader good = signed_header("paris", sm, 0, seq, 4, bytes);
  EXPECT_TRUE(coord_->submit(good, bytes).accepted());
  // An exact retry is still idempotent; an older seq under a new key is still a replay.
  const v1::SubmitReply retry = coord_->submit(good, bytes);
  EXPECT_TRUE(retry.accepted());
  EXPECT_TRUE(retry.duplicate());
  EXPECT_EQ(coord_->submit(signed_header("paris", sm, 0, seq - 1, 4, bytes), bytes).code(), "replay");
}

TEST_F(CoordinatorClaims, ARefusalFloodWritesAtMostTheRate) {
  start({"--mesh.max_updates_per_minute=5"});
  const uint64_t sm = join("mallory");
  const std::string bytes = update_bytes(weights("mallory", sm, 0), 1e-3);
  const size_t events_before = coord_->store().ledger().node_events().size();
  int limited = 0;
  for (int k = 0; k < 100; ++k) {
    v1::UpdateHeader h = signed_header("mallory", sm, 0, now_us(), 4, bytes);
    h.clear_signature();  // unsigned: refused, and once refused it used to be written
    limited += coord_->submit(h, bytes).code() == "rate_limited";
  }
  EXPECT_EQ(limited, 95);
  const size_t written = coord_->store().ledger().node_events().size() - events_before;
  EXPECT_LE(written, 5u);
  EXPECT_TRUE(coord_->store().ledger().updates().empty());
  // Joins too: a node rejoining in a loop is refused past the rate before anything is written.
  v1::JoinRequest r;
  r.set_protocol_version(kProtocolVersion - 1);
  r.set_name("looper");
  r.set_signing_key(key_.public_key());
  const size_t before_joins = coord_->store().ledger().node_events().size();
  int join_limited = 0;
  for (int k = 0; k < 100; ++k) join_limited += coord_->join(r, "test").reason().rfind("rate_limited", 0) == 0;
  EXPECT_EQ(join_limited, 100 - Coordinator::kMaxJoinsPerMinute);
  EXPECT_LE(coord_->store().ledger().node_events().size() - before_joins, static_cast<size_t>(Coordinator::kMaxJoinsPerMinute));
}

TEST_F(CoordinatorClaims, WithAuditsOnSamplesMustEqualTheCommittedRollouts) {
  // A rate so small no update is drawn: audits are on (a shared task) but none is asked for.
  start({"--mesh.audit_rate=0.000000001"});
  const uint64_t sm = join("paris");
  const std::string bytes = update_bytes(weights("paris", sm, 0), 1e-3);
  v1::UpdateHeader h;
  h.set_protocol_version(kProtocolVersion);
  h.set_name("paris");
  h.set_session(sm);
  h.set_base_version(0);
  h.set_seq(now_us());
  h.set_n_samples(8);
  h.set_declared_bytes(bytes.size());
  h.mutable_stats()->set_n_scored(2);
  sign_update(h, coord_->run_id(), bytes, key_);
  const v1::SubmitReply r = coord_->submit(h, bytes);
  EXPECT_EQ(r.code(), "claim") << r.reason();
  EXPECT_NE(r.reason().find("n_scored"), std::string::npos) << r.reason();
}

}  // namespace
}  // namespace meshrl::mesh

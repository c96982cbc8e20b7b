// The version builder (mesh/version_builder.h): a round's close written out by hand. fp32 codecs
// and outer SGD at lr 1 without momentum, so a version is theta minus the weighted mean of what
// was counted: fresh updates folded at once, held stale ones read back from the spool at the
// close, async versions scaled by their share of a round, the optimizer state saved and restored
// bit for bit, and the book closed for the next round.
//   build/tests/test_mesh --gtest_filter='VersionBuilder*:RoundStats*'
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <map>

#include "mesh/version_builder.h"

namespace meshrl::mesh {
namespace {

MeshRunConfig plain_sgd(const std::string& mode = "sync") {
  MeshRunConfig c;
  c.mesh.mode = mode;
  c.mesh.codec = "fp32";
  c.mesh.zstd_level = 0;
  c.mesh.outer_lr = 1.0;
  c.mesh.outer_momentum = 0.0;
  c.mesh.max_staleness = 2;
  return c;
}

NamedTensors vec(std::vector<float> v) { return {{"w"}, {torch::tensor(v)}}; }
std::vector<float> values(const NamedTensors& t) {
  const torch::Tensor x = t.tensors[0].contiguous();
  return std::vector<float>(x.data_ptr<float>(), x.data_ptr<float>() + x.numel());
}

RoundEntry entry(const std::string& node, int64_t base, int64_t staleness, double weight, double reward = 0.5) {
  RoundEntry e;
  e.key = {node, base, 1};
  e.staleness = staleness;
  e.weight = weight;
  e.n_samples = 8;
  e.has_stats = true;
  e.reward_mean = reward;
  return e;
}

struct Fixture {
  std::unique_ptr<VersionBuilder> b;
  NamedTensors theta = vec({10, 10, 10, 10});
  std::map<std::string, std::string> spool;
  std::unique_ptr<UpdateCodec> fp32;

  explicit Fixture(const MeshRunConfig& c = plain_sgd(), int64_t version = 0) {
    b = VersionBuilder::make(c, UpdateDecodeLimits{}).value();
    b->open(version, 0);
    CodecConfig cc;
    cc.id = CodecId::kFp32;
    cc.zstd_level = 0;
    fp32 = make_codec(cc).value();
  }
  // Offers and counts; a held entry's payload goes to the spool as the coordinator's would.
  BookDecision put(const RoundEntry& e, const NamedTensors& u) {
    const BookDecision d = b->offer(e);
    if (!d.accepted) return d;
    if (!d.count_now) spool[e.key.str()] = fp32->encode(u).value();
    EXPECT_TRUE(b->count(e, d, u).is_ok());
    return d;
  }
  BuiltVersion build(int64_t online = 2) {
    return b->build(theta, online, [this](const std::string& k) -> Result<std::string> {
                       auto it = spool.find(k);
                       if (it == spool.end()) return not_found("no spooled " + k);
                       return it->second;
                     })
        .value();
  }
};

TEST(VersionBuilder, AVersionIsThetaMinusTheWeightedMeanOfTheRound) {
  Fixture f;
  EXPECT_TRUE(f.put(entry("alice", 0, 0, 8), vec({1, 2, 3, 4})).count_now);
  EXPECT_TRUE(f.put(entry("bob", 0, 0, 24), vec({3, 2, 1, 0})).count_now);
  const BuiltVersion v = f.build();
  EXPECT_EQ(v.version, 1);
  // (8 x [1 2 3 4] + 24 x [3 2 1 0]) / 32 = [2.5 2 1.5 1]
  EXPECT_EQ(values(f.theta), (std::vector<float>{7.5f, 8.f, 8.5f, 9.f}));
  EXPECT_EQ(v.hash.size(), 32u);
  EXPECT_DOUBLE_EQ(v.share, 1.0);
  ASSERT_EQ(v.applied.size(), 2u);
  EXPECT_EQ(v.applied[0].first.node, "alice");
  EXPECT_DOUBLE_EQ(v.applied[1].second, 24);
  // The broadcast is the applied delta, exactly.
  EXPECT_EQ(values(f.fp32->decode(v.broadcast, {}).value()), (std::vector<float>{-2.5f, -2.f, -1.5f, -1.f}));
}

TEST(VersionBuilder, AHeldStaleUpdateIsReadFromTheSpoolAtTheClose) {
  Fixture f(plain_sgd(), 3);
  EXPECT_TRUE(f.put(entry("alice", 3, 0, 8), vec({2, 2, 2, 2})).count_now);
  const BookDecision late = f.put(entry("bob", 2, 1, 8), vec({4, 4, 4, 4}));
  EXPECT_TRUE(late.accepted);
  EXPECT_FALSE(late.count_now);
  EXPECT_EQ(f.b->book().held().size(), 1u);
  const BuiltVersion v = f.build();
  EXPECT_EQ(v.version, 4);
  EXPECT_EQ(values(f.theta), (std::vector<float>{7, 7, 7, 7}));  // 10 - (2 + 4) / 2
  EXPECT_DOUBLE_EQ(v.stats.mean_staleness, 0.5);
}

TEST(VersionBuilder, ALostSpoolFailsTheClose) {
  Fixture f(plain_sgd(), 3);
  f.put(entry("bob", 2, 1, 8), vec({4, 4, 4, 4}));
  f.spool.clear();
  auto r = f.b->build(f.theta, 1, [](const std::string& k) -> Result<std::string> { return not_found(k); });
  EXPECT_FALSE(r.is_ok());
}

TEST(VersionBuilder, AnAsyncVersionMovesByItsShareOfARound) {
  Fixture f(plain_sgd("async"));
  f.put(entry("alice", 0, 0, 8), vec({4, 8, 0, -4}));
  const BuiltVersion v = f.build(4);  // one fresh update of four nodes: a quarter of a round
  EXPECT_DOUBLE_EQ(v.share, 0.25);
  EXPECT_EQ(values(f.theta), (std::vector<float>{9, 8, 10, 11}));
}

TEST(VersionBuilder, TheRoundStatsAreMeansOverTheEntriesWithStats) {
  Fixture f;
  f.put(entry("alice", 0, 0, 8, 1.0), vec({0, 0, 0, 0}));
  RoundEntry no_stats = entry("bob", 0, 0, 8);
  no_stats.has_stats = false;  // re-read from the ledger after a restart
  f.put(no_stats, vec({0, 0, 0, 0}));
  f.put(entry("carol", 0, 0, 8, 0.0), vec({0, 0, 0, 0}));
  const RoundStats s = round_stats(f.b->book());
  EXPECT_EQ(s.n_updates, 3);
  EXPECT_EQ(s.samples, 24);
  EXPECT_DOUBLE_EQ(s.reward_mean, 0.5);  // (1 + 0) / 2: bob has none
  EXPECT_DOUBLE_EQ(s.mean_staleness, 0);
  EXPECT_DOUBLE_EQ(f.build().stats.reward_mean, 0.5);
}

TEST(VersionBuilder, ASyncRoundClosesAtQuorumAndReopensClosed) {
  Fixture f;
  EXPECT_EQ(f.b->should_close(2, 1), CloseReason::kOpen);  // nothing in: never closes
  f.put(entry("alice", 0, 0, 8), vec({1, 1, 1, 1}));
  EXPECT_EQ(f.b->should_close(2, 1), CloseReason::kOpen);
  f.put(entry("bob", 0, 0, 8), vec({1, 1, 1, 1}));
  EXPECT_EQ(f.b->should_close(2, 1), CloseReason::kQuorum);
  f.build();
  f.b->reopen(1, 5);
  EXPECT_EQ(f.b->book().n_updates(), 0);
  EXPECT_EQ(f.b->should_close(2, 6), CloseReason::kOpen);
  EXPECT_FALSE(f.b->offer(entry("alice", 0, 1, 8)).accepted);  // its update on base 0 is applied
  EXPECT_TRUE(f.b->offer(entry("alice", 1, 0, 8)).accepted);
}

TEST(VersionBuilder, TheOptimizerStateIsRestoredBitForBit) {
  MeshRunConfig c = plain_sgd();
  c.mesh.outer_momentum = 0.9;
  c.mesh.codec = "int8";  // lossy broadcast: the error-feedback residual is not zero
  c.mesh.block_size = 2;
  Fixture a(c);
  a.put(entry("alice", 0, 0, 8), vec({0.3f, -1.7f, 2.9f, 0.01f}));
  a.build();
  a.b->reopen(1, 0);
  const store::TensorSet saved = a.b->optimizer_state();
  ASSERT_EQ(saved.names.size(), 2u);
  EXPECT_EQ(saved.names[0], "outer/w");
  EXPECT_EQ(saved.names[1], "ef/w");

  Fixture b(c, 1);
  b.theta = clone_named_tensors(a.theta);
  ASSERT_TRUE(b.b->restore_optimizer_state(saved).is_ok());
  a.put(entry("alice", 1, 0, 8), vec({1.1f, 0.2f, -0.4f, 3.3f}));
  b.put(entry("alice", 1, 0, 8), vec({1.1f, 0.2f, -0.4f, 3.3f}));
  const BuiltVersion va = a.build(), vb = b.build();
  EXPECT_EQ(va.hash, vb.hash);
  EXPECT_EQ(va.broadcast, vb.broadcast);
  EXPECT_TRUE(torch::equal(a.theta.tensors[0], b.theta.tensors[0]));
}

}  // namespace
}  // namespace meshrl::mesh

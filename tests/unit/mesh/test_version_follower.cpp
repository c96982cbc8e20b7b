// Following versions (mesh/version_follower.h), with numbers checkable by hand: the rebase moves
// local progress onto a new version (local <- theta' + (local - cut)) and the next update holds
// only progress not sent yet; broadcasts are applied and each version's hash checked; a broadcast
// that lands on the wrong hash, or a node too far behind, takes a full download; a download over
// the cap its shapes allow, or with the wrong hash, is refused.
//   build/tests/test_mesh --gtest_filter='VersionFollower*'
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mesh/codec.h"
#include "mesh/content_hash.h"
#include "mesh/version_follower.h"

namespace meshrl::mesh {
namespace {

// Two small tensors holding the given values (exact in float32).
NamedTensors weights(float a0, float a1, float b0, float b1) {
  NamedTensors w;
  w.names = {"a", "b"};
  w.tensors = {torch::tensor({a0, a1}), torch::tensor({b0, b1})};
  return w;
}

std::vector<float> values(const NamedTensors& w) {
  std::vector<float> out;
  for (const auto& t : w.tensors) {
    auto c = t.contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

std::unique_ptr<UpdateCodec> fp32_codec() {
  CodecConfig cc;
  cc.id = CodecId::kFp32;
  cc.zstd_level = 0;
  return make_codec(cc).value();
}

// Serves encoded weights and broadcasts by version, as the coordinator would (no caps enforced:
// a transport that does not refuse oversized streams itself).
class VersionServer : public CoordinatorClient {
 public:
  std::map<int64_t, Download> weights, broadcasts;
  int weight_calls = 0, broadcast_calls = 0;

  void publish(int64_t v, const NamedTensors& w, const NamedTensors* from) {
    weights[v] = Download{fp32_codec()->encode(w).value(), v, content_hash(w)};
    if (from) broadcasts[v] = Download{fp32_codec()->encode(subtract_named_tensors(w, *from).value()).value(), v, content_hash(w)};
  }
  Result<Download> download_weights(const std::string&, uint64_t, int64_t version, uint64_t) override {
    ++weight_calls;
    auto it = weights.find(version);
    if (it == weights.end()) return invalid_argument("unknown version " + std::to_string(version));
    return it->second;
  }
  Result<Download> get_broadcast(const std::string&, uint64_t, int64_t version, uint64_t) override {
    ++broadcast_calls;
    auto it = broadcasts.find(version);
    if (it == broadcasts.end()) return invalid_argument("no broadcast " + std::to_string(version));
    return it->second;
  }
  Result<v1::JoinReply> join(const v1::JoinRequest&) override { return invalid_argument("unused"); }
  Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest&) override { return invalid_argument("unused"); }
  Result<v1::LeaveReply> leave(const v1::LeaveRequest&) override { return invalid_argument("unused"); }
  Result<Download> download_base(const std::string&, uint64_t, uint64_t) override { return invalid_argument("unused"); }
  Result<v1::SubmitReply> submit(const v1::UpdateHeader&, const std::string&) override { return invalid_argument("unused"); }
  Status watch(const std::string&, uint64_t, const std::function<bool(const v1::VersionAnnouncement&)>&) override {
    return Status::ok();
  }
  Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer&) override { return invalid_argument("unused"); }
};

class VersionFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    o_.name = "paris";
    o_.give_up_s = 5;
    model_ = weights(0, 0, 0, 0);  // the "model's parameters" the follower writes through
    theta0_ = weights(1, 2, 3, 4);
    server_.publish(0, theta0_, nullptr);
    make_follower(download_caps(model_, fp32_codec()->config()));
  }
  void make_follower(const DownloadCaps& caps) {
    UpdateDecodeLimits limits;
    limits.max_decoded_bytes = 4 * 4;
    limits.max_tensors = 2;
    NamedTensors views;  // the same storage as model_: a rebase must write into it
    views.names = model_.names;
    views.tensors = model_.tensors;
    follower_ = std::make_unique<VersionFollower>(session_, tally_, views, fp32_codec(), limits, caps);
  }
  // The first version, as a node holds it after joining.
  void hold_first() {
    auto f = follower_->full_download(0, theta0_hash());
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    follower_->rebase(std::move(f).value(), /*first=*/true);
  }
  std::string theta0_hash() const { return content_hash(theta0_); }
  void train_locally(float by) {
    torch::NoGradGuard g;
    for (auto& t : model_.tensors) t.add_(by);
  }

  NodeOptions o_;
  VersionServer server_;
  NodeTally tally_{nullptr};
  NodeSession session_{server_, o_, "pk", tally_, nullptr};
  NamedTensors model_, theta0_;
  std::unique_ptr<VersionFollower> follower_;
};

TEST_F(VersionFollowerTest, TheFirstVersionIsCopiedIntoTheModel) {
  hold_first();
  EXPECT_EQ(values(model_), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(follower_->held(), 0);
  EXPECT_EQ(follower_->held_hash(), theta0_hash());
  EXPECT_EQ(tally_.report().full_downloads, 1);
  EXPECT_EQ(tally_.report().final_version, 0);
}

TEST_F(VersionFollowerTest, ARebaseMovesLocalProgressOntoTheNewVersionAndSendsItOnce) {
  hold_first();
  train_locally(0.5f);  // local = theta0 + 0.5
  const NamedTensors theta1 = weights(2, 2, 2, 2);
  server_.publish(1, theta1, &theta0_);
  ASSERT_TRUE(follower_->sync_to(1, content_hash(theta1)).is_ok());
  // local <- theta1 + (local - cut) = theta1 + 0.5; cut <- theta1.
  EXPECT_EQ(values(model_), (std::vector<float>{2.5, 2.5, 2.5, 2.5}));
  EXPECT_EQ(follower_->held(), 1);
  EXPECT_EQ(server_.broadcast_calls, 1);
  EXPECT_EQ(server_.weight_calls, 1);  // only the first version was downloaded whole
  // The next update is cut - local = -0.5: the progress made, not the version's change.
  auto p = follower_->take_unsent_progress();
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(values(p.value()), (std::vector<float>{-0.5, -0.5, -0.5, -0.5}));
  // Sent once: cut <- local, so nothing is left until the model trains again.
  EXPECT_EQ(values(follower_->take_unsent_progress().value()), (std::vector<float>{0, 0, 0, 0}));
  // A version already held is not fetched again.
  ASSERT_TRUE(follower_->sync_to(1, content_hash(theta1)).is_ok());
  EXPECT_EQ(server_.broadcast_calls, 1);
}

TEST_F(VersionFollowerTest, BroadcastsAreAppliedInOrderWithEachHashChecked) {
  hold_first();
  const NamedTensors theta1 = weights(2, 2, 2, 2), theta2 = weights(-1, 0.25, 8, 4);
  server_.publish(1, theta1, &theta0_);
  server_.publish(2, theta2, &theta1);
  auto f = follower_->fetch(follower_->held_weights(), 0, 2, content_hash(theta2));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(values(f.value().theta), values(theta2));
  EXPECT_EQ(f.value().version, 2);
  EXPECT_EQ(server_.broadcast_calls, 2);
  EXPECT_EQ(tally_.report().broadcasts_applied, 2);
  EXPECT_EQ(tally_.report().full_downloads, 1);
  // fetch leaves the model and the held version alone: only rebase moves them.
  EXPECT_EQ(values(model_), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(follower_->held(), 0);
}

TEST_F(VersionFollowerTest, ABroadcastLandingOnTheWrongHashFallsBackToAFullDownload) {
  hold_first();
  const NamedTensors theta1 = weights(2, 2, 2, 2);
  server_.publish(1, theta1, &theta0_);
  const NamedTensors wrong = weights(9, 9, 9, 9);
  server_.broadcasts[1].bytes = fp32_codec()->encode(subtract_named_tensors(wrong, theta0_).value()).value();
  ASSERT_TRUE(follower_->sync_to(1, content_hash(theta1)).is_ok());
  EXPECT_EQ(values(model_), (std::vector<float>{2, 2, 2, 2}));
  EXPECT_EQ(tally_.report().full_downloads, 2);
  EXPECT_EQ(tally_.report().broadcasts_applied, 0);
}

TEST_F(VersionFollowerTest, ANodeFarBehindTakesOneFullDownload) {
  hold_first();
  const NamedTensors theta17 = weights(17, 17, 17, 17);
  server_.publish(17, theta17, nullptr);
  ASSERT_TRUE(follower_->sync_to(17, content_hash(theta17)).is_ok());
  EXPECT_EQ(server_.broadcast_calls, 0);
  EXPECT_EQ(follower_->held(), 17);
  EXPECT_EQ(values(model_), (std::vector<float>{17, 17, 17, 17}));
}

TEST_F(VersionFollowerTest, WeightsWithAnotherHashThanAnnouncedAreRefused) {
  auto f = follower_->full_download(0, "0123456789abcdef0123456789abcdef");
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("the coordinator announced 0123456789abcdef"), std::string::npos) << f.status().message();
}

TEST_F(VersionFollowerTest, ADownloadOverTheCapItsShapesAllowIsRefused) {
  make_follower(DownloadCaps{16, 16});
  auto f = follower_->full_download(0, theta0_hash());
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("more than the 16 its shapes can encode to"), std::string::npos) << f.status().message();
}

TEST(DownloadCaps, AnFp32EncodingOfTheShapesFitsTheCapAndAByteMoreDoesNot) {
  NamedTensors w = weights(1, 2, 3, 4);
  CodecConfig raw;
  raw.id = CodecId::kFp32;
  raw.zstd_level = 0;
  const std::string bytes = make_codec(raw).value()->encode(w).value();
  EXPECT_EQ(max_encoded_bytes(w, raw), bytes.size());  // without zstd the bound is exact
  const DownloadCaps caps = download_caps(w, raw);
  EXPECT_GE(caps.weights, bytes.size());               // zstd's worst case on top
  EXPECT_TRUE(check_download_size("paris", bytes.size(), bytes.size(), "w").is_ok());
  EXPECT_EQ(check_download_size("paris", bytes.size() + 1, bytes.size(), "w").code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace meshrl::mesh

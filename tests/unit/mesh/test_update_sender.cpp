// Cutting, signing and sending updates (mesh/update_sender.h) and answering audits
// (mesh/audit_answer.h), against a scripted coordinator, with numbers checkable by hand: an update
// is exactly the progress not sent yet, its header claims what the node did and is signed over
// it; the reported reward is the committed rollouts' mean; a retry resends the same signed update
// under the same key, after a rejoin with the new session; a refusal is an answer; the test-only
// attacks send what they say; an audit gets every committed rollout and the drawn texts.
//   build/tests/test_mesh --gtest_filter='UpdateSender*:AuditAnswer*'
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "mesh/audit_answer.h"
#include "mesh/codec.h"
#include "mesh/content_hash.h"
#include "mesh/protocol.h"
#include "mesh/update_sender.h"
#include "mesh/update_signature.h"

namespace meshrl::mesh {
namespace {

// Records every submit; `answer` decides the reply (accept by default). Joins are accepted with
// sessions 42, 43, ... Audit answers are recorded and passed.
class SubmitRecorder : public CoordinatorClient {
 public:
  std::vector<std::pair<v1::UpdateHeader, std::string>> submits;
  std::vector<v1::AuditAnswer> audit_answers;
  std::function<Result<v1::SubmitReply>(const v1::UpdateHeader&)> answer = [](const v1::UpdateHeader&) -> Result<v1::SubmitReply> {
    v1::SubmitReply r;
    r.set_accepted(true);
    return r;
  };
  int joins = 0;
  uint64_t next_session = 42;

  Result<v1::SubmitReply> submit(const v1::UpdateHeader& h, const std::string& payload) override {
    submits.emplace_back(h, payload);
    return answer(h);
  }
  Result<v1::JoinReply> join(const v1::JoinRequest&) override {
    ++joins;
    v1::JoinReply r;
    r.set_accepted(true);
    r.set_protocol_version(kProtocolVersion);
    r.set_session(next_session++);
    r.mutable_manifest()->set_run_id("run-1");
    return r;
  }
  Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer& a) override {
    audit_answers.push_back(a);
    v1::AuditVerdict v;
    v.set_passed(true);
    return v;
  }
  Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest&) override { return invalid_argument("unused"); }
  Result<v1::LeaveReply> leave(const v1::LeaveRequest&) override { return invalid_argument("unused"); }
  Result<Download> download_weights(const std::string&, uint64_t, int64_t, uint64_t) override { return invalid_argument("unused"); }
  Result<Download> download_base(const std::string&, uint64_t, uint64_t) override { return invalid_argument("unused"); }
  Result<Download> get_broadcast(const std::string&, uint64_t, int64_t, uint64_t) override { return invalid_argument("unused"); }
  Status watch(const std::string&, uint64_t, const std::function<bool(const v1::VersionAnnouncement&)>&) override {
    return Status::ok();
  }
};

NamedTensors four_values(float a, float b, float c, float d) {
  NamedTensors w;
  w.names = {"x", "y"};
  w.tensors = {torch::tensor({a, b}), torch::tensor({c, d})};
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

CodecConfig fp32_config() {
  CodecConfig cc;
  cc.id = CodecId::kFp32;
  cc.zstd_level = 0;
  return cc;
}

class UpdateSenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    o_.name = "paris";
    o_.give_up_s = 5;
    o_.max_backoff_s = 0.01;
    limits_.max_decoded_bytes = 16;
    limits_.max_tensors = 2;
    model_ = four_values(0, 0, 0, 0);
    ASSERT_TRUE(session_.join().is_ok());  // session 42, run "run-1"
    client_.joins = 0;
    make_sender("", fp32_config());
  }
  void make_sender(const std::string& misbehave, const CodecConfig& codec) {
    NamedTensors views;
    views.names = model_.names;
    views.tensors = model_.tensors;
    follower_ = std::make_unique<VersionFollower>(session_, tally_, views, make_codec(fp32_config()).value(), limits_,
                                                  download_caps(model_, fp32_config()));
    follower_->rebase(FetchedVersion{four_values(1, 2, 3, 4), 5, "hash-v5"}, /*first=*/true);  // holding version 5
    sender_ = std::make_unique<UpdateSender>(session_, *follower_, tally_, book_, ef_, nullptr, key_, make_codec(codec).value(), limits_,
                                             /*inner_steps=*/3, misbehave);
  }
  void train_locally(float by) {
    torch::NoGradGuard g;
    for (auto& t : model_.tensors) t.add_(by);
  }
  NamedTensors decode(const std::string& bytes) { return decode_update(bytes, limits_).value(); }

  NodeOptions o_;
  SubmitRecorder client_;
  NodeTally tally_{nullptr};
  NodeSession session_{client_, o_, "pk", tally_, nullptr};
  const trust::SigningKey key_ = trust::SigningKey::generate();
  UpdateDecodeLimits limits_;
  NamedTensors model_;
  ScoredRolloutBook book_;
  ErrorFeedback ef_;
  std::unique_ptr<VersionFollower> follower_;
  std::unique_ptr<UpdateSender> sender_;
};

TEST_F(UpdateSenderTest, AnUpdateIsTheProgressNotSentYetSignedOverWhatItClaims) {
  train_locally(0.5f);  // local = v5 + 0.5
  auto out = sender_->cut_update(/*samples=*/12, /*reward=*/0.25);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(values(decode(out.value().bytes)), (std::vector<float>{-0.5, -0.5, -0.5, -0.5}));  // cut - local
  const v1::UpdateHeader& h = out.value().header;
  EXPECT_EQ(h.name(), "paris");
  EXPECT_EQ(h.base_version(), 5);
  EXPECT_EQ(h.n_samples(), 12);
  EXPECT_EQ(h.declared_bytes(), out.value().bytes.size());
  EXPECT_EQ(h.stats().inner_steps(), 3);
  EXPECT_EQ(h.stats().n_scored(), 0);
  EXPECT_DOUBLE_EQ(h.stats().reward_mean(), 0.25);  // nothing committed: the steps' mean stands
  EXPECT_EQ(check_update_signature(h, trust::blake2b_256(out.value().bytes), key_.public_key(), "run-1"), "");
  EXPECT_NE(check_update_signature(h, trust::blake2b_256(out.value().bytes), key_.public_key(), "another-run"), "");
  // Nothing trained since: the next update is zero.
  auto again = sender_->cut_update(12, 0.25);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(values(decode(again.value().bytes)), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_GT(again.value().header.seq(), h.seq());
}

TEST_F(UpdateSenderTest, TheReportedRewardIsTheMeanOfTheCommittedRollouts) {
  book_.add({1, "12", 1.0});
  book_.add({2, "7", 0.0});
  auto out = sender_->cut_update(2, 0.9);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out.value().header.stats().n_scored(), 2);
  EXPECT_DOUBLE_EQ(out.value().header.stats().reward_mean(), 0.5);
  EXPECT_DOUBLE_EQ(out.value().reward, 0.5);
  EXPECT_EQ(out.value().header.stats().scored_digest().size(), 32u);
}

TEST_F(UpdateSenderTest, ALossyCodecKeepsWhatItDroppedForTheNextUpdate) {
  CodecConfig int8;
  int8.block_size = 2;
  int8.zstd_level = 0;
  make_sender("", int8);
  {
    torch::NoGradGuard g;
    model_.tensors[0].add_(torch::tensor({0.3f, 0.001f}));  // 0.001 is below int8's step in a block scaled by 0.3
  }
  auto out = sender_->cut_update(1, 0);
  ASSERT_TRUE(out.is_ok());
  EXPECT_GT(ef_.residual_norm(), 0);
  const std::vector<float> sent = values(decode(out.value().bytes));
  const std::vector<float> left = values(ef_.residual());
  EXPECT_NEAR(sent[1] + left[1], -0.001f, 1e-7);  // sent + residual = the true progress
}

TEST_F(UpdateSenderTest, ARetryResendsTheSameSignedUpdateUnderTheSameKey) {
  int failures = 2;
  client_.answer = [&](const v1::UpdateHeader&) -> Result<v1::SubmitReply> {
    if (failures-- > 0) return io_error("[rpc] SubmitUpdate: connection reset");
    v1::SubmitReply r;
    r.set_accepted(true);
    return r;
  };
  train_locally(1);
  auto out = sender_->cut_update(4, 0.5);
  ASSERT_TRUE(out.is_ok());
  ASSERT_TRUE(sender_->send(std::move(out).value()).is_ok());
  ASSERT_EQ(client_.submits.size(), 3u);
  for (const auto& [h, bytes] : client_.submits) {
    EXPECT_EQ(h.seq(), client_.submits[0].first.seq());
    EXPECT_EQ(h.signature(), client_.submits[0].first.signature());
    EXPECT_EQ(bytes, client_.submits[0].second);
  }
  EXPECT_EQ(sender_->last_accepted_base(), 5);
  EXPECT_EQ(tally_.report().updates_sent, 1);
  EXPECT_EQ(tally_.report().updates_accepted, 1);
  EXPECT_EQ(tally_.report().bytes_up, client_.submits[0].second.size());
}

TEST_F(UpdateSenderTest, ARefusalNotJoinedRejoinsAndResendsWithTheNewSession) {
  bool refused = false;
  client_.answer = [&](const v1::UpdateHeader&) -> Result<v1::SubmitReply> {
    v1::SubmitReply r;
    r.set_accepted(refused);
    if (!refused) r.set_reason("not joined (unknown session or lease expired); join again");
    refused = true;
    return r;
  };
  // The session the node holds (42) is gone at the coordinator: the refusal says "not joined".
  auto out = sender_->cut_update(4, 0.5);
  ASSERT_TRUE(out.is_ok());
  ASSERT_TRUE(sender_->send(std::move(out).value()).is_ok());
  ASSERT_EQ(client_.submits.size(), 2u);
  EXPECT_EQ(client_.joins, 1);
  EXPECT_EQ(client_.submits[0].first.session(), 42u);
  EXPECT_EQ(client_.submits[1].first.session(), 43u);
  EXPECT_EQ(client_.submits[1].first.seq(), client_.submits[0].first.seq());
  EXPECT_EQ(sender_->last_accepted_base(), 5);
}

TEST_F(UpdateSenderTest, ARejectedUpdateIsAnAnswerNotAFailure) {
  client_.answer = [](const v1::UpdateHeader&) -> Result<v1::SubmitReply> {
    v1::SubmitReply r;
    r.set_accepted(false);
    r.set_code("stale");
    r.set_reason("stale: base version 5, current 9");
    return r;
  };
  auto out = sender_->cut_update(4, 0.5);
  ASSERT_TRUE(out.is_ok());
  ASSERT_TRUE(sender_->send(std::move(out).value()).is_ok());
  EXPECT_EQ(client_.submits.size(), 1u);
  EXPECT_EQ(sender_->last_accepted_base(), -1);
  EXPECT_EQ(tally_.report().updates_sent, 1);
  EXPECT_EQ(tally_.report().updates_accepted, 0);
}

TEST_F(UpdateSenderTest, SignFlipSendsMinusTenTimesTheProgressProperlySigned) {
  make_sender("sign_flip_x10", fp32_config());
  train_locally(0.5f);
  auto out = sender_->cut_update(4, 0.5);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(values(decode(out.value().bytes)), (std::vector<float>{5, 5, 5, 5}));  // -10 x (cut - local)
  EXPECT_EQ(check_update_signature(out.value().header, trust::blake2b_256(out.value().bytes), key_.public_key(), "run-1"), "");
}

TEST_F(UpdateSenderTest, TheRepeatAttackSendsAnInflatedCopyFirstAndFourCopiesAfter) {
  make_sender("sign_flip_x10_repeat", fp32_config());
  auto out = sender_->cut_update(4, 0.5);
  ASSERT_TRUE(out.is_ok());
  const int64_t seq = out.value().header.seq();
  ASSERT_TRUE(sender_->send(std::move(out).value()).is_ok());
  ASSERT_EQ(client_.submits.size(), 6u);
  EXPECT_EQ(client_.submits[0].first.n_samples(), 4'000'000'000);
  EXPECT_EQ(client_.submits[0].first.seq(), seq - 1);
  EXPECT_EQ(client_.submits[1].first.seq(), seq);  // the real one
  for (int k = 1; k <= 4; ++k) {
    const v1::UpdateHeader& h = client_.submits[static_cast<size_t>(1 + k)].first;
    EXPECT_EQ(h.seq(), seq + k);
    EXPECT_EQ(h.n_samples(), 4);
    EXPECT_EQ(check_update_signature(h, trust::blake2b_256(client_.submits[0].second), key_.public_key(), "run-1"), "");
  }
  EXPECT_EQ(tally_.report().updates_sent, 1);  // the copies are not the node's updates
}

TEST_F(UpdateSenderTest, TheAuditAReplyAsksForIsAnsweredFromTheCommittedRollouts) {
  book_.add({11, "3", 1.0});
  book_.add({12, "9", 0.0});
  auto out = sender_->cut_update(2, 0.5);
  ASSERT_TRUE(out.is_ok());
  client_.answer = [](const v1::UpdateHeader& h) -> Result<v1::SubmitReply> {
    v1::SubmitReply r;
    r.set_accepted(true);
    r.mutable_audit()->set_base_version(h.base_version());
    r.mutable_audit()->set_seq(h.seq());
    r.mutable_audit()->add_indices(1);
    return r;
  };
  ASSERT_TRUE(sender_->send(std::move(out).value()).is_ok());
  ASSERT_EQ(client_.audit_answers.size(), 1u);
  const v1::AuditAnswer& a = client_.audit_answers[0];
  EXPECT_EQ(a.session(), 42u);
  ASSERT_EQ(a.rollouts_size(), 2);
  EXPECT_EQ(a.rollouts(0).prompt_id(), 11u);
  EXPECT_TRUE(a.rollouts(0).completion().empty());  // not drawn: its hash only
  EXPECT_EQ(a.rollouts(0).completion_hash(), completion_hash("3"));
  EXPECT_EQ(a.rollouts(1).completion(), "9");       // drawn: its text
  EXPECT_DOUBLE_EQ(a.rollouts(1).claimed_reward(), 0.0);
}

TEST(AuditAnswer, ForgottenRolloutsGetNoAnswerAndIndicesOutsideTheSetAreIgnored) {
  ScoredRolloutBook book(/*keep_sealed=*/1);
  book.add({1, "a", 1.0});
  (void)book.seal(3, 100);
  book.add({2, "b", 0.0});
  (void)book.seal(3, 101);  // only the last sealed set is kept
  v1::AuditRequest q;
  q.set_base_version(3);
  q.set_seq(100);
  EXPECT_FALSE(make_audit_answer("paris", book, q).has_value());
  q.set_seq(101);
  q.add_indices(-1);
  q.add_indices(7);
  q.add_indices(0);
  auto a = make_audit_answer("paris", book, q);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->name(), "paris");
  EXPECT_EQ(a->seq(), 101);
  ASSERT_EQ(a->rollouts_size(), 1);
  EXPECT_EQ(a->rollouts(0).completion(), "b");
}

}  // namespace
}  // namespace meshrl::mesh

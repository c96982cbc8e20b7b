// Reward honesty (src/mesh/rollout_commitment.h, reward_audit.h): a node commits to its scored
// rollouts, the coordinator draws which to re-score and checks the claims with the task's
// verifier. Honest answers pass; an inflated reward, a swapped completion, summaries changed
// after the commitment, a wrong count or a misreported mean fail, naming what did not hold.
//   build-honest/tests/test_mesh --gtest_filter='RewardAudit*:RolloutCommitment*:AuditTally*'
#include <gtest/gtest.h>

#include <set>

#include "mesh/reward_audit.h"
#include "mesh/rollout_commitment.h"
#include "mesh/sharded_task.h"

namespace meshrl::mesh {
namespace {

std::shared_ptr<const tasks::Task> arithmetic() {
  tasks::TaskConfig c;
  c.kind = "arithmetic";
  return std::shared_ptr<const tasks::Task>(tasks::make_task(c).value());
}

// Eight rollouts of prompts 100..107: even ones answered correctly (reward 1), odd ones wrong (0).
std::vector<ScoredRollout> honest_rollouts(const tasks::Task& task) {
  std::vector<ScoredRollout> out;
  for (uint64_t s = 100; s < 108; ++s) {
    const tasks::Problem p = task.sample(s);
    const std::string text = s % 2 == 0 ? *task.solution(p) : std::string("nonsense\n");
    out.push_back({s, text, task.score(p, text).value().reward});
  }
  return out;
}

v1::AuditAnswer answer_of(const std::vector<ScoredRollout>& rs, const std::vector<int64_t>& drawn) {
  v1::AuditAnswer a;
  std::set<int64_t> d(drawn.begin(), drawn.end());
  for (size_t i = 0; i < rs.size(); ++i) {
    v1::ScoredRollout* m = a.add_rollouts();
    m->set_prompt_id(rs[i].prompt_id);
    m->set_completion_hash(completion_hash(rs[i].completion));
    m->set_claimed_reward(rs[i].claimed_reward);
    if (d.count(static_cast<int64_t>(i))) m->set_completion(rs[i].completion);
  }
  return a;
}

AuditClaim commit(const std::vector<ScoredRollout>& rs, std::vector<int64_t> indices) {
  ScoredRolloutBook book;
  for (const auto& r : rs) book.add(r);
  const RolloutCommitment c = book.seal(0, 1);
  return {c.n, c.digest, c.claimed_mean, std::move(indices)};
}

TEST(RolloutCommitment, LeavesBindEveryFieldAndTheBookKeepsTheLastSealedSets) {
  const std::string h = completion_hash("7\n");
  const std::string leaf = rollout_leaf(5, h, 1.0);
  EXPECT_EQ(leaf.size(), 32u);
  EXPECT_EQ(leaf, rollout_leaf(5, h, 1.0));
  EXPECT_NE(leaf, rollout_leaf(6, h, 1.0));
  EXPECT_NE(leaf, rollout_leaf(5, completion_hash("8\n"), 1.0));
  EXPECT_NE(leaf, rollout_leaf(5, h, 1.0000001));
  EXPECT_NE(leaves_digest({leaf, rollout_leaf(6, h, 0)}), leaves_digest({rollout_leaf(6, h, 0), leaf}));  // order counts

  ScoredRolloutBook book(2);
  book.add({5, "7\n", 1.0});
  book.add({6, "x\n", 0.0});
  const RolloutCommitment c = book.seal(3, 10);
  EXPECT_EQ(c.n, 2);
  EXPECT_DOUBLE_EQ(c.claimed_mean, 0.5);
  EXPECT_EQ(c.digest, leaves_digest({rollout_leaf(5, h, 1.0), rollout_leaf(6, completion_hash("x\n"), 0.0)}));
  EXPECT_EQ(book.seal(3, 11).n, 0);  // sealing empties the open set
  book.seal(4, 12);
  EXPECT_FALSE(book.sealed(3, 10).has_value());  // only the last 2 sealed sets are kept
  ASSERT_TRUE(book.sealed(4, 12).has_value());
}

TEST(RewardAudit, DrawsAreDistinctInRangeReproducibleAndAtTheConfiguredRate) {
  const auto a = audit_indices(42, "paris.v3.s17", 1000, 8);
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 8u);
  for (int64_t i : a) EXPECT_TRUE(i >= 0 && i < 1000);
  EXPECT_EQ(a, audit_indices(42, "paris.v3.s17", 1000, 8));
  EXPECT_NE(a, audit_indices(43, "paris.v3.s17", 1000, 8));  // another coordinator secret, another draw
  EXPECT_EQ(audit_indices(1, "k", 3, 8), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(audit_indices(1, "k", 0, 8).empty());

  int drawn = 0;
  for (int i = 0; i < 4000; ++i) drawn += audit_drawn(7, "node.v1.s" + std::to_string(i), 0.25);
  EXPECT_NEAR(drawn / 4000.0, 0.25, 0.03);  // binomial sd 0.007
  EXPECT_FALSE(audit_drawn(7, "x", 0.0));
  EXPECT_TRUE(audit_drawn(7, "x", 1.0));
}

TEST(RewardAudit, HonestClaimsPassOnTheRegeneratedProblems) {
  const auto task = arithmetic();
  const auto rs = honest_rollouts(*task);
  const std::vector<int64_t> all{0, 1, 2, 3, 4, 5, 6, 7};
  const AuditOutcome o = check_audit_answer(*task, commit(rs, all), answer_of(rs, all), 1e-6);
  EXPECT_TRUE(o.passed) << o.reason;
}

TEST(RewardAudit, AnInflatedRewardFailsNamingTheRollout) {
  const auto task = arithmetic();
  auto rs = honest_rollouts(*task);
  rs[3].claimed_reward += 1;  // committed, so the digest and mean hold: only re-scoring catches it
  const AuditOutcome o = check_audit_answer(*task, commit(rs, {1, 3}), answer_of(rs, {1, 3}), 1e-6);
  EXPECT_FALSE(o.passed);
  EXPECT_NE(o.reason.find("rollout 3"), std::string::npos) << o.reason;
  EXPECT_NE(o.reason.find("claimed reward 1, the verifier gives 0"), std::string::npos) << o.reason;
  // A draw that misses the lie passes: the audit is a sample, its power is the draw rate.
  EXPECT_TRUE(check_audit_answer(*task, commit(rs, {0, 2}), answer_of(rs, {0, 2}), 1e-6).passed);
}

TEST(RewardAudit, AnswersThatDoNotMatchTheCommitmentFail) {
  const auto task = arithmetic();
  const auto rs = honest_rollouts(*task);
  const AuditClaim claim = commit(rs, {2});
  auto expect_fail = [&](const AuditClaim& c, const v1::AuditAnswer& a, const std::string& why) {
    const AuditOutcome o = check_audit_answer(*task, c, a, 1e-6);
    EXPECT_FALSE(o.passed) << why;
    EXPECT_NE(o.reason.find(why), std::string::npos) << o.reason;
  };
  {  // another completion sent for a drawn rollout than the one committed
    v1::AuditAnswer a = answer_of(rs, {2});
    a.mutable_rollouts(2)->set_completion("99\n");
    expect_fail(claim, a, "not the committed completion");
  }
  {  // a claim changed after the commitment (a correct text swapped in, with its hash)
    auto other = rs;
    other[1].completion = *task->solution(task->sample(other[1].prompt_id));
    other[1].claimed_reward = 1;
    expect_fail(claim, answer_of(other, {2}), "digest");
  }
  {  // fewer rollouts than committed
    v1::AuditAnswer a = answer_of(rs, {2});
    a.mutable_rollouts()->RemoveLast();
    expect_fail(claim, a, "committed to 8");
  }
  {  // the header's reward_mean is not the claims' mean
    AuditClaim c = claim;
    c.reward_mean = 0.9;
    expect_fail(c, answer_of(rs, {2}), "reported reward_mean 0.9");
  }
  {  // nothing committed
    AuditClaim c;
    expect_fail(c, v1::AuditAnswer(), "committed to no scored rollouts");
  }
}

TEST(RewardAudit, ASharedNodesPromptIdRegeneratesItsProblemOnTheWholeTask) {
  const auto whole = arithmetic();
  const ShardedTask shard(whole, 1, 3);
  for (uint64_t s = 0; s < 50; ++s) {
    const tasks::Problem p = shard.sample(s);
    EXPECT_EQ(whole->sample(shard.inner_seed(s)).prompt, p.prompt);
    EXPECT_EQ(ShardedTask::shard_of(p.prompt, 3), 1u);
  }
  tasks::TaskConfig jsonl;
  jsonl.kind = "jsonl";
  EXPECT_FALSE(task_is_shared(jsonl));
  tasks::TaskConfig countdown;
  countdown.kind = "countdown";
  EXPECT_TRUE(task_is_shared(countdown));
}

TEST(AuditTally, FlagsOnTheFirstFailureAndExcludesAfterTheConfiguredCount) {
  AuditTally t(2);
  EXPECT_FALSE(t.record("liar", false));  // flagged
  EXPECT_FALSE(t.excluded("liar"));
  EXPECT_FALSE(t.record("liar", true));   // a pass does not wash a failure away
  EXPECT_TRUE(t.record("liar", false));   // the second failure excludes
  EXPECT_TRUE(t.excluded("liar"));
  EXPECT_FALSE(t.record("liar", false));  // excluded once, reported once
  EXPECT_EQ(t.failures("liar"), 3);
  EXPECT_EQ(t.passes("liar"), 1);
  EXPECT_FALSE(t.excluded("honest"));
}

}  // namespace
}  // namespace meshrl::mesh

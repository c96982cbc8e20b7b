// The audit desk (mesh/audit_desk.h): audits only for a task the coordinator holds (or
// audit_private), a drawn update held with its claim and request until it is taken or its deadline
// passes, an honest answer passing and an inflated one failing through check(), and the tally that
// excludes a node at audit_exclude_after failures.
//   build/tests/test_mesh --gtest_filter='AuditDesk*'
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "mesh/audit_desk.h"
#include "mesh/rollout_commitment.h"

namespace meshrl::mesh {
namespace {

MeshSection audited(double rate = 1.0) {
  MeshSection m;
  m.audit_rate = rate;
  m.audit_samples = 2;
  m.audit_deadline_s = 30;
  m.audit_exclude_after = 2;
  return m;
}

tasks::TaskConfig task_of(const std::string& kind) {
  tasks::TaskConfig t;
  t.kind = kind;
  return t;
}

// Four rollouts of prompts 10..13 answered correctly, committed as a node does.
struct Rollouts {
  std::shared_ptr<const tasks::Task> task{tasks::make_task(task_of("arithmetic")).value()};
  std::vector<ScoredRollout> rs;
  v1::RewardStats stats;
  Rollouts() {
    ScoredRolloutBook book;
    for (uint64_t s = 10; s < 14; ++s) {
      const tasks::Problem p = task->sample(s);
      rs.push_back({s, *task->solution(p), 1.0});
      book.add(rs.back());
    }
    const RolloutCommitment c = book.seal(0, 1);
    stats.set_n_scored(c.n);
    stats.set_scored_digest(c.digest);
    stats.set_reward_mean(c.claimed_mean);
  }
  v1::AuditAnswer answer(const std::vector<int64_t>& drawn, bool swap_first = false) const {
    v1::AuditAnswer a;
    for (size_t i = 0; i < rs.size(); ++i) {
      v1::ScoredRollout* m = a.add_rollouts();
      m->set_prompt_id(rs[i].prompt_id);
      m->set_completion_hash(completion_hash(rs[i].completion));
      m->set_claimed_reward(rs[i].claimed_reward);
      for (int64_t d : drawn)
        if (d == static_cast<int64_t>(i)) m->set_completion(swap_first && d == drawn[0] ? std::string("wrong\n") : rs[i].completion);
    }
    return a;
  }
};

NamedTensors update() { return {{"w"}, {torch::ones({3})}}; }

TEST(AuditDesk, AuditsRunOnlyForATaskTheCoordinatorHolds) {
  EXPECT_TRUE(AuditDesk(audited(), task_of("arithmetic"), 1).on());
  EXPECT_TRUE(AuditDesk(audited(), task_of("countdown"), 1).on());
  const AuditDesk jsonl(audited(), task_of("jsonl"), 1);
  EXPECT_FALSE(jsonl.on());
  EXPECT_TRUE(jsonl.asked_but_off());
  MeshSection priv = audited();
  priv.audit_private = true;
  EXPECT_TRUE(AuditDesk(priv, task_of("jsonl"), 1).on());
  const AuditDesk off(audited(0.0), task_of("arithmetic"), 1);
  EXPECT_FALSE(off.on());
  EXPECT_FALSE(off.asked_but_off());
}

TEST(AuditDesk, ADrawnUpdateIsHeldWithItsClaimUntilTaken) {
  const Rollouts r;
  AuditDesk desk(audited(), task_of("arithmetic"), 42);
  const store::UpdateKey key{"alice", 3, 77};
  const auto q = desk.hold_if_drawn(key, update(), 1.5, 4, r.stats, 100);
  ASSERT_TRUE(q.has_value());  // rate 1: every update is drawn
  EXPECT_EQ(q->base_version(), 3);
  EXPECT_EQ(q->seq(), 77);
  EXPECT_EQ(q->indices_size(), 2);  // audit_samples of the 4 committed
  EXPECT_DOUBLE_EQ(q->deadline_s(), 30);
  EXPECT_EQ(desk.n_held(), 1);
  const auto claim = desk.claim_of(key.str());
  ASSERT_TRUE(claim.has_value());
  EXPECT_EQ(claim->n_scored, 4);
  EXPECT_EQ(claim->digest, r.stats.scored_digest());
  EXPECT_EQ(claim->indices, std::vector<int64_t>(q->indices().begin(), q->indices().end()));
  const auto held = desk.take(key.str());
  ASSERT_TRUE(held.has_value());
  EXPECT_DOUBLE_EQ(held->norm, 1.5);
  EXPECT_EQ(held->n_samples, 4);
  EXPECT_TRUE(torch::equal(held->update.tensors[0], torch::ones({3})));
  EXPECT_FALSE(desk.take(key.str()).has_value());  // answered once
  EXPECT_FALSE(desk.claim_of(key.str()).has_value());
}

TEST(AuditDesk, NothingIsHeldWhenAuditsAreOff) {
  const Rollouts r;
  AuditDesk desk(audited(), task_of("jsonl"), 42);
  EXPECT_FALSE(desk.hold_if_drawn({"alice", 3, 77}, update(), 1, 4, r.stats, 100).has_value());
  EXPECT_EQ(desk.n_held(), 0);
}

TEST(AuditDesk, TheSameSecretDrawsTheSameRollouts) {
  const Rollouts r;
  AuditDesk a(audited(), task_of("arithmetic"), 7), b(audited(), task_of("arithmetic"), 7);
  const auto qa = a.hold_if_drawn({"alice", 3, 77}, update(), 1, 4, r.stats, 0);
  const auto qb = b.hold_if_drawn({"alice", 3, 77}, update(), 1, 4, r.stats, 0);
  ASSERT_TRUE(qa && qb);
  EXPECT_EQ(std::vector<int64_t>(qa->indices().begin(), qa->indices().end()),
            std::vector<int64_t>(qb->indices().begin(), qb->indices().end()));
}

TEST(AuditDesk, AnHonestAnswerPassesAndASwappedCompletionFails) {
  const Rollouts r;
  AuditDesk desk(audited(), task_of("arithmetic"), 42);
  const store::UpdateKey key{"alice", 3, 77};
  const auto q = desk.hold_if_drawn(key, update(), 1, 4, r.stats, 0);
  ASSERT_TRUE(q.has_value());
  const std::vector<int64_t> drawn(q->indices().begin(), q->indices().end());
  const AuditClaim claim = *desk.claim_of(key.str());
  EXPECT_TRUE(desk.check(*r.task, claim, r.answer(drawn)).passed);
  const AuditOutcome bad = desk.check(*r.task, claim, r.answer(drawn, true));
  EXPECT_FALSE(bad.passed);
  EXPECT_FALSE(bad.reason.empty());
}

TEST(AuditDesk, UnansweredAuditsExpireAtTheirDeadline) {
  const Rollouts r;
  AuditDesk desk(audited(), task_of("arithmetic"), 42);
  desk.hold_if_drawn({"bob", 1, 5}, update(), 1, 4, r.stats, 100);   // deadline 130
  desk.hold_if_drawn({"alice", 1, 6}, update(), 1, 4, r.stats, 110);  // deadline 140
  EXPECT_TRUE(desk.expire(129.9).empty());
  const std::vector<ExpiredAudit> first = desk.expire(130);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].key.node, "bob");
  EXPECT_EQ(first[0].why, "no answer to the reward audit within 30 s");
  EXPECT_EQ(desk.n_held(), 1);
  desk.clear();
  EXPECT_EQ(desk.n_held(), 0);
  EXPECT_TRUE(desk.expire(1000).empty());
}

TEST(AuditDesk, TheSecondFailureExcludesTheNode) {
  AuditDesk desk(audited(), task_of("arithmetic"), 42);
  EXPECT_FALSE(desk.record("mallory", false));  // flagged
  EXPECT_FALSE(desk.excluded("mallory"));
  EXPECT_FALSE(desk.record("mallory", true));
  EXPECT_TRUE(desk.record("mallory", false));  // this one excludes
  EXPECT_TRUE(desk.excluded("mallory"));
  EXPECT_EQ(desk.failures("mallory"), 2);
  EXPECT_EQ(desk.exclude_after(), 2);
  desk.restore_excluded("carol");
  EXPECT_TRUE(desk.excluded("carol"));
  EXPECT_FALSE(desk.excluded("alice"));
}

}  // namespace
}  // namespace meshrl::mesh

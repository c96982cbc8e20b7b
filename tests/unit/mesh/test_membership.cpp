// Membership (mesh/membership.h) on a clock of plain numbers: joins refused in their order, one
// live lease per name, a rejoin with another key reported, leases renewed and expired, the quorum
// count during the grace after a resume, and when every node is gone.
//   build/tests/test_mesh --gtest_filter='Membership*'
#include <gtest/gtest.h>

#include "mesh/membership.h"
#include "mesh/protocol.h"

namespace meshrl::mesh {
namespace {

constexpr double kLease = 30;

v1::JoinRequest request(const std::string& name, char key = 'k') {
  v1::JoinRequest r;
  r.set_protocol_version(kProtocolVersion);
  r.set_name(name);
  r.set_signing_key(std::string(32, key));
  return r;
}

JoinDecision join(Membership& m, const v1::JoinRequest& r, double now = 0) { return m.join(r, "run-1", "model-1", now); }

TEST(Membership, AJoinGetsALiveSessionAndARecord) {
  Membership m(kLease);
  const JoinDecision d = join(m, request("alice"));
  ASSERT_TRUE(d.accepted) << d.reason;
  EXPECT_NE(d.session, 0u);
  EXPECT_FALSE(d.rejoin);
  EXPECT_EQ(m.n_online(), 1);
  EXPECT_TRUE(m.session_ok("alice", d.session, 1));
  EXPECT_FALSE(m.session_ok("alice", d.session + 2, 1));
  EXPECT_FALSE(m.session_ok("bob", d.session, 1));
  EXPECT_EQ(m.records().at("alice").name, "alice");
  EXPECT_EQ(m.signing_key("alice"), std::string(32, 'k'));
  EXPECT_EQ(m.signing_key("bob"), "");
}

TEST(Membership, JoinsAreRefusedInTheirOrder) {
  Membership m(kLease);
  auto refused = [&](v1::JoinRequest r, const std::string& expect) {
    const JoinDecision d = join(m, r);
    EXPECT_FALSE(d.accepted);
    EXPECT_FALSE(d.rate_limited);
    EXPECT_NE(d.reason.find(expect), std::string::npos) << d.reason;
  };
  v1::JoinRequest r = request("Bad Name");
  r.set_protocol_version(kProtocolVersion + 1);
  refused(r, "protocol version");  // before the name
  refused(request("Bad Name"), "may only use");
  r = request("alice");
  r.set_run_id("run-2");
  r.set_model_config_hash("model-2");
  refused(r, "configured for run run-2");  // before the model
  r.set_run_id("run-1");
  refused(r, "model (config hash model-2)");
  r = request("alice");
  r.clear_signing_key();
  refused(r, "no Ed25519 signing key");
  ASSERT_TRUE(join(m, request("alice")).accepted);
  refused(request("alice"), "already joined (its lease expires in 30.0 s)");
  EXPECT_EQ(m.n_online(), 1);
}

TEST(Membership, JoinsPerNameAreRateLimitedBeforeAnyCheck) {
  Membership m(kLease);
  v1::JoinRequest bad = request("mallory");
  bad.set_protocol_version(0);
  for (int64_t i = 0; i < Membership::kMaxJoinsPerMinute; ++i) EXPECT_FALSE(join(m, bad, 1).rate_limited);
  const JoinDecision d = join(m, request("mallory"), 2);
  EXPECT_TRUE(d.rate_limited);
  EXPECT_FALSE(d.accepted);
  EXPECT_EQ(d.reason.rfind("rate_limited: ", 0), 0u) << d.reason;
  EXPECT_TRUE(join(m, request("alice"), 2).accepted);  // per name
  EXPECT_TRUE(join(m, request("mallory"), 62).accepted);  // a minute later
}

TEST(Membership, ARejoinAfterLeavingReportsAReplacedKey) {
  Membership m(kLease);
  const JoinDecision first = join(m, request("alice", 'a'));
  v1::NodeProgress p;
  p.set_version(3);
  m.leave("alice", p);
  EXPECT_EQ(m.n_online(), 0);
  EXPECT_TRUE(m.records().at("alice").left);
  EXPECT_EQ(m.records().at("alice").last_progress.version(), 3);
  EXPECT_FALSE(m.session_ok("alice", first.session, 1));
  const JoinDecision again = join(m, request("alice", 'b'), 2);
  ASSERT_TRUE(again.accepted);
  EXPECT_TRUE(again.rejoin);
  ASSERT_TRUE(again.replaced_key.has_value());
  EXPECT_EQ(*again.replaced_key, std::string(32, 'a'));
  EXPECT_EQ(m.signing_key("alice"), std::string(32, 'b'));
  EXPECT_FALSE(m.records().at("alice").left);
}

TEST(Membership, LeasesAreRenewedByUseAndExpireInNameOrder) {
  Membership m(kLease);
  const uint64_t sa = join(m, request("alice"), 0).session;
  join(m, request("bob"), 0);
  join(m, request("carol"), 0);
  EXPECT_TRUE(m.session_ok("alice", sa, 20));  // renewed at 20
  EXPECT_TRUE(m.expire(30).empty());           // silent for exactly a lease: still held
  const std::vector<ExpiredLease> gone = m.expire(31);
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone[0].name, "bob");
  EXPECT_EQ(gone[1].name, "carol");
  EXPECT_DOUBLE_EQ(gone[0].silent_s, 31);
  EXPECT_EQ(m.n_online(), 1);
  const std::vector<LeaseView> leases = m.leases(25);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].name, "alice");
  EXPECT_DOUBLE_EQ(leases[0].last_seen_age_s, 5);
  EXPECT_DOUBLE_EQ(leases[0].joined_age_s, 25);
}

TEST(Membership, AfterAResumeTheExpectedNodesCountUntilTheGraceEnds) {
  Membership m(kLease);
  m.restore({"alice", "bob", "carol"}, {"alice", "bob", "carol", "dave"}, 100);
  join(m, request("alice"), 50);
  join(m, request("erin"), 50);
  const auto none = [](const std::string&) { return false; };
  EXPECT_EQ(m.quorum_nodes(60, none), 4);   // alice, bob, carol expected; erin new
  EXPECT_EQ(m.quorum_nodes(100, none), 2);  // the grace is over: the live leases only
  EXPECT_EQ(m.quorum_nodes(100, [](const std::string& n) { return n == "erin"; }), 1);  // excluded nodes count for nothing
}

TEST(Membership, AllNodesAreGoneOnlyWhenEveryKnownNodeLeftCleanly) {
  Membership m(kLease);
  EXPECT_TRUE(m.all_nodes_gone());
  m.restore({}, {"dave"}, 0);  // joined before a restart, never left
  EXPECT_FALSE(m.all_nodes_gone());
  join(m, request("dave"), 1);
  EXPECT_FALSE(m.all_nodes_gone());  // holds a lease
  m.leave("dave", {});
  EXPECT_TRUE(m.all_nodes_gone());
  join(m, request("erin"), 2);
  m.expire(100);                      // dropped, not left
  EXPECT_FALSE(m.all_nodes_gone());
}

TEST(Membership, RecordsAreCreatedOnlyWhenAsked) {
  Membership m(kLease);
  EXPECT_EQ(m.find_record("zoe"), nullptr);
  m.record("zoe").bytes_down += 5;
  ASSERT_NE(m.find_record("zoe"), nullptr);
  EXPECT_EQ(m.find_record("zoe")->bytes_down, 5u);
  EXPECT_EQ(m.find_record("zoe")->name, "");  // the caller names a record it creates
}

}  // namespace
}  // namespace meshrl::mesh

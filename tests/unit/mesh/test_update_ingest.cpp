// Update ingest (mesh/update_ingest.h) without a ledger or a run directory: each check refuses
// with its code and writes where the table says, an earlier check wins over every later one, the
// state is asked lazily (nothing after a failed step), the rate limit counts every attempt, and an
// admitted update carries the book's entry and decision.
//   build/tests/test_mesh --gtest_filter='UpdateIngest*'
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "mesh/protocol.h"
#include "mesh/update_ingest.h"
#include "mesh/update_signature.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {
namespace {

constexpr const char* kRunId = "run-ingest";
constexpr int64_t kVersion = 5;

NamedTensors layout_of(int64_t n) { return {{"w"}, {torch::zeros({n})}}; }

// The coordinator's state, as plain fields; every call is written to `asked`.
struct FakeState final : IngestState {
  bool session = true;
  std::string key;
  std::optional<store::UpdateRow> row;
  std::optional<int64_t> last_seq;
  bool is_excluded = false, is_finished = false;
  BookDecision decision;
  NamedTensors run_layout = layout_of(4);
  mutable std::vector<std::string> asked;

  FakeState() {
    decision.accepted = true;
    decision.count_now = true;
  }
  bool session_ok(const std::string&, uint64_t) override { return asked.push_back("session_ok"), session; }
  const std::string& signing_key(const std::string&) const override { return asked.push_back("signing_key"), key; }
  Result<std::optional<store::UpdateRow>> find(const store::UpdateKey&) const override { return asked.push_back("find"), row; }
  Result<std::optional<int64_t>> last_accepted_seq(const std::string&) const override {
    return asked.push_back("last_accepted_seq"), last_seq;
  }
  bool excluded(const std::string&) const override { return asked.push_back("excluded"), is_excluded; }
  int64_t version() const override { return kVersion; }
  bool finished() const override { return asked.push_back("finished"), is_finished; }
  BookDecision offer(const RoundEntry&) const override { return asked.push_back("offer"), decision; }
  const NamedTensors& layout() const override { return asked.push_back("layout"), run_layout; }
};

double now_us() {
  return 1e6 * std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One update that passes every check, and the knobs each check's test turns.
struct Case {
  IngestRules rules;
  v1::UpdateHeader header;
  std::string payload = std::string(64, 'x');
  std::string sign_run_id = kRunId;
  bool sign = true;
  bool wrong_key = false;
  int64_t payload_bytes_delta = 0;  // arrived minus declared
  Result<NamedTensors> decoded = layout_of(4);
  double norm = 1.0;
  int n_history = 0;  // accepted norms of 1 before this one
  FakeState state;

  Case() {
    rules.run_id = kRunId;
    rules.max_update_bytes = 1 << 20;
    rules.param_count = 4;
    rules.audit_on = true;
    rules.audit_exclude_after = 2;
    rules.round.max_staleness = 2;
    rules.round.max_samples_per_update = 8;
    rules.norm_bound_factor = 10;
    rules.norm_window = 8;
    header.set_protocol_version(kProtocolVersion);
    header.set_name("alice");
    header.set_session(7);
    header.set_base_version(kVersion);
    header.set_seq(static_cast<int64_t>(now_us()));
    header.set_n_samples(8);
    header.mutable_stats()->set_n_scored(8);
    header.mutable_stats()->set_reward_mean(0.5);
    header.set_declared_bytes(payload.size());
  }

  IngestVerdict run() {
    static const trust::SigningKey key = trust::SigningKey::generate(), other = trust::SigningKey::generate();
    state.key = key.public_key();
    const auto protocol = header.protocol_version();
    if (sign) sign_update(header, sign_run_id, payload, wrong_key ? other : key);
    header.set_protocol_version(protocol);
    UpdateIngest ingest(rules);
    for (int i = 0; i < n_history; ++i) ingest.accepted(1.0);
    UpdateArrival a;
    a.header = &header;
    a.payload_bytes = static_cast<uint64_t>(static_cast<int64_t>(header.declared_bytes()) + payload_bytes_delta);
    a.digest = trust::blake2b_256(payload);
    if (decoded.is_ok()) a.decoded = &decoded.value();
    else a.decode_error = decoded.status().message();
    a.norm = norm;
    a.now_s = 100;
    a.now_us = now_us();
    return ingest.check(a, state);
  }
};

// Each check, in the documented order, as the change to a passing update that fails it; the
// outcome it gives, and whether the refusal is recorded under the key.
struct Step {
  std::string name;
  std::function<void(Case&)> apply;
  IngestOutcome outcome;
  RejectCode code;
  bool recorded;
};

std::vector<Step> steps() {
  using O = IngestOutcome;
  using C = RejectCode;
  return {
      {"session", [](Case& c) { c.state.session = false; }, O::kNotJoined, C::kInternal, false},
      {"protocol", [](Case& c) { c.header.set_protocol_version(kProtocolVersion + 1); }, O::kRefused, C::kProtocol, false},
      {"size", [](Case& c) { c.rules.max_update_bytes = 10; }, O::kRefused, C::kSize, false},
      {"larger", [](Case& c) { c.payload_bytes_delta = 1; }, O::kRefused, C::kSize, false},
      {"unsigned", [](Case& c) { c.sign = false; }, O::kRefused, C::kBadSignature, false},
      {"wrong_run", [](Case& c) { c.sign_run_id = "another-run"; }, O::kRefused, C::kWrongRun, false},
      {"bad_signature", [](Case& c) { c.wrong_key = true; }, O::kRefused, C::kBadSignature, false},
      {"retry", [](Case& c) { c.state.row = store::UpdateRow{}; }, O::kRetry, C::kInternal, false},
      {"seq_ahead", [](Case& c) { c.header.set_seq(static_cast<int64_t>(now_us() + 1e6 * 3600)); }, O::kRefused, C::kSeqAhead, true},
      {"replay", [](Case& c) { c.state.last_seq = INT64_MAX; }, O::kRefused, C::kReplay, false},
      {"excluded", [](Case& c) { c.state.is_excluded = true; }, O::kRefused, C::kExcluded, true},
      {"finished", [](Case& c) { c.state.is_finished = true; }, O::kRefused, C::kFinished, true},
      {"stale", [](Case& c) { c.header.set_base_version(kVersion - 3); }, O::kRefused, C::kStale, true},
      {"n_scored", [](Case& c) { c.header.mutable_stats()->set_n_scored(7); }, O::kRefused, C::kClaim, true},
      {"one_vote",
       [](Case& c) {
         c.state.decision = BookDecision{};
         c.state.decision.reason = "'alice' already has an update in this round";
       },
       O::kRefused, C::kOneVote, true},
      {"malformed", [](Case& c) { c.decoded = invalid_argument("bad magic"); }, O::kRefused, C::kMalformed, true},
      {"shape", [](Case& c) { c.state.run_layout = layout_of(5); }, O::kRefused, C::kShape, true},
      {"norm", [](Case& c) { c.n_history = 3, c.norm = 100; }, O::kRefused, C::kNorm, true},
  };
}

TEST(UpdateIngest, APassingUpdateIsAdmittedWithTheBooksEntry) {
  Case c;
  c.state.decision.count_now = false;  // as the book says: held for the close
  const IngestVerdict v = c.run();
  ASSERT_EQ(v.outcome, IngestOutcome::kAdmitted) << v.detail;
  EXPECT_TRUE(v.payload_counted);
  EXPECT_EQ(v.entry.key.node, "alice");
  EXPECT_EQ(v.entry.key.base_version, kVersion);
  EXPECT_EQ(v.entry.staleness, 0);
  EXPECT_DOUBLE_EQ(v.entry.weight, 8.0);  // 8 samples x staleness weight 1
  EXPECT_TRUE(v.entry.has_stats);
  EXPECT_DOUBLE_EQ(v.entry.reward_mean, 0.5);
  EXPECT_TRUE(v.placed.accepted);
  EXPECT_FALSE(v.placed.count_now);
  // The ledger's lookups come after the signature and in this order; the layout is read last.
  EXPECT_EQ(c.state.asked, (std::vector<std::string>{"session_ok", "signing_key", "find", "last_accepted_seq", "excluded",
                                                     "finished", "offer", "layout"}));
}

TEST(UpdateIngest, EachCheckRefusesWithItsCodeAndWritesWhereTheTableSays) {
  for (const Step& s : steps()) {
    Case c;
    s.apply(c);
    const IngestVerdict v = c.run();
    EXPECT_EQ(v.outcome, s.outcome) << s.name << ": " << v.detail;
    if (s.outcome != IngestOutcome::kRefused) continue;
    EXPECT_EQ(v.code, s.code) << s.name << ": " << reject_code_name(v.code) << " " << v.detail;
    EXPECT_EQ(v.recorded, s.recorded) << s.name;
    EXPECT_FALSE(v.detail.empty()) << s.name;
    EXPECT_EQ(v.payload_counted, s.code != RejectCode::kProtocol) << s.name;
  }
}

TEST(UpdateIngest, AnEarlierCheckWinsOverEveryLaterOne) {
  const std::vector<Step> all = steps();
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) {
      Case c;
      all[j].apply(c);
      all[i].apply(c);
      const IngestVerdict v = c.run();
      EXPECT_EQ(v.outcome, all[i].outcome) << all[i].name << " before " << all[j].name;
      if (all[i].outcome == IngestOutcome::kRefused)
        EXPECT_EQ(v.code, all[i].code) << all[i].name << " before " << all[j].name << ": " << v.detail;
    }
}

TEST(UpdateIngest, NothingIsAskedAfterAFailedStep) {
  Case unjoined;
  unjoined.state.session = false;
  EXPECT_EQ(unjoined.run().outcome, IngestOutcome::kNotJoined);
  EXPECT_EQ(unjoined.state.asked, std::vector<std::string>{"session_ok"});

  // A forged header learns nothing about the key: the ledger is not consulted.
  Case forged;
  forged.wrong_key = true;
  EXPECT_EQ(forged.run().code, RejectCode::kBadSignature);
  EXPECT_EQ(forged.state.asked, (std::vector<std::string>{"session_ok", "signing_key"}));

  // A retry is answered from its row before the seq is looked at.
  Case retry;
  store::UpdateRow row;
  row.state = store::UpdateState::kRejected;
  row.reason = "stale: too old";
  retry.state.row = row;
  const IngestVerdict v = retry.run();
  ASSERT_EQ(v.outcome, IngestOutcome::kRetry);
  EXPECT_EQ(v.retry_row.reason, "stale: too old");
  EXPECT_EQ(retry.state.asked, (std::vector<std::string>{"session_ok", "signing_key", "find"}));
}

TEST(UpdateIngest, TheRateLimitCountsEveryAttemptAndWritesNothing) {
  Case c;
  c.rules.max_updates_per_minute = 2;
  c.decoded = invalid_argument("bad magic");  // refused attempts count too
  UpdateIngest ingest(c.rules);
  sign_update(c.header, kRunId, c.payload, trust::SigningKey::generate());
  UpdateArrival a;
  a.header = &c.header;
  a.payload_bytes = c.payload.size();
  a.decode_error = c.decoded.status().message();
  a.now_s = 100;
  a.now_us = now_us();
  EXPECT_EQ(ingest.check(a, c.state).outcome, IngestOutcome::kRefused);
  EXPECT_EQ(ingest.check(a, c.state).outcome, IngestOutcome::kRefused);
  c.state.asked.clear();
  const IngestVerdict third = ingest.check(a, c.state);
  EXPECT_EQ(third.outcome, IngestOutcome::kRateLimited);
  EXPECT_EQ(third.code, RejectCode::kRateLimited);
  EXPECT_FALSE(third.payload_counted);
  EXPECT_EQ(c.state.asked, std::vector<std::string>{"session_ok"});
  a.now_s = 161;  // a minute later the window has room again
  EXPECT_NE(ingest.check(a, c.state).outcome, IngestOutcome::kRateLimited);
}

TEST(UpdateIngest, NonFiniteValuesAreNamedForWhatTheyAre) {
  Case c;
  c.decoded = invalid_argument("[update] tensor 'w' has a value that is not finite");
  const IngestVerdict v = c.run();
  EXPECT_EQ(v.code, RejectCode::kNotFinite) << v.detail;
  EXPECT_TRUE(v.recorded);
}

TEST(UpdateIngest, SamplesAreBoundedAndWeighedByStaleness) {
  Case over;
  over.rules.audit_on = false;
  over.header.set_n_samples(9);  // one update holds at most 8
  EXPECT_EQ(over.run().code, RejectCode::kClaim);

  Case late;
  late.header.set_base_version(kVersion - 1);
  const IngestVerdict v = late.run();
  ASSERT_EQ(v.outcome, IngestOutcome::kAdmitted) << v.detail;
  EXPECT_EQ(v.entry.staleness, 1);
  EXPECT_NEAR(v.entry.weight, 8.0 / std::sqrt(2.0), 1e-12);  // 1/sqrt(1 + staleness)
}

}  // namespace
}  // namespace meshrl::mesh

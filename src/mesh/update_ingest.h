// Update ingest: every check an update passes before the coordinator writes anything for it, in
// one function (UpdateIngest::check) that answers with a typed refusal or an admission. In order,
// each step trusting only what the steps before it checked:
//    1. session: the node holds a live lease              not joined: answered, nothing counted
//    2. rate limit: every attempt counts, refusals too     rate_limited: counted, nothing written
//    3. protocol version, then sizes (the run's cap,       node event
//       more than declared, truncated)
//    4. signed at all, for this run, Ed25519 signature     node event
//       over every claimed field (update_signature.h)
//    5. the ledger's row under the key                     a retry: the recorded outcome again
//    6. seq not ahead of our clock (seq_ahead, recorded),
//       then above the node's last accepted one (replay, node event)
//    7. excluded node, finished run                        recorded
//    8. staleness and samples bound (round.h admit_update) recorded
//    9. audits on: n_samples == n_scored                   recorded
//   10. one vote per node per round (round_book.h offer)   recorded
//   11. decoded (finite), the run's layout, norm bound     recorded
// "recorded": a ledger row under the key, so a retry of the key gets the same answer. "node event":
// a line in the ledger's node events and nothing under the key, so an impostor's forgery cannot
// block a genuine key and a transport fault does not stop a retry over a working connection.
//
// What the check needs of the coordinator's state comes through IngestState, asked lazily in the
// order above (session_ok renews a lease; the ledger lookups can fail), so it runs in tests with
// a fake and no ledger or run directory. Owns the rate limiter and the norm bound (update_guard.h).
// The coordinator does the writes: reject(), or for an admission spool, record_received, then
// the round or the audit desk. Not thread-safe (under the coordinator's mutex).
//   build/tests/test_mesh --gtest_filter='UpdateIngest*'
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "meshrl.pb.h"
#include "mesh/named_tensors.h"
#include "mesh/reject_code.h"
#include "mesh/round.h"
#include "mesh/round_book.h"
#include "mesh/update_guard.h"
#include "store/ledger.h"

namespace meshrl::mesh {

namespace v1 = ::meshrl::v1;

// The run's constants the checks compare against.
struct IngestRules {
  std::string run_id;
  uint64_t max_update_bytes = 0;  // an update's fp32 encoding plus headers
  int64_t param_count = 0;        // P, named in the size refusal
  bool lora = false;              // the run exchanges adapters only (named in the size refusal)
  bool audit_on = false;          // then n_samples must equal the committed n_scored
  int64_t audit_exclude_after = 0;
  RoundRules round;               // staleness and samples bound
  double norm_bound_factor = 0;   // NormBound (update_guard.h); 0 = off
  int64_t norm_window = 0;
  int64_t max_updates_per_minute = 0;  // RateLimiter; 0 = off
};

// One update as it arrived. decoded and norm are computed before the lock (the costly part).
struct UpdateArrival {
  const v1::UpdateHeader* header = nullptr;
  uint64_t payload_bytes = 0;
  std::string digest;                            // BLAKE2b-256 of the payload; "" when its sizes are off
  const NamedTensors* decoded = nullptr;         // the run's codec's decode of the payload; null when it failed
  std::string decode_error;                      // why it failed (when decoded is null)
  double norm = 0;                               // update_norm(decoded), 0 when it did not decode
  double now_s = 0;                              // monotonic seconds (rate limit)
  double now_us = 0;                             // microseconds since the epoch (seq_ahead)
};

// The coordinator's state as the checks see it. Every call is made at most once per check, in
// the order of the steps above, and only when the steps before it passed.
class IngestState {
 public:
  virtual ~IngestState() = default;
  virtual bool session_ok(const std::string& node, uint64_t session) = 0;  // renews the lease
  virtual const std::string& signing_key(const std::string& node) const = 0;  // "" when none
  virtual Result<std::optional<store::UpdateRow>> find(const store::UpdateKey& key) const = 0;
  virtual Result<std::optional<int64_t>> last_accepted_seq(const std::string& node) const = 0;
  virtual bool excluded(const std::string& node) const = 0;
  virtual int64_t version() const = 0;  // the open round's base version
  virtual bool finished() const = 0;
  virtual BookDecision offer(const RoundEntry& e) const = 0;  // the open round's book
  virtual const NamedTensors& layout() const = 0;             // the run's parameter set
};

enum class IngestOutcome {
  kNotJoined,    // no live lease: answered "join again", nothing counted or written
  kRateLimited,  // over the node's rate: a refusal in its record, nothing written
  kRetry,        // the key is in the ledger: answer with its row (retry_row)
  kRefused,      // code + detail; `recorded` says where it is written
  kAdmitted,     // entry + placed: spool, record_received, then the round (or an audit)
};

struct IngestVerdict {
  IngestOutcome outcome = IngestOutcome::kNotJoined;
  bool payload_counted = false;  // past the protocol check: its bytes count as received
  RejectCode code = RejectCode::kInternal;  // kRateLimited, kRefused
  std::string detail;                       // kRateLimited, kRefused: the reason after "<code>: "
  bool recorded = false;                    // kRefused: a ledger row under the key, else a node event
  store::UpdateRow retry_row;               // kRetry
  RoundEntry entry;                         // kAdmitted
  BookDecision placed;                      // kAdmitted: what the book decided
};

// The book's entry for an update (reward statistics only when the node sent them).
RoundEntry round_entry(const store::UpdateKey& key, const Admission& a, int64_t n_samples, const v1::RewardStats* stats);

class UpdateIngest {
 public:
  // Seconds of clock skew a node's seq (microseconds since the epoch) may run ahead of ours.
  static constexpr double kMaxSeqSkewS = 600;

  explicit UpdateIngest(IngestRules rules);

  // Runs steps 1-11 on `a`; changes only the rate limiter (step 2) and, through `state`, the lease.
  IngestVerdict check(const UpdateArrival& a, IngestState& state);
  // An update of this norm was acknowledged: it joins the norm bound's window.
  void accepted(double norm) { norm_bound_.accepted(norm); }
  const IngestRules& rules() const { return rules_; }

 private:
  IngestRules rules_;
  RateLimiter rate_;       // update attempts per node per minute, refusals included
  NormBound norm_bound_;   // norm within factor x the running median of accepted norms
};

}  // namespace meshrl::mesh

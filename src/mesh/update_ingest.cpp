// The ordered checks of an arriving update. See update_ingest.h.
#include "mesh/update_ingest.h"

#include "mesh/protocol.h"
#include "mesh/update_signature.h"

namespace meshrl::mesh {

namespace {

IngestVerdict refused(RejectCode code, std::string detail, bool recorded) {
  IngestVerdict v;
  v.outcome = IngestOutcome::kRefused;
  v.payload_counted = code != RejectCode::kProtocol;  // only the protocol check comes before the count
  v.code = code;
  v.detail = std::move(detail);
  v.recorded = recorded;
  return v;
}

}  // namespace

RoundEntry round_entry(const store::UpdateKey& key, const Admission& a, int64_t n_samples, const v1::RewardStats* stats) {
  RoundEntry e;
  e.key = key;
  e.weight = a.weight;
  e.staleness = a.staleness;
  e.n_samples = n_samples;
  if (stats) {
    e.has_stats = true;
    e.reward_mean = stats->reward_mean();
    e.kl = stats->kl();
    e.entropy = stats->entropy();
  }
  return e;
}

UpdateIngest::UpdateIngest(IngestRules rules)
    : rules_(std::move(rules)), rate_(rules_.max_updates_per_minute), norm_bound_(rules_.norm_bound_factor, rules_.norm_window) {}

IngestVerdict UpdateIngest::check(const UpdateArrival& a, IngestState& s) {
  const v1::UpdateHeader& h = *a.header;
  const store::UpdateKey key{h.name().substr(0, 64), h.base_version(), h.seq()};
  IngestVerdict v;
  if (!s.session_ok(h.name(), h.session())) return v;  // kNotJoined
  // Every attempt counts, refusals included, and nothing is written for one over the rate: a
  // node flooding us with bad updates costs a map lookup each, not a ledger row.
  if (std::string why = rate_.admit(h.name(), a.now_s); !why.empty()) {
    v.outcome = IngestOutcome::kRateLimited;
    v.code = RejectCode::kRateLimited;
    v.detail = why;
    return v;
  }
  if (h.protocol_version() != kProtocolVersion)
    return refused(RejectCode::kProtocol, "protocol version " + std::to_string(h.protocol_version()) + ", coordinator speaks " +
                                              std::to_string(kProtocolVersion), false);
  // Transport-level faults are not recorded under the update's key: a retry of the same update
  // over a working connection must still be accepted.
  if (h.declared_bytes() > rules_.max_update_bytes)
    return refused(RejectCode::kSize, "declared " + std::to_string(h.declared_bytes()) + " bytes, more than this run's maximum " +
                                          std::to_string(rules_.max_update_bytes) + " (it exchanges " + std::to_string(rules_.param_count) +
                                          " values" + (rules_.lora ? ", LoRA adapters only: is this a full-weight delta?)" : ")"), false);
  if (a.payload_bytes > h.declared_bytes())
    return refused(RejectCode::kSize, "payload larger than declared (" + std::to_string(h.declared_bytes()) + " bytes)", false);
  if (a.payload_bytes < h.declared_bytes())
    return refused(RejectCode::kTruncated, "truncated upload: " + std::to_string(a.payload_bytes) + " of " +
                                               std::to_string(h.declared_bytes()) + " declared bytes arrived", false);
  // Authenticity before anything is looked up under the key: a forged or foreign header must
  // neither learn nor touch the recorded outcome of a real update. The signature covers every
  // field used below (n_samples, the reward statistics, the commitment).
  if (h.signature().empty()) return refused(RejectCode::kBadSignature, "the update is not signed", false);
  if (h.run_id() != rules_.run_id)
    return refused(RejectCode::kWrongRun, "update signed for run '" + h.run_id().substr(0, 64) + "', this coordinator runs " + rules_.run_id,
                   false);
  if (std::string why = check_update_signature(h, a.digest, s.signing_key(h.name()), rules_.run_id); !why.empty())
    return refused(RejectCode::kBadSignature, why, false);
  // A retry (the ack was lost, or the coordinator restarted): answer what was decided then. An
  // exact replay of a signed update lands here too and changes nothing.
  auto found = s.find(key);
  if (!found.is_ok()) return refused(RejectCode::kInternal, "ledger: " + found.status().message(), false);
  if (found.value()) {
    v.outcome = IngestOutcome::kRetry;
    v.payload_counted = true;
    v.retry_row = *found.value();
    return v;
  }
  // A new key must carry a seq above every one this node had accepted before (the ledger keeps
  // them across restarts): an old signed update replayed under its own, other key is refused
  // here. Refused updates do not count, and a seq is a clock reading that may not run ahead of
  // ours by more than the skew, so one wild seq (a clock jump, a bug) cannot lock a node out.
  if (static_cast<double>(h.seq()) > a.now_us + 1e6 * kMaxSeqSkewS)
    return refused(RejectCode::kSeqAhead, "seq " + std::to_string(h.seq()) + " (microseconds since the epoch) is more than " +
                                              std::to_string(static_cast<int>(kMaxSeqSkewS)) +
                                              " s ahead of the coordinator's clock; check the node's clock", true);
  auto last = s.last_accepted_seq(h.name());
  if (!last.is_ok()) return refused(RejectCode::kInternal, "ledger: " + last.status().message(), false);
  if (last.value() && h.seq() <= *last.value())
    return refused(RejectCode::kReplay, "seq " + std::to_string(h.seq()) + " is not above " + std::to_string(*last.value()) +
                                            ", the last accepted seq from '" + h.name() + "'", false);
  if (s.excluded(h.name()))
    return refused(RejectCode::kExcluded, "'" + h.name() + "' failed " + std::to_string(rules_.audit_exclude_after) +
                                              " reward audit(s) and is excluded from this run", true);
  if (s.finished()) return refused(RejectCode::kFinished, "the run has finished at version " + std::to_string(s.version()), true);
  const Admission adm = admit_update(rules_.round, s.version(), h.base_version(), h.n_samples());
  if (!adm.accepted) return refused(adm.code, adm.reason, true);
  // With audits on, the samples behind the update are the rollouts it commits to: an audit then
  // holds the node to the count that weighs its update.
  if (rules_.audit_on && h.n_samples() != h.stats().n_scored())
    return refused(RejectCode::kClaim, "n_samples " + std::to_string(h.n_samples()) + " differs from the " +
                                           std::to_string(h.stats().n_scored()) + " committed rollouts (n_scored)", true);
  const RoundEntry entry = round_entry(key, adm, h.n_samples(), &h.stats());
  const BookDecision placed = s.offer(entry);
  if (!placed.accepted) return refused(placed.code, placed.reason, true);
  if (!a.decoded) {
    // The decoder refuses NaN/Inf values and scales; name that case for what it is.
    const bool nonfinite = a.decode_error.find("finite") != std::string::npos;
    return refused(nonfinite ? RejectCode::kNotFinite : RejectCode::kMalformed, a.decode_error, true);
  }
  if (auto st = check_same_layout(*a.decoded, s.layout(), "update " + key.str()); !st.is_ok())
    return refused(RejectCode::kShape, st.message(), true);
  if (std::string why = norm_bound_.check(a.norm); !why.empty()) return refused(RejectCode::kNorm, why, true);
  v.outcome = IngestOutcome::kAdmitted;
  v.payload_counted = true;
  v.entry = entry;
  v.placed = placed;
  return v;
}

}  // namespace meshrl::mesh

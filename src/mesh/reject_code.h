// Typed reasons for refusing an update: the coordinator sends the code with its reply
// (SubmitReply.code) and writes "<code>: <detail>" in the ledger, so tests, dashboards and the
// node can tell a replay from a forgery from a stale update without parsing prose.
// Torch-free and gRPC-free.
#pragma once

namespace meshrl::mesh {

enum class RejectCode {
  kProtocol,      // another protocol version
  kSize,          // declared over the run's cap, or more bytes than declared (no decompression bombs)
  kTruncated,     // fewer bytes than declared arrived
  kWrongRun,      // signed for another run
  kBadSignature,  // no registered key, a payload hash that differs, or a signature that does not verify
  kReplay,        // a sequence number at or below one already seen from this node
  kFinished,      // the run has ended
  kStale,         // base version unknown, in the future, or older than max_staleness allows
  kMalformed,     // the payload does not decode
  kShape,         // tensors, shapes or dtypes differ from the run's parameter set
  kNotFinite,     // a NaN or Inf value
  kNorm,          // norm above the bound relative to the running median of accepted norms
  kRateLimited,   // more updates than the per-node rate allows
  kInternal,      // the coordinator failed to spool or record it (not the node's fault)
  kAuditFailed,   // held for a reward audit whose answer did not hold (or never came): the node is flagged
  kExcluded,      // the node failed [mesh] audit_exclude_after audits: none of its updates count any more
  kClaim,         // n_samples below 1, above what one update of the run holds, or (audits on) not n_scored
  kOneVote,       // the node already has a fresher update in this round: one vote per node per round
  kSuperseded,    // a fresher update of the same node took this one's place in the round
  kSeqAhead,      // seq further ahead of the coordinator's clock than the allowed skew (a node's clock jumped)
  // New codes go here, and kLastRejectCode then names the last (tests walk every code up to it).
};
inline constexpr RejectCode kLastRejectCode = RejectCode::kSeqAhead;

inline const char* reject_code_name(RejectCode c) {
  switch (c) {
    case RejectCode::kProtocol: return "protocol";
    case RejectCode::kSize: return "size";
    case RejectCode::kTruncated: return "truncated";
    case RejectCode::kWrongRun: return "wrong_run";
    case RejectCode::kBadSignature: return "bad_signature";
    case RejectCode::kReplay: return "replay";
    case RejectCode::kFinished: return "finished";
    case RejectCode::kStale: return "stale";
    case RejectCode::kMalformed: return "malformed";
    case RejectCode::kShape: return "shape";
    case RejectCode::kNotFinite: return "not_finite";
    case RejectCode::kNorm: return "norm";
    case RejectCode::kRateLimited: return "rate_limited";
    case RejectCode::kInternal: return "internal";
    case RejectCode::kAuditFailed: return "audit_failed";
    case RejectCode::kExcluded: return "excluded";
    case RejectCode::kClaim: return "claim";
    case RejectCode::kOneVote: return "one_vote";
    case RejectCode::kSuperseded: return "superseded";
    case RejectCode::kSeqAhead: return "seq_ahead";
  }
  return "unknown";
}

}  // namespace meshrl::mesh

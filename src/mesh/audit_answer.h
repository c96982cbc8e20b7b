// A node's side of a reward audit (reward_audit.h): when the coordinator draws one of its updates,
// the node sends every rollout that update committed to (rollout_commitment.h) as a summary
// (prompt id, completion hash, claimed reward), with the full text of the drawn ones. The node
// cannot choose: the commitment was signed into the update before the draw.
// Knows nothing about weights, training or how the coordinator re-scores.
#pragma once

#include <optional>

#include "meshrl.pb.h"
#include "mesh/node_session.h"
#include "mesh/rollout_commitment.h"

namespace meshrl::mesh {

// The answer to `q` from the rollouts `book` sealed under (q.base_version, q.seq), without a
// session; nullopt when the book no longer keeps them. Indices outside the set are ignored.
std::optional<v1::AuditAnswer> make_audit_answer(const std::string& node, const ScoredRolloutBook& book, const v1::AuditRequest& q);

// Answers `q` (retrying like any call, rejoining when refused "not joined") and logs the verdict.
// A failed or missing answer is the coordinator's call to make (the update is then rejected),
// not the node's: nothing is returned.
void answer_audit(NodeSession& session, const ScoredRolloutBook& book, const v1::AuditRequest& q);

}  // namespace meshrl::mesh

// UpdateSender: turns a node's local progress into signed updates and delivers them. cut_update
// takes the progress not sent yet (version_follower.h: cut - local), adds the error-feedback
// residual, encodes it with the run's codec (keeping what quantisation dropped for the next
// update), seals the rollouts it commits to (rollout_commitment.h) and signs the header over
// every claim (update_signature.h). send submits it until the coordinator answers: a retry
// resends the same signed header and payload under the same key (name, base_version, seq), so
// the coordinator applies it once. An acknowledged update saves the node's state (when kept,
// node_state_keeper.h); an audit the reply asks for is answered (audit_answer.h).
//
// Test-only misbehaviour (NodeOptions::test_misbehave): "sign_flip_x10" sends -10 x the real
// progress, properly signed; "sign_flip_x10_repeat" also sends a copy claiming 10^9 times its
// samples first, and four more copies under new seqs afterwards.
//
// Threads: cut_update on the trainer's thread (it owns the residual and `cut`); send on any one
// thread at a time (the uploader in overlap mode). Knows nothing about the trainer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "meshrl.pb.h"
#include "mesh/codec.h"
#include "mesh/error_feedback.h"
#include "mesh/node_session.h"
#include "mesh/node_state.h"
#include "mesh/node_state_keeper.h"
#include "mesh/node_tally.h"
#include "mesh/rollout_commitment.h"
#include "mesh/version_follower.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {

// An update cut from the local weights, encoded, with its signed header; sent by send().
struct OutgoingUpdate {
  v1::UpdateHeader header;
  std::string bytes;
  double reward = 0;                       // as reported in the header
  std::shared_ptr<const NodeState> state;  // saved once acknowledged (--state-dir), else null
};

class UpdateSender {
 public:
  // keeper: snapshots states and saves the acknowledged ones (null: none kept). codec and
  // limits: the run's update codec, and the limits the node decodes its own bytes with.
  // inner_steps: H, reported in each header. misbehave: NodeOptions::test_misbehave.
  UpdateSender(NodeSession& session, VersionFollower& follower, NodeTally& tally, ScoredRolloutBook& book, ErrorFeedback& ef,
               NodeStateKeeper* keeper, const trust::SigningKey& key, std::unique_ptr<UpdateCodec> codec,
               const UpdateDecodeLimits& limits, int64_t inner_steps, std::string misbehave);

  // samples: the scored completions behind the update; reward: their steps' mean reward, reported
  // unless the sealed rollouts give one (their mean claimed reward, which an audit holds the node to).
  // seq: microseconds since the epoch, so a restarted node never reuses an earlier key.
  Result<OutgoingUpdate> cut_update(int64_t samples, double reward);
  // Submits until the coordinator answers, and logs the answer. Fails only when the coordinator
  // cannot be reached for give_up_s, or the node stops: a refusal is an answer.
  Status send(OutgoingUpdate out);
  // The base version of the last update the coordinator accepted (-1 before any).
  int64_t last_accepted_base() const { return last_accepted_base_.load(); }

 private:
  // sign_flip_x10_repeat: `copies` more submissions of the same payload, each under a new seq and
  // with n_samples x `inflate`, properly re-signed; what the coordinator answers is only logged.
  void send_attack_copies(const v1::UpdateHeader& real, const std::string& bytes, int64_t inflate, int copies);

  NodeSession& session_;
  VersionFollower& follower_;
  NodeTally& tally_;
  ScoredRolloutBook& book_;
  ErrorFeedback& ef_;
  NodeStateKeeper* keeper_;  // null: no state kept
  const trust::SigningKey& key_;
  const std::unique_ptr<UpdateCodec> codec_;
  const UpdateDecodeLimits limits_;
  const int64_t inner_steps_;
  const std::string misbehave_;
  std::atomic<int64_t> last_accepted_base_{-1};
};

}  // namespace meshrl::mesh

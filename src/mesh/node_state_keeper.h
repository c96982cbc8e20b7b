// NodeStateKeeper: a node's local training state across restarts (`meshrl node --state-dir`):
// the error-feedback residual, the inner AdamW moments and the trainer's step, snapshotted when
// an update is cut, saved once the coordinator acknowledged it, and restored at start when the
// saved file fits this run, node and parameter layout (the file format: node_state.h). Without a
// state dir it keeps nothing. A failed save or a file that does not fit is one log line, never a
// failed node: it costs only the restart's warm state.
// Knows nothing about the network or codecs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mesh/error_feedback.h"
#include "mesh/node.h"
#include "mesh/node_session.h"
#include "mesh/node_state.h"
#include "mesh/version_follower.h"
#include "rl/trainer.h"

namespace meshrl::mesh {

class NodeStateKeeper {
 public:
  // options.state_dir: where the state lives ("" = kept nowhere). The references outlive the keeper.
  NodeStateKeeper(const NodeOptions& options, NodeSession& session, rl::GrpoTrainer& trainer, const VersionFollower& follower,
                  ErrorFeedback& ef);

  bool enabled() const { return !o_.state_dir.empty(); }
  // The state as of now (the residual after this cut, the held version, the trainer's step and
  // moments); null when not enabled. Trainer's thread only.
  std::shared_ptr<const NodeState> snapshot() const;
  void save(const NodeState& state);
  // Before the first inner step: takes a saved state that fits, else logs why and starts from zero.
  void restore();

 private:
  // The model's parameters in the inner optimizer's order (it was built from parameters()).
  std::vector<std::pair<std::string, torch::Tensor>> model_params() const;

  const NodeOptions& o_;
  NodeSession& session_;
  rl::GrpoTrainer& trainer_;
  const VersionFollower& follower_;
  ErrorFeedback& ef_;
  std::string layout_;  // param_layout_fingerprint of the model (when enabled)
};

}  // namespace meshrl::mesh

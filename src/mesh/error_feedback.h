// Error feedback for a lossy update codec: what quantisation dropped this round is added to the
// next round's delta, so the sum of what was sent tracks the sum of the true deltas within one
// round's quantisation error instead of drifting further every round. Owns the residual, one
// tensor per name (float32, CPU); a node persists it with its local state (residual() /
// set_residual()). Knows nothing about codecs, models or the network.
//
//   auto compensated = ef.compensate(delta);          // delta + residual
//   auto decoded     = decode(encode(compensated));   // what the receiver will apply
//   ef.update(compensated, decoded);                  // residual = compensated - decoded
// After K rounds: sum(decoded) = sum(delta) - residual_K, and residual_K is bounded by one
// quantisation error of `compensated` (quantize.h), whatever K.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "mesh/named_tensors.h"

namespace meshrl::mesh {

class ErrorFeedback {
 public:
  // delta + residual, as new tensors. A name without a residual yet (first round, or a tensor new
  // to the set) gets a zero residual. A residual whose name is not in `delta` is kept for later.
  // A residual whose shape differs from the delta's is a broken invariant (MESHRL_CHECK).
  NamedTensors compensate(const NamedTensors& delta) const;

  // residual[name] = compensated - decoded for every tensor. Fails (kInvalidArgument) when the two
  // sets' layouts differ; the residual is then left unchanged.
  Status update(const NamedTensors& compensated, const NamedTensors& decoded);

  void reset() { residual_.clear(); }
  // The residual in name order (a copy), for saving; set_residual restores it (checked, cloned).
  NamedTensors residual() const;
  Status set_residual(const NamedTensors& residual);
  // L2 norm of all residuals together (a health metric: it should stay flat over rounds).
  double residual_norm() const;

 private:
  std::map<std::string, torch::Tensor> residual_;  // name -> [shape of that tensor] float32
};

}  // namespace meshrl::mesh

// A node's local training state on disk, so that a restarted `meshrl node --state-dir DIR` does
// not start its next update from scratch: the error-feedback residual (what quantisation dropped
// from updates already sent), the inner AdamW moments and the trainer's step (prompt seeds and the
// learning-rate schedule). Written after each update the coordinator acknowledged; the weights
// themselves are not kept (a restarted node downloads the current version). Knows nothing about
// the network or the node loop.
//
// File: DIR/node-state.safetensors, a safetensors file (written atomically: temp, fsync, rename):
//   tensors   "residual/<name>"                        error-feedback residual, F32
//             "adam/exp_avg/<param>", "adam/exp_avg_sq/<param>"   AdamW moments of model parameter <param>
//             "adam/noise_sq/<param>"   its half-batch noise EMA (pooled second moment only)
//   metadata  format "meshrl-node-state", format_version "1", run_id, node, base_version,
//             base_hash, trainer_step, optimizer_step, layout (param_layout_fingerprint),
//             adam_steps (JSON {param: AdamW's per-parameter step}), content_hash
// content_hash: XXH3-128 (hex) of the other metadata (sorted JSON) and mesh::content_hash of the
// tensors in name order, so a flipped bit anywhere is caught at load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/status.h"
#include "mesh/named_tensors.h"
#include "rl/optimizer.h"

namespace meshrl::mesh {

inline constexpr int kNodeStateFormatVersion = 1;

struct NodeState {
  std::string run_id;
  std::string node;
  int64_t base_version = -1;             // the version the node's local progress was based on
  std::string base_hash;
  int64_t trainer_step = 0;              // GrpoTrainer::step_count()
  std::string layout;                    // param_layout_fingerprint of the model
  NamedTensors residual;                 // ErrorFeedback::residual()
  std::vector<std::string> param_names;  // the model's parameters, in the optimizer's order
  rl::OptimizerState optimizer;          // params[i] belongs to param_names[i]
};

// What a loader expects: a state is used only when all three match.
struct NodeStateExpectation {
  std::string run_id;
  std::string node;
  std::string layout;
};

// XXH3-64 (hex) over every parameter's name, shape, dtype and requires_grad, in order: two
// processes agree on it exactly when saved moments and residuals fit their parameters.
std::string param_layout_fingerprint(const std::vector<std::pair<std::string, torch::Tensor>>& params);

std::filesystem::path node_state_path(const std::filesystem::path& dir);

// Creates `dir` when missing and writes the state atomically. Fails (kInternal/kInvalidArgument)
// naming the path; the caller decides whether that matters.
Status save_node_state(const std::filesystem::path& dir, const NodeState& state);

// Loads and checks a saved state. kNotFound when there is none; otherwise every failure is
// kInvalidArgument or kDataLoss with a one-line reason naming the path: not a node-state file or
// another format version, a truncated or corrupt file (parse error, content hash mismatch), a state
// of another run, of another node, or of another parameter layout.
// A loaded state's param_names are those with saved moments, in name order.
Result<NodeState> load_node_state(const std::filesystem::path& dir, const NodeStateExpectation& expect);

// Checks that a loaded state fits this process: every residual tensor names an exchanged tensor of
// the same shape, every saved moment a model parameter of the same shape. Returns the optimizer
// state in the model's parameter order (nullopt where none was saved), ready for set_state().
// Fails (kInvalidArgument) naming `dir`'s file and the first misfit.
Result<rl::OptimizerState> fit_node_state(const NodeState& state, const std::vector<std::pair<std::string, torch::Tensor>>& model_params,
                                          const NamedTensors& exchanged, const std::filesystem::path& dir);

}  // namespace meshrl::mesh

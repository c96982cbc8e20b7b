// The run's model as the coordinator holds it: the policy loaded on the CPU (whatever [model]
// device says: that is for the nodes), [lora] applied, and what the wire needs of its parameter set
// (P, the largest update a node may send, decode limits, the hashes a node's model must match).
// The coordinator aggregates into theta (views into the policy's parameters), evaluates the policy
// and re-scores audited rollouts with the task. Knows nothing about the network or the rounds.
//   build/tests/test_mesh --gtest_filter='RunModel*'
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "mesh/mesh_config.h"
#include "mesh/named_tensors.h"
#include "mesh/update_format.h"
#include "rollout/policy.h"
#include "tasks/task.h"

namespace meshrl::mesh {

struct RunModel {
  std::string spec;                         // what nodes build it from: a preset name, else the warm start folder
  rollout::Policy policy;                   // on the CPU; theta are views into its parameters
  std::shared_ptr<const tasks::Task> task;  // for evaluation and reward audits
  NamedTensors theta;                       // the trained set: all weights, or [lora] the adapters' B matrices
  NamedTensors base_params;                 // [lora]: views of the frozen base (empty otherwise)
  std::string base_weights_hash;            // [lora]: its content hash ("" otherwise)
  std::string config_json, config_hash, tokenizer_hash;
  int64_t param_count = 0;                  // P
  uint64_t max_update_bytes = 0;            // P fp32 values plus per-tensor headers
  UpdateDecodeLimits limits;                // what one decode may allocate
};

// Loads `policy_spec` (a preset or a folder) as the run's model; `spec` is left for the caller.
Result<RunModel> load_run_model(const MeshRunConfig& config, const std::string& policy_spec);

// Held-out pass@1 of the model's current weights with the run's [eval] options (n_eval > 0
// overrides [eval] n_eval). on_progress (may be empty) gets generated rows of the total.
Result<double> evaluate_run_model(RunModel& model, const MeshRunConfig& config, int64_t n_eval,
                                  std::function<void(int64_t rows_done, int64_t rows_total)> on_progress);

}  // namespace meshrl::mesh

// The manifest sent with a join. See run_manifest.h.
#include "mesh/run_manifest.h"

#include <algorithm>

namespace meshrl::mesh {

int64_t schedule_step(const MeshSection& mesh, int64_t version, const std::map<std::string, NodeRecord>& records) {
  // In sync mode every version is one round of H inner steps on each node, which survives a
  // restart; in async mode a version is one node's update, so the furthest step a node reported
  // in its heartbeats says where the run is. Without this a restarted or late node would start its lr schedule at
  // step 0: at peak lr with fresh moments while the others are at the cosine floor (measured: it
  // pulled the test run's reward from 0.95 to 0.73 over 30 rounds of node kills).
  // Either way no node can be past version x H (each version took at least one update of H
  // steps), which also bounds what a node that misreports its progress can push on the others.
  const int64_t bound = version * mesh.inner_steps;
  if (mesh.mode == "sync") return bound;
  int64_t step = 0;
  for (const auto& [name, rec] : records) step = std::max(step, rec.last_progress.schedule_step());
  return std::min(step, bound);
}

v1::Manifest run_manifest(const std::string& run_id, const MeshRunConfig& config, const RunModel& model, int64_t version,
                          const std::string& hash, bool finished, int64_t schedule_step) {
  v1::Manifest m;
  m.set_run_id(run_id);
  m.set_model_config_json(model.config_json);
  m.set_model_config_hash(model.config_hash);
  m.set_model_spec(model.spec);
  m.set_tokenizer_hash(model.tokenizer_hash);
  m.set_base_weights_hash(model.base_weights_hash);
  m.add_task_names(model.task->name());
  m.set_run_config_toml(mesh_run_config_to_toml(config));
  m.set_algorithm_json(mesh_section_to_json(config.mesh).dump());
  m.set_current_version(version);
  m.set_current_hash(hash);
  m.set_lease_seconds(config.mesh.lease_s);
  m.set_param_count(model.param_count);
  m.set_finished(finished);
  m.set_schedule_step(schedule_step);
  return m;
}

}  // namespace meshrl::mesh

// The run manifest a node gets with its join (proto Manifest): who the run is (id, model, tokenizer,
// [lora] base, task, config), where it stands (version, hash, finished) and the inner-lr schedule step
// a node starts from. Pure functions of what the coordinator holds; no state, no network.
//   build/tests/test_mesh --gtest_filter='RunManifest*'
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "meshrl.pb.h"
#include "mesh/membership.h"
#include "mesh/mesh_config.h"
#include "mesh/run_model.h"

namespace meshrl::mesh {

namespace v1 = ::meshrl::v1;

// Manifest.schedule_step. Sync: version x inner_steps. Async: the furthest schedule step a node
// reported (heartbeat or leave), capped at version x inner_steps.
int64_t schedule_step(const MeshSection& mesh, int64_t version, const std::map<std::string, NodeRecord>& records);

v1::Manifest run_manifest(const std::string& run_id, const MeshRunConfig& config, const RunModel& model, int64_t version,
                          const std::string& hash, bool finished, int64_t schedule_step);

}  // namespace meshrl::mesh

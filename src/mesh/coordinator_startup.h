// Start-up of a coordinator, for a new run and a resumed one. The Coordinator's start-up steps are
// defined in coordinator_startup.cpp: load_common (the model, run_model.h, and every room, once the
// run id is known), init_new (warm start, run directory, version 0), init_resume (the ledger's
// current version, optimizer state, exclusions, the nodes still expected) and readmit_pending (the
// acknowledged updates a crash left unapplied go back into the open round under submit's rules).
// This header holds the pieces of that which stand alone. Knows nothing about the network.
//   build/tests/test_mesh --gtest_filter='CoordinatorStartup*'
#pragma once

#include <cstdint>
#include <string>

#include "mesh/mesh_config.h"
#include "mesh/round.h"
#include "mesh/run_model.h"
#include "mesh/update_ingest.h"

namespace meshrl::mesh {

// The ingest rules of a run: its id, the model's sizes, the [mesh] guards, the round's rules.
IngestRules ingest_rules(const MeshRunConfig& config, const RunModel& model, const std::string& run_id, const RoundRules& round,
                         bool audit_on);

// From std::random_device (run ids, audit secrets): never predictable, never seeded.
uint64_t random_u64();
std::string random_hex16();  // 16 hex digits

}  // namespace meshrl::mesh

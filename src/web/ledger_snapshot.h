// The part of a RunSnapshot that the ledger alone knows: committed rounds, every update and what
// became of it (counters, staleness histogram, per-node counts), the data-parallel equivalent per
// version, the latest node events. Used live (coordinator_snapshot.h adds membership and byte
// counts) and after the fact (`meshrl report` on a run directory). Read-only.
#pragma once

#include <vector>

#include "mesh/mesh_config.h"
#include "store/ledger.h"
#include "web/run_snapshot.h"

namespace meshrl::web {

// versions: the run's VersionLog points (their bytes_dataparallel is filled here). Nodes get a
// state from their last ledger event (leave -> left, lease_expired -> dropped, else online); a
// live caller overrides it from the coordinator's leases.
RunSnapshot ledger_snapshot(const store::Ledger& ledger, const mesh::MeshSection& m, int64_t param_count,
                            std::vector<VersionPoint> versions);

// A short, bounded label for a rejection reason (free text with numbers in it): stale,
// future_base, run_finished, bad_samples, lost_payload or invalid_payload.
std::string update_reason_class(const std::string& reason);

}  // namespace meshrl::web

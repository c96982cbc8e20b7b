// Builds the RunSnapshot of a live coordinator: counters and per-update facts from its ledger
// (ledger_snapshot.h, so /metrics agrees with ledger.sqlite), membership and byte counts from the
// coordinator, the per-version curves from its VersionLog. Read-only; safe to call from HTTP
// threads while rounds close (the coordinator and the ledger each take their own lock). Never call
// it from inside a coordinator callback (on_version runs under the coordinator's lock).
#pragma once

#include "mesh/coordinator.h"
#include "web/ledger_snapshot.h"
#include "web/run_snapshot.h"
#include "web/version_log.h"

namespace meshrl::web {

// Its size is bounded whatever the run's length (ledger_snapshot.h; the per-version curves thinned
// by thin_points to kVersionsLatest, kVersionsHistory).
RunSnapshot coordinator_snapshot(mesh::Coordinator& c, const VersionLog& log);

// What ledger_snapshot needs of a run's [mesh] section and model.
RunShape run_shape(const mesh::MeshSection& m, int64_t param_count);

// A VersionPoint from the coordinator's report of a new version (for VersionLog::add_version).
VersionPoint version_point(const mesh::VersionReport& r);

}  // namespace meshrl::web

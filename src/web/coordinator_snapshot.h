// Builds the RunSnapshot of a live coordinator: counters and per-update facts from its ledger
// (ledger_snapshot.h, so /metrics agrees with ledger.sqlite), membership and byte counts from the
// coordinator, the per-version curves from its VersionLog. Read-only; safe to call from HTTP
// threads while rounds close (the coordinator and the ledger each take their own lock). Never call
// it from inside a coordinator callback (on_version runs under the coordinator's lock).
#pragma once

#include "mesh/coordinator.h"
#include "web/run_snapshot.h"
#include "web/version_log.h"

namespace meshrl::web {

RunSnapshot coordinator_snapshot(mesh::Coordinator& c, const VersionLog& log);

// A VersionPoint from the coordinator's report of a new version (for VersionLog::add_version).
VersionPoint version_point(const mesh::VersionReport& r);

}  // namespace meshrl::web

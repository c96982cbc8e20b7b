// Wiring between a coordinator and what watches it: RUN_DIR/metrics.jsonl (every version, every
// evaluation) and the optional HTTP endpoint (/metrics, the dashboard). Shared by `meshrl
// coordinator` and `meshrl demo`; no logic of its own beyond the plumbing.
#pragma once

#include <memory>
#include <string>

#include "mesh/coordinator.h"
#include "web/http_server.h"
#include "web/version_log.h"

namespace meshrl::cli {

// Opens RUN_DIR/metrics.jsonl (run_dir = o.run_dir) and chains an on_version callback that
// appends each new version to it. Call before Coordinator::start.
std::shared_ptr<web::VersionLog> attach_version_log(mesh::CoordinatorOptions& o);

// Serves /metrics, /api/state and the dashboard for this coordinator on o.bind:o.port (0 = any
// free port). The coordinator and the log must outlive the server.
std::unique_ptr<web::HttpServer> start_http(mesh::Coordinator& c, std::shared_ptr<web::VersionLog> log, const web::HttpOptions& o);

}  // namespace meshrl::cli

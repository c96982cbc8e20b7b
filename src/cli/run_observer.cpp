#include "cli/run_observer.h"

#include "web/coordinator_snapshot.h"

namespace meshrl::cli {

std::shared_ptr<web::VersionLog> attach_version_log(mesh::CoordinatorOptions& o) {
  auto log = std::make_shared<web::VersionLog>(o.run_dir / "metrics.jsonl");
  auto next = o.on_version;
  o.on_version = [log, next, say = o.log](const mesh::VersionReport& r) {
    // Runs under the coordinator's lock: only the log's own file and mutex are touched here.
    if (Status st = log->add_version(web::version_point(r)); !st.is_ok() && say) say(st.message());
    if (next) next(r);
  };
  return log;
}

std::unique_ptr<web::HttpServer> start_http(mesh::Coordinator& c, std::shared_ptr<web::VersionLog> log, const web::HttpOptions& o) {
  return web::HttpServer::start(o, [&c, log] { return web::coordinator_snapshot(c, *log); }).value();
}

}  // namespace meshrl::cli

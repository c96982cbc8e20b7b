// HttpServer: the coordinator's (or a node's) read-only HTTP endpoint: /metrics (Prometheus text),
// /api/state (JSON for the dashboard), / and /assets/* (the embedded dashboard). Each request
// asks the snapshot function for a fresh RunSnapshot, so the server holds no run state. Binds
// 127.0.0.1 unless told otherwise: it has no authentication, and the page shows node names and
// ledger events. Uses cpp-httplib on its own threads; knows nothing about the mesh.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "web/run_snapshot.h"

namespace httplib {
class Server;
}

namespace meshrl::web {

struct HttpOptions {
  std::string bind = "127.0.0.1";
  int port = 0;            // 0 = any free port (see port())
  bool dashboard = true;   // serve the page and /api/state (false: /metrics only, as on nodes)
};

class HttpServer {
 public:
  // Binds and starts serving; fails naming the address when the port is taken or not allowed.
  static Result<std::unique_ptr<HttpServer>> start(const HttpOptions& o, std::function<RunSnapshot()> snapshot);
  // /metrics only, its text from metrics_text (a node's counters: node_prometheus_text.h).
  static Result<std::unique_ptr<HttpServer>> start_metrics(const HttpOptions& o, std::function<std::string()> metrics_text);
  ~HttpServer();  // stop()

  int port() const { return port_; }
  std::string url() const;  // http://HOST:PORT/
  void stop();

 private:
  HttpServer() = default;
  static Result<std::unique_ptr<HttpServer>> serve(std::unique_ptr<HttpServer> s, const HttpOptions& o);
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string bind_;
  int port_ = 0;
};

}  // namespace meshrl::web

// HttpServer: the coordinator's (or a node's) read-only HTTP endpoint: /metrics (Prometheus text),
// /api/state (JSON for the dashboard), / and /assets/* (the embedded dashboard). Each request
// asks the snapshot function for a fresh RunSnapshot, so the server holds no run state. Binds
// 127.0.0.1 unless told otherwise: it has no authentication, and the page shows node names and
// ledger events; it answers only requests whose Host names this server (host_allowed). Uses
// cpp-httplib on its own threads; knows nothing about the mesh.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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
  // Names a request's Host header may carry besides the bound address (and localhost, 127.0.0.1,
  // ::1 when bound to loopback; any IP address when bound to 0.0.0.0 or ::), e.g. this machine's
  // DNS name. Any other name is refused with 403, so that a web page whose own name resolves to
  // this address (DNS rebinding) cannot read the dashboard from a browser here.
  std::vector<std::string> hosts;
};

// Whether a request with this Host header value may be answered (see HttpOptions::hosts). The
// port part is not compared: an SSH tunnel (ssh -L 9000:127.0.0.1:8080) changes it legitimately,
// and a rebinding attack is told apart by the name alone. The server answers a request without
// the header (no browser omits it).
bool host_allowed(const HttpOptions& o, const std::string& host_header);

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

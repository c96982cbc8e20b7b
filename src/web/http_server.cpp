#include "web/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "web/embedded_assets.h"
#include "web/prometheus_text.h"
#include "web/state_json.h"

namespace meshrl::web {

namespace {

void serve_asset(httplib::Response& res, const std::string& name) {
  const EmbeddedAsset* a = find_asset(name);
  if (!a) {
    res.status = 404;
    res.set_content("no such file: " + name + "\n", "text/plain");
    return;
  }
  res.set_content(reinterpret_cast<const char*>(a->data), a->size, a->content_type);
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The name in a Host header value ("name", "name:port", "[v6]:port") or a bind address,
// lowercased, without a trailing dot ("localhost." resolves as "localhost").
std::string host_name(const std::string& v) {
  std::string h = v;
  if (!v.empty() && v[0] == '[') {
    const size_t end = v.find(']');
    h = end == std::string::npos ? v.substr(1) : v.substr(1, end - 1);
  } else if (std::count(v.begin(), v.end(), ':') == 1) {
    h = v.substr(0, v.find(':'));
  }
  h = lowercase(std::move(h));
  if (!h.empty() && h.back() == '.') h.pop_back();
  return h;
}

bool is_ip_literal(const std::string& s) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, s.c_str(), buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool is_wildcard(const std::string& bind) { return bind.empty() || bind == "0.0.0.0" || bind == "::"; }
bool is_loopback(const std::string& bind) { return bind == "localhost" || bind == "::1" || bind.rfind("127.", 0) == 0; }

// A snapshot can fail to build (the ledger file unreadable): say so with a 500, keep serving.
template <class F>
void guarded(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    res.status = 500;
    res.set_content(std::string("snapshot failed: ") + e.what() + "\n", "text/plain");
  }
}

}  // namespace

bool host_allowed(const HttpOptions& o, const std::string& host_header) {
  const std::string host = host_name(host_header);
  if (host.empty()) return false;
  const std::string bind = host_name(o.bind);
  if (host == bind) return true;
  if ((is_loopback(bind) || is_wildcard(bind)) && (host == "localhost" || host == "127.0.0.1" || host == "::1")) return true;
  // An address literal cannot be rebound to another site: the page's origin is that address.
  if (is_wildcard(bind) && is_ip_literal(host)) return true;
  for (const std::string& h : o.hosts)
    if (host == host_name(h)) return true;
  return false;
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpOptions& o, std::function<RunSnapshot()> snapshot) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  httplib::Server& svr = *s->server_;
  svr.Get("/metrics", [snapshot](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] { res.set_content(prometheus_text(snapshot()), kPrometheusContentType); });
  });
  if (o.dashboard) {
    svr.Get("/api/state", [snapshot](const httplib::Request&, httplib::Response& res) {
      guarded(res, [&] {
        res.set_header("Cache-Control", "no-store");
        // Ledger texts may hold any bytes a node sent: replace invalid UTF-8 rather than fail.
        res.set_content(state_json(snapshot()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
      });
    });
    svr.Get("/", [](const httplib::Request&, httplib::Response& res) { serve_asset(res, "index.html"); });
    svr.Get(R"(/assets/([A-Za-z0-9._-]+))",
            [](const httplib::Request& req, httplib::Response& res) { serve_asset(res, req.matches[1].str()); });
  }
  return serve(std::move(s), o);
}

Result<std::unique_ptr<HttpServer>> HttpServer::start_metrics(const HttpOptions& o, std::function<std::string()> metrics_text) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->Get("/metrics", [metrics_text](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] { res.set_content(metrics_text(), kPrometheusContentType); });
  });
  return serve(std::move(s), o);
}

// Binds (SO_REUSEADDR only) and starts the accept loop on its own thread.
Result<std::unique_ptr<HttpServer>> HttpServer::serve(std::unique_ptr<HttpServer> s, const HttpOptions& o) {
  s->bind_ = o.bind;
  httplib::Server& svr = *s->server_;
  svr.set_pre_routing_handler([o](const httplib::Request& req, httplib::Response& res) {
    // No browser omits Host, so a request without one cannot come from a rebinding page.
    if (!req.has_header("Host") || host_allowed(o, req.get_header_value("Host"))) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 403;
    const std::string host = host_name(req.get_header_value("Host")).substr(0, 100);
    res.set_content("[http] Host '" + host + "' does not name this server (" + o.bind +
                        "); if it is this machine's name, start with --http-host " + host + "\n",
                    "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's default also sets SO_REUSEPORT, which would let a second process share the port
  // silently (two coordinators' dashboards answering at random); keep only SO_REUSEADDR.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (o.port == 0) {
    s->port_ = svr.bind_to_any_port(o.bind);
    if (s->port_ <= 0) return io_error("[http] cannot bind " + o.bind + " (any port)");
  } else {
    if (!svr.bind_to_port(o.bind, o.port))
      return io_error("[http] cannot bind " + o.bind + ":" + std::to_string(o.port) + " (in use, or not an address of this machine?)");
    s->port_ = o.port;
  }
  s->thread_ = std::thread([&svr] { svr.listen_after_bind(); });
  // httplib's stop() is a no-op until the accept loop runs; wait for it, so that a stop() right
  // after start() cannot leave the thread listening forever.
  for (int i = 0; i < 5000 && !svr.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

std::string HttpServer::url() const {
  const std::string host = bind_ == "0.0.0.0" ? "127.0.0.1" : bind_;
  return "http://" + host + ":" + std::to_string(port_) + "/";
}

void HttpServer::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpServer::~HttpServer() { stop(); }

}  // namespace meshrl::web

// `meshrl coordinator --config run.toml [--run-dir DIR | --resume DIR] [--listen HOST] [--port P]
//  [--insecure | --ca CA_DIR [--cert FILE --key FILE]] [--port-file FILE] [--section.key=value ...]`
//  [--http PORT [--http-bind ADDR]]: the live dashboard and Prometheus /metrics (src/web).
// Starts (or resumes) a run's coordinator and serves nodes over gRPC until the run has finished
// and every node has left (or gone silent). Prints one line per new version.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/output_options.h"
#include "cli/progress.h"
#include "cli/terminal.h"
#include "core/file_io.h"
#include "mesh/coordinator.h"
#include "mesh/mesh_config.h"
#include "cli/run_observer.h"
#include "rpc/coordinator_service.h"
#include "rpc/peer_identity.h"

namespace meshrl::cli {

namespace {

struct CoordinatorArgs {
  std::string config;
  std::string run_dir;
  std::string resume;
  std::string listen = "0.0.0.0";
  int port = 50051;
  bool insecure = false;
  std::string ca_dir;  // run CA (meshrl ca init): mutual TLS, allow-list, revocations
  std::string cert, key;
  std::string port_file;
  double linger_s = 30;  // after the last version, wait this long for nodes to leave
  bool eval = false;     // held-out pass@1 at start and end, into RUN_DIR/summary.json
  int http_port = -1;    // -1: no HTTP; 0: any free port
  std::string http_bind = "127.0.0.1";
  std::vector<std::string> http_hosts;  // Host names the dashboard answers besides its address
  OutputOptions output;
};

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/mesh-%Y%m%d-%H%M%S", &tm);
  return buf;
}

void run_coordinator(const CoordinatorArgs& a, const std::vector<std::string>& overrides) {
  apply_output_options(a.output, "coordinator");
  Terminal& term = Terminal::get();
  mesh::CoordinatorOptions o;
  if (!a.resume.empty()) {
    if (!a.run_dir.empty()) throw StatusError(invalid_argument("[coordinator] give --run-dir or --resume, not both"));
    o.resume = true;
    o.run_dir = a.resume;
  } else {
    if (a.config.empty()) throw StatusError(invalid_argument("[coordinator] --config run.toml is required (or --resume DIR)"));
    o.config = mesh::load_mesh_run_config(a.config, overrides).value();
    o.run_dir = a.run_dir.empty() ? default_run_dir() : a.run_dir;
  }
  // Checked before anything starts (the warm start can take minutes): plaintext only on loopback.
  if (a.insecure && !rpc::is_loopback_target(a.listen))
    throw StatusError(invalid_argument("[coordinator] refusing --insecure on --listen " + a.listen +
                                       ": plaintext is for loopback only (--listen 127.0.0.1); use --ca DIR from `meshrl ca init`"));
  if (!a.insecure && a.ca_dir.empty())
    throw StatusError(invalid_argument("[coordinator] give --ca DIR (a run CA from `meshrl ca init DIR`), or --insecure with --listen 127.0.0.1"));
  if (a.insecure) term.warn("--insecure: plaintext gRPC, no authentication of nodes; loopback only");
  o.log = [&term](const std::string& s) { term.log(guess_level(s), s); };
  auto version_log = attach_version_log(o);
  auto coord = mesh::Coordinator::start(o).value();
  const int64_t n_eval = coord->config().mesh.n_eval > 0 ? coord->config().mesh.n_eval : coord->config().run.eval.n_eval;
  double before = -1;
  Progress eval_bar("eval", eval_progress_options());
  const auto on_eval_rows = [&eval_bar](int64_t done, int64_t total) { eval_bar.update(done, total); };
  if (a.eval) {
    before = coord->evaluate_current(n_eval, on_eval_rows).value();
    char b[128];
    std::snprintf(b, sizeof b, "held-out pass@1 %.1f%% at version %lld", 100 * before, static_cast<long long>(coord->version()));
    term.info(b);
    (void)version_log->add_eval(coord->version(), before);
  }
  rpc::ServerOptions so;
  so.listen = a.listen + ":" + std::to_string(a.port);
  so.insecure = a.insecure;
  so.ca_dir = a.ca_dir;
  so.cert = a.cert;
  so.key = a.key;
  auto server = rpc::CoordinatorServer::start(*coord, so).value();
  term.info("listening on " + a.listen + ":" + std::to_string(server->port()) + ", run dir " + o.run_dir.string());
  std::unique_ptr<web::HttpServer> http;
  if (a.http_port >= 0) {
    web::HttpOptions ho;
    ho.bind = a.http_bind;
    ho.port = a.http_port;
    ho.hosts = a.http_hosts;
    http = start_http(*coord, version_log, ho);
    term.info("dashboard " + http->url() + "  metrics " + http->url() + "metrics");
  }
  if (!a.port_file.empty()) write_file_atomic(a.port_file, std::to_string(server->port()) + "\n").is_ok();

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  double finished_at = -1;
  int rc = 0;
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (auto f = coord->fatal()) {
      term.error(f->message());
      rc = 2;
      break;
    }
    if (coord->finished()) {
      if (finished_at < 0) finished_at = mesh::mono_seconds();
      if (coord->all_nodes_gone() || mesh::mono_seconds() - finished_at > a.linger_s) break;
    }
  }
  server->shutdown();
  coord->stop();
  term.result("coordinator: stopped at version " + std::to_string(coord->version()) + " " + coord->hash());
  if (a.eval && rc == 0) {
    const double after = coord->evaluate_current(n_eval, on_eval_rows).value();
    char b[128];
    std::snprintf(b, sizeof b, "coordinator: held-out pass@1 %.1f%% -> %.1f%%", 100 * before, 100 * after);
    term.result(b);
    (void)version_log->add_eval(coord->version(), after);
    nlohmann::json nodes = nlohmann::json::object();
    for (const auto& [name, r] : coord->nodes())
      nodes[name] = {{"updates_applied", r.updates_applied}, {"updates_rejected", r.updates_rejected},
                     {"final_hash", r.last_progress.hash()}, {"left", r.left},
                     {"audits_passed", r.audits_passed}, {"audits_failed", r.audits_failed}, {"excluded", r.excluded}};
    const nlohmann::json s = {{"pass_at_1_before", before}, {"pass_at_1_after", after}, {"rounds", coord->version()},
                              {"final_version_hash", coord->hash()}, {"bytes_up", coord->bytes_up()},
                              {"bytes_down", coord->bytes_down()}, {"nodes", nodes}};
    (void)write_file_atomic(o.run_dir / "summary.json", s.dump(2) + "\n");
    term.json_result(s.dump());
  } else {
    term.json_result(nlohmann::json({{"rounds", coord->version()}, {"final_version_hash", coord->hash()}}).dump());
  }
  std::fflush(stdout);
  if (rc != 0) std::_Exit(rc);
}

}  // namespace

void add_coordinator_command(CLI::App& app) {
  auto a = std::make_shared<CoordinatorArgs>();
  auto* cmd = app.add_subcommand("coordinator", "serve a mesh run's coordinator over gRPC");
  cmd->add_option("--config", a->config, "TOML run file with a [mesh] section");
  cmd->add_option("--run-dir", a->run_dir, "new run directory (default runs/mesh-<timestamp>)");
  cmd->add_option("--resume", a->resume, "resume the run in this directory at its last durable version");
  cmd->add_option("--listen", a->listen, "address to listen on (default 0.0.0.0)");
  cmd->add_option("--port", a->port, "port (0 = ephemeral; see --port-file)");
  cmd->add_flag("--insecure", a->insecure, "plaintext gRPC, no authentication (refused unless --listen is loopback)");
  cmd->add_option("--ca", a->ca_dir, "run CA folder from `meshrl ca init`: mutual TLS, allow-list and revocations");
  cmd->add_option("--cert", a->cert, "server certificate chain (PEM; default CA/coordinator/cert.pem)");
  cmd->add_option("--key", a->key, "server private key (PEM; default CA/coordinator/key.pem)");
  cmd->add_option("--port-file", a->port_file, "write the listening port to this file");
  cmd->add_option("--linger", a->linger_s, "seconds to wait for nodes to leave after the last version");
  cmd->add_option("--http", a->http_port, "serve the dashboard and /metrics on this port (0 = any free port)");
  cmd->add_option("--http-bind", a->http_bind, "address for --http (default 127.0.0.1; the page has no authentication)");
  cmd->add_option("--http-host", a->http_hosts, "a name the dashboard is reached by besides its address (repeatable; other Host headers get 403)");
  cmd->add_flag("--eval", a->eval, "evaluate held-out pass@1 at start and end (RUN_DIR/summary.json)");
  add_output_options(cmd, a->output);
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_coordinator(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

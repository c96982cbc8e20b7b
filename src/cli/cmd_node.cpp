// `meshrl node --coordinator HOST:PORT --name paris [--shard I/N] [--model DIR] [--node-file FILE] [--threads 1]
//  [--state-dir DIR] [--insecure | --identity DIR] [--signing-key FILE] [--report FILE] [--http PORT [--http-bind ADDR]]
//  [--task.command.argv=JSON --task.jsonl.path=FILE --lora.adapter=DIR]`
// Joins a run and trains on this machine's slice of the task until the run finishes. --http serves
// the node's Prometheus counters at /metrics (web/node_prometheus_text.h). The programs a node runs
// and the paths on its disk come from here, never from the coordinator (mesh/node_local_config.h).
#include <csignal>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/output_options.h"
#include "cli/progress.h"
#include "core/file_io.h"
#include "mesh/node.h"
#include "mesh/node_local_config.h"
#include "rpc/grpc_client.h"
#include "web/http_server.h"
#include "web/node_prometheus_text.h"
#include "trust/run_ca.h"
#include "trust/signing_key.h"

namespace meshrl::cli {

namespace {

struct NodeArgs {
  std::string coordinator;
  std::string name;
  std::string shard;
  std::string model;
  std::string node_file;  // node-local keys (mesh/node_local_config.h); the command line wins over it
  std::string cache_dir = "runs/cache";
  std::string state_dir;  // empty: no local state kept (see the option's help for why that is the default)
  std::string device = "cpu";
  int threads = 1;
  bool insecure = false;
  std::string identity;     // ca.pem, cert.pem, key.pem from `meshrl ca issue NAME`
  std::string signing_key;  // Ed25519 key file (created when missing); default DIR/signing.key, or per process
  std::string report;
  double give_up_s = 300;
  double max_backoff_s = 5;
  std::string test_misbehave;  // hidden, tests only: see mesh::NodeOptions
  int http_port = -1;    // -1: no /metrics; 0: any free port
  std::string http_bind = "127.0.0.1";
  std::vector<std::string> http_hosts;  // Host names /metrics answers besides its address
  OutputOptions output;
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

void run_node_cmd(const NodeArgs& a, const std::vector<std::string>& overrides) {
  apply_output_options(a.output, a.name);
  Terminal& term = Terminal::get();
  mesh::NodeOptions o;
  o.name = a.name;
  o.device = a.device;
  o.threads = a.threads;
  mesh::NodeLocalConfig local{a.model, overrides};
  if (!a.node_file.empty()) local = mesh::merge_node_local(mesh::load_node_file(a.node_file).value(), local);
  // The rest of the run config is the run's, shared by every node: refused here, before joining.
  if (Status s = mesh::check_node_overrides(local.overrides, a.name); !s.is_ok()) throw StatusError(s);
  o.model = local.model;
  o.overrides = local.overrides;
  o.cache_dir = a.cache_dir;
  o.state_dir = a.state_dir;
  o.give_up_s = a.give_up_s;
  o.max_backoff_s = a.max_backoff_s;
  o.test_misbehave = a.test_misbehave;
  if (!a.shard.empty()) {
    unsigned long long i = 0, n = 0;
    if (std::sscanf(a.shard.c_str(), "%llu/%llu", &i, &n) != 2 || n == 0 || i >= n)
      throw StatusError(invalid_argument("[node] --shard must be I/N with 0 <= I < N, got '" + a.shard + "'"));
    o.shard_index = i;
    o.shard_count = n;
  }
  o.log = [&term](const std::string& s) { term.log(guess_level(s), s); };
  if (a.insecure) term.warn("--insecure: plaintext gRPC, the coordinator is not authenticated; loopback only");
  // Full-weight downloads (at join, or when the broadcast path fails): bytes, rate, ETA. Plain
  // lines at most every 5 s (the node's log is usually a file).
  ProgressOptions po;
  po.bytes = true;
  po.plain_every_s = 5;
  auto download_bar = std::make_shared<Progress>("download", po);
  rpc::ChannelOptions co;
  co.on_download_bytes = [download_bar](uint64_t done, uint64_t total) {
    download_bar->update(static_cast<int64_t>(done), static_cast<int64_t>(total));
  };
  co.target = a.coordinator;
  co.insecure = a.insecure;
  if (!a.insecure) {
    if (a.identity.empty())
      throw StatusError(invalid_argument("[node] give --identity DIR (from `meshrl ca issue " + a.name + "`), or --insecure on loopback"));
    const auto id = trust::IdentityFiles::in(a.identity);
    co.ca_cert = id.ca_cert;
    co.client_cert = id.cert;
    co.client_key = id.key;
  }
  std::string key_file = a.signing_key;
  if (key_file.empty() && !a.identity.empty()) key_file = (std::filesystem::path(a.identity) / "signing.key").string();
  o.signing_key = std::make_shared<const trust::SigningKey>(key_file.empty() ? trust::SigningKey::generate()
                                                                             : trust::SigningKey::load_or_create(key_file).value());
  auto client = rpc::make_grpc_client(co).value();
  std::unique_ptr<web::HttpServer> http;
  if (a.http_port >= 0) {
    o.metrics = std::make_shared<mesh::NodeMetrics>();
    o.metrics->update([&](mesh::NodeCounters& c) { c.name = a.name; });  // labelled before the join
    web::HttpOptions ho;
    ho.bind = a.http_bind;
    ho.port = a.http_port;
    ho.dashboard = false;
    ho.hosts = a.http_hosts;
    http = web::HttpServer::start_metrics(ho, [m = o.metrics] { return web::node_prometheus_text(m->read()); }).value();
    term.info("metrics " + http->url() + "metrics");
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const mesh::NodeReport rep = mesh::run_node(*client, o, &g_stop).value();
  download_bar->finish();
  char line[512];
  std::snprintf(line, sizeof line, "node %s: done: version %lld hash %s, %lld inner steps, %lld/%lld updates accepted, compute share %.0f%%",
                a.name.c_str(), static_cast<long long>(rep.final_version), rep.final_hash.c_str(),
                static_cast<long long>(rep.inner_steps), static_cast<long long>(rep.updates_accepted),
                static_cast<long long>(rep.updates_sent), rep.wall_seconds > 0 ? 100 * rep.compute_seconds / rep.wall_seconds : 0.0);
  term.result(line);
  nlohmann::json j = rep.to_json();
  j["name"] = a.name;
  term.json_result(j.dump());
  if (!a.report.empty()) write_file_atomic(a.report, j.dump(2) + "\n").is_ok();
}

}  // namespace

void add_node_command(CLI::App& app) {
  auto a = std::make_shared<NodeArgs>();
  auto* cmd = app.add_subcommand("node", "join a mesh run and train on this machine's data");
  cmd->add_option("--coordinator", a->coordinator, "HOST:PORT of the coordinator (or of a link-emulator port)")->required();
  cmd->add_option("--name", a->name, "this node's name, unique in the run: [a-z0-9_-]")->required();
  cmd->add_option("--shard", a->shard, "I/N: train on slice I of N of the task's training problems");
  cmd->add_option("--model", a->model,
                  "model folder on this machine for architecture + tokenizer (default: the run's preset; required when the "
                  "run's model is a folder)");
  cmd->add_option("--node-file", a->node_file,
                  "TOML file of this node's own keys: model, task.command.argv, task.jsonl.path, lora.adapter "
                  "(mesh/node_local_config.h); flags on the command line win");
  cmd->add_option("--cache-dir", a->cache_dir, "keeps the frozen base of a [lora] run, downloaded once (default runs/cache)");
  // Off by default: it writes the residual and both AdamW moments (3x the trained parameters) every
  // round, which a full-weight run of a large model should opt into, and a default relative path
  // would collect files wherever a node happens to be started.
  cmd->add_option("--state-dir", a->state_dir,
                  "save this node's residual, AdamW moments and step here after each acknowledged update, and restore "
                  "them on restart when they fit (default: not kept)");
  cmd->add_option("--device", a->device, "cpu | cuda | mps | auto");
  cmd->add_option("--threads", a->threads, "intra-op threads (1 when processes share a machine)");
  cmd->add_flag("--insecure", a->insecure, "plaintext gRPC (refused unless the coordinator is on loopback)");
  cmd->add_option("--identity", a->identity, "folder from `meshrl ca issue NAME`: ca.pem, cert.pem, key.pem (mutual TLS)");
  cmd->add_option("--signing-key", a->signing_key, "Ed25519 key that signs updates, created when missing (default DIR/signing.key)");
  cmd->add_option("--report", a->report, "write this node's final report (JSON) here");
  cmd->add_option("--give-up", a->give_up_s, "seconds without reaching the coordinator before giving up");
  cmd->add_option("--max-backoff", a->max_backoff_s, "longest wait between reconnect tries, seconds (from 0.2, doubling)")
      ->check(CLI::Range(0.2, 3600.0));
  // Not in --help: makes this node lie (tests of reward audits and robust aggregation).
  cmd->add_option("--test-misbehave", a->test_misbehave, "inflate_rewards | sign_flip_x10 | sign_flip_x10_repeat")->group("");
  cmd->add_option("--http", a->http_port, "serve this node's Prometheus counters at /metrics on this port (0 = any free port)");
  cmd->add_option("--http-bind", a->http_bind, "address for --http (default 127.0.0.1; no authentication)");
  cmd->add_option("--http-host", a->http_hosts, "a name /metrics is scraped by besides its address (repeatable; other Host headers get 403)");
  add_output_options(cmd, a->output);
  cmd->footer("Keys a node sets itself, never taken from the coordinator: " + mesh::node_local_keys_text() +
              ". A run whose task needs one of them (a command verifier, a jsonl file, a start adapter, a model "
              "folder) is refused until this node gives its own. Every other key of the run config is the run's, taken from the "
              "coordinator's manifest: a --section.key=value for it is refused.");
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_node_cmd(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

// `meshrl demo [--config configs/demo-four-cities.toml] [--run-dir DIR] [--rounds N]
//  [--mode sync|async] [--topology configs/four-cities.toml] [--section.key=value ...]`
// The whole mesh on one machine: a coordinator (in this process, after the cached SFT warm
// start), the four-cities WAN link emulator in front of it (one link per city), and one node
// process per city (this binary, `meshrl node`), each on its own slice of the problems. Prints a
// line per version, then held-out pass@1 before/after and writes DIR/summary.json.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/child_process.h"
#include "cli/commands.h"
#include "cli/output_options.h"
#include "cli/progress.h"
#include "core/file_io.h"
#include "mesh/coordinator.h"
#include "mesh/mesh_config.h"
#include "model/config.h"
#include "net/link_emulator.h"
#include "net/topology.h"
#include "cli/run_observer.h"
#include "rpc/coordinator_service.h"

namespace meshrl::cli {

namespace {

namespace fs = std::filesystem;

struct DemoArgs {
  std::string config = "configs/demo-four-cities.toml";
  std::string topology = "configs/four-cities.toml";
  std::string run_dir;
  int64_t rounds = 0;
  std::string mode;
  double timeout_s = 1800;
  int http_port = 0;  // the dashboard; 0 = any free port, -1 = none
  int64_t lora_rank = 0;  // --lora[=R]: train and exchange rank-R adapters (run file's [lora]); 0 = the run file's
  OutputOptions output;
};

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/demo-%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MB", bytes / 1e6);
  return b;
}

std::string fmt_ratio(double r) {
  char b[32];
  std::snprintf(b, sizeof b, r >= 10 ? "%.0fx" : "%.1fx", r);
  return b;
}

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

constexpr double kLoraLrScale = 40;

// The node-local keys (mesh/node_local_config.h) from the demo's own run file: a node never takes
// a program or a path from its coordinator, and every demo node runs on this machine for the
// operator who wrote that file, so it is given the same verifier, prompts file, adapter and model.
std::vector<std::string> node_local_args(const mesh::MeshRunConfig& cfg) {
  const tasks::TaskConfig& t = cfg.run.task;
  std::vector<std::string> args;
  if (!model::is_preset_name(cfg.run.model.init)) args.insert(args.end(), {"--model", cfg.run.model.init});
  if (t.kind == "command") args.push_back("--task.command.argv=" + nlohmann::json(t.command.argv).dump());
  if (t.kind == "jsonl" || t.kind == "command") args.push_back("--task.jsonl.path=" + t.jsonl.path);
  if (!cfg.run.lora.adapter.empty()) args.push_back("--lora.adapter=" + cfg.run.lora.adapter);
  return args;
}

void run_demo(const DemoArgs& a, std::vector<std::string> overrides) {
  apply_output_options(a.output, "demo");
  Terminal& term = Terminal::get();
  const double t0 = mesh::mono_seconds();
  if (a.rounds > 0) overrides.push_back("--mesh.rounds=" + std::to_string(a.rounds));
  if (!a.mode.empty()) overrides.push_back("--mesh.mode=" + a.mode);
  if (a.lora_rank > 0) {
    // B-only adapters (A frozen) need a larger inner lr than full weights: 40x the run file's was the
    // best measured, 10x reached 77% of the full-weight gain (BENCHMARKS.md, "LoRA across the mesh").
    const bool lr_given = std::any_of(overrides.begin(), overrides.end(), [](const std::string& o) { return o.rfind("--grpo.lr", 0) == 0; });
    if (!lr_given) {
      const double lr = kLoraLrScale * mesh::load_mesh_run_config(a.config, overrides).value().run.grpo.lr;
      overrides.insert(overrides.begin(), "--grpo.lr=" + fmt("%.6g", lr));
      term.info("--lora: inner lr " + fmt("%.3g", lr) + " (" + fmt("%.0f", kLoraLrScale) + "x the run file's; --grpo.lr=X to choose)");
    }
    overrides.insert(overrides.begin(), "--lora.rank=" + std::to_string(a.lora_rank));
  }
  const mesh::MeshRunConfig cfg = mesh::load_mesh_run_config(a.config, overrides).value();
  const net::Topology topo = net::load_topology(a.topology).value();
  const fs::path dir = a.run_dir.empty() ? default_run_dir() : a.run_dir;
  fs::create_directories(dir / "nodes");
  {
    char b[512];
    std::snprintf(b, sizeof b, "%zu cities (%s), coordinator in %s, %lld rounds of H = %lld inner steps, %s mode, codec %s",
                  topo.cities.size(), a.topology.c_str(), topo.coordinator.c_str(), static_cast<long long>(cfg.mesh.rounds),
                  static_cast<long long>(cfg.mesh.inner_steps), cfg.mesh.mode.c_str(), cfg.mesh.codec.c_str());
    term.info(b);
  }
  term.info("run dir " + dir.string());
  const auto pooled = cfg.run.grpo.adam_pooled_batches;
  if (pooled > 1 && pooled != static_cast<int64_t>(topo.cities.size()))
    term.warn("[grpo] adam_pooled_batches = " + std::to_string(pooled) + " assumes that many nodes' steps are averaged, and " +
              std::to_string(topo.cities.size()) + " cities run: --grpo.adam_pooled_batches=" + std::to_string(topo.cities.size()) +
              " matches them");

  // Versions are reported from the coordinator's thread; the main thread evaluates and prints.
  std::mutex mu;
  std::vector<mesh::VersionReport> reports;
  mesh::CoordinatorOptions o;
  o.run_dir = dir / "coordinator";
  o.config = cfg;
  o.log = [&](const std::string& s) {
    std::FILE* f = std::fopen((dir / "coordinator.log").c_str(), "a");
    const Level level = guess_level(s);
    if (f) {
      const std::string line = format_log_line(std::chrono::system_clock::now(), level, "coordinator", s) + "\n";
      std::fputs(line.c_str(), f);
      std::fclose(f);
    }
    if (level != Level::kInfo || s.rfind("sft", 0) == 0 || s.rfind("joined", 0) == 0 || s.rfind("dropped", 0) == 0 ||
        s.rfind("rejoined", 0) == 0)
      term.log(level, s);
  };
  o.on_version = [&](const mesh::VersionReport& r) {
    std::lock_guard<std::mutex> lk(mu);
    reports.push_back(r);
  };
  Progress sft_bar("sft");
  o.on_sft_step = [&](const rl::SftProgress& p) {
    if (sft_bar.is_tty() || p.step % 100 == 0 || p.step == p.steps) sft_bar.update(p.step, p.steps, "loss " + fmt("%.3f", p.loss));
  };
  term.info("warm start (SFT, cached under " + cfg.run.sft.cache_dir + ") ...");
  auto version_log = attach_version_log(o);
  auto coord = mesh::Coordinator::start(o).value();
  std::unique_ptr<web::HttpServer> http;
  if (a.http_port >= 0) {
    web::HttpOptions ho;
    ho.port = a.http_port;
    http = start_http(*coord, version_log, ho);
    term.info("dashboard: " + http->url() + "  (Prometheus metrics at " + http->url() + "metrics)");
  }
  const int64_t n_eval = cfg.mesh.n_eval > 0 ? cfg.mesh.n_eval : cfg.run.eval.n_eval;
  Progress eval_bar("eval", eval_progress_options());
  const auto on_eval_rows = [&eval_bar](int64_t done, int64_t total) { eval_bar.update(done, total); };
  const double before = coord->evaluate_current(n_eval, on_eval_rows).value();
  (void)version_log->add_eval(coord->version(), before);
  term.info("held-out pass@1 before: " + fmt("%.1f%%", 100 * before) + " (" + std::to_string(n_eval) + " problems)");

  rpc::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.insecure = true;
  term.warn("plaintext gRPC on loopback (--insecure); real runs use TLS");
  auto server = rpc::CoordinatorServer::start(*coord, so).value();
  net::HostPort upstream{"127.0.0.1", static_cast<uint16_t>(server->port())};
  auto emu = net::LinkEmulator::start(net::link_specs(topo, upstream, 0).value()).value();

  std::vector<Child> children;
  const std::vector<std::string> env = {"OMP_NUM_THREADS=1", "OMP_WAIT_POLICY=PASSIVE"};
  for (size_t i = 0; i < topo.cities.size(); ++i) {
    const std::string& city = topo.cities[i].name;
    std::vector<std::string> args = {"node", "--coordinator", "127.0.0.1:" + std::to_string(emu->port(city)), "--name", city,
                                     "--shard", std::to_string(i) + "/" + std::to_string(topo.cities.size()),
                                     "--threads", "1", "--insecure", "--report", (dir / "nodes" / (city + ".json")).string()};
    for (std::string& x : node_local_args(cfg)) args.push_back(std::move(x));
    children.push_back(spawn_self(city, args, dir / "nodes" / (city + ".log"), env).value());
    term.info("started node " + city + " (pid " + std::to_string(children.back().pid) + ") via its link on port " +
              std::to_string(emu->port(city)) + " (RTT " + fmt("%.0f ms", topo.rtt(city, topo.coordinator)) + ")");
  }
  ProgressOptions round_opts;
  round_opts.unit = "rounds";
  Progress round_bar("round", round_opts);
  round_bar.start(coord->version());

  size_t shown = 0;
  bool timed_out = false;
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<mesh::VersionReport> fresh;
    {
      std::lock_guard<std::mutex> lk(mu);
      fresh.assign(reports.begin() + static_cast<long>(shown), reports.end());
      shown = reports.size();
    }
    for (const auto& r : fresh) {
      std::string pass;
      if (cfg.mesh.eval_every_rounds > 0 && r.version % cfg.mesh.eval_every_rounds == 0 && r.version < cfg.mesh.rounds) {
        auto p = coord->evaluate_current(n_eval, on_eval_rows);
        if (p.is_ok()) {
          (void)version_log->add_eval(r.version, p.value());
          char b[32];
          std::snprintf(b, sizeof b, "  pass@1 %.1f%%", 100 * p.value());
          pass = b;
        }
      }
      char b[512];
      std::snprintf(b, sizeof b, "reward %.3f  updates %lld (%s)  staleness %.1f  up %s  down %s  nodes %lld%s", r.reward_mean,
                    static_cast<long long>(r.n_updates), r.closed_by.c_str(), r.mean_staleness, mb(static_cast<double>(r.bytes_up)).c_str(),
                    mb(static_cast<double>(r.bytes_down)).c_str(), static_cast<long long>(r.nodes_online), pass.c_str());
      round_bar.update(r.version, cfg.mesh.rounds, b);
    }
    bool all_exited = true;
    for (Child& c : children) {
      if (c.pid <= 0) continue;
      if (auto rc = poll_child(c)) {
        if (*rc != 0)
          term.warn("node " + c.name + " exited with status " + std::to_string(*rc) + " (see " + (dir / "nodes" / (c.name + ".log")).string() + ")");
      } else {
        all_exited = false;
      }
    }
    if (all_exited) break;
    if (auto f = coord->fatal()) throw StatusError(*f);
    if (mesh::mono_seconds() - t0 > a.timeout_s) {
      timed_out = true;
      for (Child& c : children) signal_child(c, SIGTERM);
    }
    if (timed_out && mesh::mono_seconds() - t0 > a.timeout_s + 10)
      for (Child& c : children) signal_child(c, SIGKILL);
  }
  round_bar.finish();
  server->shutdown();
  const double after = coord->evaluate_current(n_eval, on_eval_rows).value();
  (void)version_log->add_eval(coord->version(), after);
  const int64_t P = coord->param_count();

  nlohmann::json node_hashes = nlohmann::json::object(), node_json = nlohmann::json::object();
  double compute = 0, wall = 0;
  int64_t inner_steps = 0;
  const auto records = coord->nodes();
  for (const auto& c : topo.cities) {
    auto text = read_file(dir / "nodes" / (c.name + ".json"), 1 << 20);
    nlohmann::json j = text.is_ok() ? nlohmann::json::parse(text.value(), nullptr, false) : nlohmann::json();
    if (j.is_object()) {
      node_hashes[c.name] = j.value("final_hash", "");
      compute += j.value("compute_seconds", 0.0);
      wall += j.value("wall_seconds", 0.0);
      inner_steps += j.value("inner_steps", int64_t{0});
    } else if (records.count(c.name)) {
      node_hashes[c.name] = records.at(c.name).last_progress.hash();
    }
    nlohmann::json nj = j.is_object() ? j : nlohmann::json::object();
    if (records.count(c.name)) {
      const auto& r = records.at(c.name);
      nj["updates_applied"] = r.updates_applied;
      nj["updates_rejected"] = r.updates_rejected;
      nj["coordinator_bytes_up"] = r.bytes_up;
      nj["coordinator_bytes_down"] = r.bytes_down;
    }
    nj["link_stats"] = {{"bytes_to_coordinator", emu->stats(c.name).bytes_to_upstream},
                        {"bytes_from_coordinator", emu->stats(c.name).bytes_from_upstream}};
    node_json[c.name] = nj;
  }
  emu->stop();
  const std::string final_hash = coord->hash();
  bool all_equal = true;
  for (auto& [k, v] : node_hashes.items()) all_equal = all_equal && v == final_hash;
  // Synchronous fp32 data parallelism for the same inner steps: every step, every node sends its
  // gradient (P floats) and receives the averaged one (P floats).
  const double dp_bytes = static_cast<double>(inner_steps) * 2.0 * 4.0 * static_cast<double>(P);
  const double bytes_up = static_cast<double>(coord->bytes_up()), bytes_down = static_cast<double>(coord->bytes_down());
  const double bytes_full = static_cast<double>(coord->bytes_down_full());
  // Per node per round, without the one-off full-weight downloads at join: updates up, broadcasts
  // down, against fp32 data parallelism's gradient up + gradient down for each of the H steps.
  // A node-round is H inner steps trained: versions x nodes in a full sync run, but in async mode
  // a version is about one update while every node downloads every version.
  const double node_rounds = std::max(1.0, static_cast<double>(inner_steps) / static_cast<double>(std::max<int64_t>(1, cfg.mesh.inner_steps)));
  const double per_node_round = (bytes_up + bytes_down - bytes_full) / node_rounds;
  const double dp_per_node_round = static_cast<double>(cfg.mesh.inner_steps) * 2.0 * 4.0 * static_cast<double>(P);
  nlohmann::json s = {
      {"format", "meshrl-demo/1"},
      {"pass_at_1_before", before},
      {"pass_at_1_after", after},
      {"rounds", coord->version()},
      {"nodes", topo.cities.size()},
      {"mode", cfg.mesh.mode},
      {"inner_steps_per_round", cfg.mesh.inner_steps},
      {"inner_steps_total", inner_steps},
      {"param_count", P},
      {"bytes_up", bytes_up},
      {"bytes_down", bytes_down},
      {"bytes_dataparallel_equivalent", dp_bytes},
      {"compression_vs_dataparallel", bytes_up + bytes_down > 0 ? dp_bytes / (bytes_up + bytes_down) : 0.0},
      {"bytes_down_full_weights", bytes_full},
      {"bytes_per_node_per_round", per_node_round},
      {"dataparallel_bytes_per_node_per_round", dp_per_node_round},
      {"per_round_reduction_vs_dataparallel", per_node_round > 0 ? dp_per_node_round / per_node_round : 0.0},
      {"compute_share", wall > 0 ? compute / wall : 0.0},
      {"wall_seconds", mesh::mono_seconds() - t0},
      {"final_version_hash", final_hash},
      {"node_hashes", node_hashes},
      {"all_nodes_on_final_hash", all_equal},
      {"per_node", node_json},
      {"run_dir", dir.string()},
      {"config", mesh::mesh_section_to_json(cfg.mesh)},
  };
  if (Status st = write_file_atomic(dir / "summary.json", s.dump(2) + "\n"); !st.is_ok()) throw StatusError(st);
  term.json_result(s.dump());
  char line[512];
  std::snprintf(line, sizeof line, "held-out pass@1: %.1f%% -> %.1f%% (%+.1f points) after %lld rounds x %lld inner steps on %zu nodes",
                100 * before, 100 * after, 100 * (after - before), static_cast<long long>(coord->version()),
                static_cast<long long>(cfg.mesh.inner_steps), topo.cities.size());
  term.result("");
  term.result(line);
  // Whole run, initial downloads included (a [lora] node's one-time base among them): a short run
  // can send more than data parallelism would, so the ratio is said in whichever direction holds.
  const double sent = bytes_up + bytes_down;
  const std::string versus = sent <= 0 ? "" : dp_bytes >= sent ? fmt_ratio(dp_bytes / sent) + " more" : fmt_ratio(sent / dp_bytes) + " less";
  std::snprintf(line, sizeof line, "bytes on the wire: up %s, down %s (%s of it initial downloads); synchronous fp32 data-parallel would send %s (%s)",
                mb(bytes_up).c_str(), mb(bytes_down).c_str(), mb(bytes_full).c_str(), mb(dp_bytes).c_str(), versus.c_str());
  term.result(line);
  std::snprintf(line, sizeof line, "per node per round (without the initial downloads): %s vs %s for fp32 data-parallel (%.0fx fewer)",
                mb(per_node_round).c_str(), mb(dp_per_node_round).c_str(), per_node_round > 0 ? dp_per_node_round / per_node_round : 0.0);
  term.result(line);
  std::snprintf(line, sizeof line, "compute share %.0f%%; final version %s; every node on it: %s", wall > 0 ? 100 * compute / wall : 0.0,
                final_hash.c_str(), all_equal ? "yes" : "NO");
  term.result(line);
  for (auto& [k, v] : node_json.items()) {
    std::snprintf(line, sizeof line, "  %-8s updates applied %lld, inner steps %lld, compute %.0f s of %.0f s", k.c_str(),
                  static_cast<long long>(v.value("updates_applied", int64_t{0})), static_cast<long long>(v.value("inner_steps", int64_t{0})),
                  v.value("compute_seconds", 0.0), v.value("wall_seconds", 0.0));
    term.result(line);
  }
  term.result("summary: " + (dir / "summary.json").string());
  coord->stop();
  if (timed_out) throw StatusError(io_error("[demo] timed out after " + std::to_string(static_cast<int>(a.timeout_s)) + " s"));
  // A run whose nodes failed has a summary but is not a success: make it say so in the exit status.
  if (!all_equal || node_hashes.size() != topo.cities.size())
    throw StatusError(io_error("[demo] not every node ended on the final version " + final_hash + " (see " + (dir / "nodes").string() +
                               "/*.log)"));
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  auto* cmd = app.add_subcommand("demo", "coordinator + four city nodes on loopback behind the WAN emulator");
  cmd->add_option("--config", a->config, "mesh run file (default configs/demo-four-cities.toml)");
  cmd->add_option("--topology", a->topology, "cities and links (default configs/four-cities.toml)");
  cmd->add_option("--run-dir", a->run_dir, "run directory (default runs/demo-<timestamp>)");
  cmd->add_option("--rounds", a->rounds, "versions to publish (default: the config's [mesh] rounds)");
  cmd->add_option("--mode", a->mode, "sync | async (default: the config's)");
  cmd->add_option("--http", a->http_port, "dashboard and /metrics port on 127.0.0.1 (default 0: any free port; -1: none)");
  cmd->add_flag("--lora{8}", a->lora_rank, "rank-8 adapters instead of full weights (--lora=R for rank R), at 40x the inner lr unless --grpo.lr is given; [lora] in configs/README.md");
  cmd->add_option("--timeout", a->timeout_s, "stop the nodes after this many seconds");
  add_output_options(cmd, a->output);
  cmd->allow_extras();
  cmd->callback([a, cmd] { run_demo(*a, cmd->remaining()); });
}

}  // namespace meshrl::cli

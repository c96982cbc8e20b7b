// `meshrl link-emulator --topology configs/four-cities.toml --upstream 127.0.0.1:PORT
//  [--listen-host HOST] [--listen-base PORT] [--stats-every SECONDS] [--partitions FILE]`
// Starts one emulated WAN link per city of the topology, each forwarding to the upstream (the
// coordinator), prints one line per city with the port nodes of that city connect to, then runs
// until SIGINT/SIGTERM, printing per-link byte counters every few seconds. With --partitions it
// rereads FILE every 100 ms and cuts off the links it names (net/partition_file.h).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "net/link_emulator.h"
#include "net/partition_file.h"
#include "net/topology.h"

namespace meshrl::cli {

namespace {

struct LinkEmulatorArgs {
  std::string topology;
  std::string upstream;
  std::string listen_host = "127.0.0.1";
  int listen_base = 0;
  double stats_every = 5;
  std::string partitions;  // control file naming the links to cut off ("" = none)
};

int g_signal_pipe[2] = {-1, -1};  // the handler only write()s (async-signal-safe); main polls

void on_signal(int) {
  const char b = 1;
  [[maybe_unused]] const auto n = write(g_signal_pipe[1], &b, 1);
}

std::string mbps(double bps) {
  char b[32];
  std::snprintf(b, sizeof b, "%g Mbit/s", bps / 1e6);
  return b;
}

void run_link_emulator(const LinkEmulatorArgs& a) {
  const auto topology = net::load_topology(a.topology).value();
  const auto upstream = net::parse_host_port(a.upstream).value();
  auto specs = net::link_specs(topology, upstream, static_cast<uint16_t>(a.listen_base)).value();
  for (auto& s : specs) s.listen.host = a.listen_host;

  if (pipe(g_signal_pipe) != 0) throw StatusError(io_error("[link-emulator] pipe: " + std::string(std::strerror(errno))));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto emulator = net::LinkEmulator::start(specs).value();
  std::printf("link-emulator: %zu links to %s:%u (coordinator in %s)\n", specs.size(), upstream.host.c_str(),
              static_cast<unsigned>(upstream.port), topology.coordinator.c_str());
  for (const auto& s : specs)
    std::printf("%-10s listening on %s:%u  one-way %.1f ms, jitter %g ms, to coordinator %s, from coordinator %s\n",
                s.name.c_str(), s.listen.host.c_str(), static_cast<unsigned>(emulator->port(s.name)), s.to_upstream.delay_ms, s.to_upstream.jitter_ms,
                mbps(s.to_upstream.bandwidth_bps).c_str(), mbps(s.from_upstream.bandwidth_bps).c_str());
  std::fflush(stdout);

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<net::PartitionFile> parts;
  if (!a.partitions.empty()) parts = std::make_unique<net::PartitionFile>(a.partitions);
  std::string parts_error;
  const int stats_ms = static_cast<int>(a.stats_every * 1000);
  auto next_stats = t0 + std::chrono::milliseconds(stats_ms);
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  for (;;) {
    if (parts) {
      auto changed = parts->apply(*emulator);
      if (!changed.is_ok() && changed.status().message() != parts_error)
        std::printf("link-emulator: %s (partitions unchanged)\n", changed.status().message().c_str());
      parts_error = changed.is_ok() ? "" : changed.status().message();
      if (changed.is_ok())
        for (const auto& [name, on] : changed.value()) std::printf("%s %s\n", name.c_str(), on ? "PARTITIONED" : "healed");
      std::fflush(stdout);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_stats - std::chrono::steady_clock::now()).count();
    const int rc = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, parts ? std::min<int64_t>(left, 100) : left)));
    if (rc > 0) break;  // SIGINT or SIGTERM
    if (rc < 0 && errno != EINTR) break;
    if (rc < 0 || std::chrono::steady_clock::now() < next_stats) continue;
    next_stats += std::chrono::milliseconds(stats_ms);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string line;
    for (const auto& s : specs) {
      const auto st = emulator->stats(s.name);
      char b[160];
      std::snprintf(b, sizeof b, "%s%s up %llu B down %llu B open %llu%s", line.empty() ? "" : " | ", s.name.c_str(),
                    static_cast<unsigned long long>(st.bytes_to_upstream), static_cast<unsigned long long>(st.bytes_from_upstream),
                    static_cast<unsigned long long>(st.connections_open), st.partitioned ? " PARTITIONED" : "");
      line += b;
    }
    std::printf("[%.0fs] %s\n", t, line.c_str());
    std::fflush(stdout);
  }
  emulator->stop();
  std::printf("link-emulator: stopped\n");
}

}  // namespace

void add_link_emulator_command(CLI::App& app) {
  auto a = std::make_shared<LinkEmulatorArgs>();
  auto* cmd = app.add_subcommand("link-emulator", "emulate the WAN: one delaying, rate-capped TCP proxy per city in front of the coordinator");
  cmd->add_option("--topology", a->topology, "topology file, e.g. configs/four-cities.toml")->required();
  cmd->add_option("--upstream", a->upstream, "the coordinator's HOST:PORT every link forwards to")->required();
  cmd->add_option("--listen-host", a->listen_host, "address the links listen on (0.0.0.0 to take nodes from other machines)")
      ->capture_default_str();
  cmd->add_option("--listen-base", a->listen_base, "city i of the file listens on port BASE+i (0 = ephemeral ports)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--stats-every", a->stats_every, "seconds between byte-counter lines")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--partitions", a->partitions,
                  "control file, reread every 100 ms: the links it names (one per line) are cut off, the others up");
  cmd->callback([a] { run_link_emulator(*a); });
}

}  // namespace meshrl::cli

// The topology file: which cities take part, each one's home uplink and downlink, the round-trip
// time between every pair, and which city the coordinator sits in (configs/four-cities.toml is
// the reference). Turns it into one LinkSpec per city for the link emulator. Knows nothing about
// sockets or threads.
//
// Format (version 1; every key below, nothing else):
//   version = 1
//   coordinator = "paris"          # a city of [cities]
//   seed = 0                       # optional: jitter seed
//   same_city_rtt_ms = 1.0         # optional: RTT between a node and a coordinator in one city
//   [cities.NAME]                  # NAME: lowercase letters, digits, '_'
//   uplink_mbps = 50               # > 0, Mbit/s (10^6 bits/s)
//   downlink_mbps = 100            # > 0
//   jitter_ms = 2                  # optional, >= 0: jitter of links from this city
//   [rtt_ms]
//   "A-B" = 10                     # >= 0, one entry per unordered pair of distinct cities, all pairs
//
// Link model for a node in city X and the coordinator in city C:
//   delay each way = rtt(X, C) / 2 (same_city_rtt_ms / 2 when X == C)
//   to the coordinator:   bandwidth min(X uplink, C downlink)
//   from the coordinator: bandwidth min(C uplink, X downlink)
//   jitter (both ways) = X's jitter_ms, the node's access line being the noisy part.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "net/link_proxy.h"

namespace meshrl::net {

struct City {
  std::string name;
  double uplink_mbps = 0;
  double downlink_mbps = 0;
  double jitter_ms = 0;
};

struct Topology {
  std::string coordinator;
  uint64_t seed = 0;
  double same_city_rtt_ms = 1.0;
  std::vector<City> cities;                                    // in file order
  std::map<std::pair<std::string, std::string>, double> rtt_ms;  // key: (a, b) with a < b

  bool has_city(const std::string& name) const;
  const City& city(const std::string& name) const;                // a listed city (MESHRL_CHECK)
  double rtt(const std::string& a, const std::string& b) const;   // listed cities (MESHRL_CHECK)
};

inline constexpr int64_t kTopologyVersion = 1;

// Errors name the source and the key: "four-cities.toml: [cities.dublin] uplink_mbps must be > 0, got -3".
Result<Topology> parse_topology(const std::string& text, const std::string& source);
Result<Topology> load_topology(const std::filesystem::path& path);

// The link of a node in `city` to the coordinator at `upstream`, listening on listen_port (0 =
// ephemeral). `city` must be a listed city (MESHRL_CHECK).
LinkSpec link_spec_for(const Topology& topology, const std::string& city, const HostPort& upstream, uint16_t listen_port);

// One link per city, in file order; the coordinator's own city included (a node beside it).
// listen_base 0: every link on an ephemeral port; else city i listens on listen_base + i.
Result<std::vector<LinkSpec>> link_specs(const Topology& topology, const HostPort& upstream, uint16_t listen_base);

}  // namespace meshrl::net

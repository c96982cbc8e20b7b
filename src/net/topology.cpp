#include "net/topology.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/check.h"
#include "core/file_io.h"

namespace meshrl::net {

namespace {

constexpr double kMaxMbps = 1e6;      // 1 Tbit/s: anything above is a typo
constexpr double kMaxMs = 60'000;     // a minute of RTT or jitter: likewise
constexpr size_t kMaxCities = 1024;

std::pair<std::string, std::string> ordered(const std::string& a, const std::string& b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

std::string shown(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

bool valid_city_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

// A number (integer or float) in [lo, hi] (lo excluded when lo_open). `where` is "file: [section] key".
Result<double> number_in(const toml::node& n, const std::string& where, double lo, bool lo_open, double hi) {
  double v;
  if (auto i = n.as_integer()) v = static_cast<double>(i->get());
  else if (auto f = n.as_floating_point()) v = f->get();
  else return invalid_argument(where + " must be a number");
  if (!std::isfinite(v) || (lo_open ? v <= lo : v < lo) || v > hi)
    return invalid_argument(where + " must be " + (lo_open ? "> " : ">= ") + shown(lo) + " and <= " + shown(hi) + ", got " + shown(v));
  return v;
}

Status parse_city(const std::string& name, const toml::node& node, const std::string& source, City& city) {
  const std::string section = source + ": [cities." + name + "]";
  if (!valid_city_name(name))
    return invalid_argument(source + ": city name '" + name + "' must be lowercase letters, digits or '_' (up to 64)");
  const toml::table* t = node.as_table();
  if (!t) return invalid_argument(section + " must be a table with uplink_mbps, downlink_mbps, jitter_ms");
  city.name = name;
  bool has_up = false, has_down = false;
  for (auto&& [k, v] : *t) {
    const std::string key(k.str());
    const std::string where = section + " " + key;
    if (key == "uplink_mbps") {
      MESHRL_ASSIGN_OR_RETURN(city.uplink_mbps, number_in(v, where, 0, true, kMaxMbps));
      has_up = true;
    } else if (key == "downlink_mbps") {
      MESHRL_ASSIGN_OR_RETURN(city.downlink_mbps, number_in(v, where, 0, true, kMaxMbps));
      has_down = true;
    } else if (key == "jitter_ms") {
      MESHRL_ASSIGN_OR_RETURN(city.jitter_ms, number_in(v, where, 0, false, kMaxMs));
    } else {
      return invalid_argument(section + " unknown key '" + key + "'; keys are uplink_mbps, downlink_mbps, jitter_ms");
    }
  }
  if (!has_up) return invalid_argument(section + " uplink_mbps is missing");
  if (!has_down) return invalid_argument(section + " downlink_mbps is missing");
  return Status::ok();
}

Status parse_rtts(const toml::table& t, const std::string& source, Topology& topo) {
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    const std::string where = source + ": [rtt_ms] \"" + key + "\"";
    const size_t dash = key.find('-');
    if (dash == std::string::npos || key.find('-', dash + 1) != std::string::npos)
      return invalid_argument(where + ": keys are \"CITY-CITY\", e.g. \"paris-zurich\"");
    const std::string a = key.substr(0, dash), b = key.substr(dash + 1);
    for (const std::string& c : {a, b})
      if (!topo.has_city(c)) return invalid_argument(where + ": unknown city '" + c + "'; add it under [cities." + c + "]");
    if (a == b) return invalid_argument(where + ": a city's RTT to itself is same_city_rtt_ms");
    if (topo.rtt_ms.count(ordered(a, b))) return invalid_argument(where + ": the pair " + a + "/" + b + " is given twice");
    MESHRL_ASSIGN_OR_RETURN(double ms, number_in(v, where, 0, false, kMaxMs));
    topo.rtt_ms[ordered(a, b)] = ms;
  }
  for (size_t i = 0; i < topo.cities.size(); ++i)
    for (size_t j = i + 1; j < topo.cities.size(); ++j) {
      const std::string& a = topo.cities[i].name;
      const std::string& b = topo.cities[j].name;
      if (!topo.rtt_ms.count(ordered(a, b)))
        return invalid_argument(source + ": [rtt_ms] \"" + a + "-" + b + "\" is missing; every pair of cities needs its RTT");
    }
  return Status::ok();
}

}  // namespace

bool Topology::has_city(const std::string& name) const {
  return std::any_of(cities.begin(), cities.end(), [&](const City& c) { return c.name == name; });
}

const City& Topology::city(const std::string& name) const {
  const City* found = nullptr;
  for (const City& c : cities)
    if (c.name == name) found = &c;
  MESHRL_CHECK(found, "[topology] no city '" << name << "'");
  return *found;
}

double Topology::rtt(const std::string& a, const std::string& b) const {
  MESHRL_CHECK(has_city(a) && has_city(b), "[topology] rtt of unknown city " << a << " or " << b);
  if (a == b) return same_city_rtt_ms;
  auto it = rtt_ms.find(ordered(a, b));
  MESHRL_CHECK(it != rtt_ms.end(), "[topology] no rtt for " << a << "-" << b);
  return it->second;
}

Result<Topology> parse_topology(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return invalid_argument(source + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                            ": " + std::string(e.description()));
  }
  Topology topo;
  // Version first: a file of another version may mean other things by the same keys.
  const toml::node* version = root.get("version");
  if (!version) return invalid_argument(source + ": version is missing; this build reads version = " + std::to_string(kTopologyVersion));
  if (!version->as_integer() || version->as_integer()->get() != kTopologyVersion)
    return invalid_argument(source + ": version must be " + std::to_string(kTopologyVersion) + " (this build's topology format)");

  const toml::table* cities = nullptr;
  const toml::table* rtts = nullptr;
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    const std::string where = source + ": " + key;
    if (key == "version") continue;
    if (key == "coordinator") {
      if (!v.as_string()) return invalid_argument(where + " must be a string naming a city");
      topo.coordinator = v.as_string()->get();
    } else if (key == "seed") {
      if (!v.as_integer() || v.as_integer()->get() < 0) return invalid_argument(where + " must be an integer >= 0");
      topo.seed = static_cast<uint64_t>(v.as_integer()->get());
    } else if (key == "same_city_rtt_ms") {
      MESHRL_ASSIGN_OR_RETURN(topo.same_city_rtt_ms, number_in(v, where, 0, false, kMaxMs));
    } else if (key == "cities") {
      if (!(cities = v.as_table())) return invalid_argument(where + " must be a table of [cities.NAME] tables");
    } else if (key == "rtt_ms") {
      if (!(rtts = v.as_table())) return invalid_argument(where + " must be a table of \"CITY-CITY\" = milliseconds");
    } else {
      return invalid_argument(source + ": unknown key '" + key + "'; keys are version, coordinator, seed, same_city_rtt_ms, [cities.NAME], [rtt_ms]");
    }
  }
  if (!cities || cities->empty()) return invalid_argument(source + ": [cities] is missing; list at least one [cities.NAME]");
  if (cities->size() > kMaxCities) return invalid_argument(source + ": [cities] lists more than " + std::to_string(kMaxCities) + " cities");

  // toml++ keeps tables sorted by key; order the cities as written so listen ports follow the file.
  std::vector<std::pair<toml::source_position, City>> in_order;
  for (auto&& [k, v] : *cities) {
    City c;
    MESHRL_RETURN_IF_ERROR(parse_city(std::string(k.str()), v, source, c));
    in_order.emplace_back(k.source().begin, std::move(c));
  }
  std::stable_sort(in_order.begin(), in_order.end(), [](const auto& a, const auto& b) {
    return a.first.line != b.first.line ? a.first.line < b.first.line : a.first.column < b.first.column;
  });
  for (auto& [pos, c] : in_order) topo.cities.push_back(std::move(c));

  if (topo.coordinator.empty()) return invalid_argument(source + ": coordinator is missing; name the city the coordinator sits in");
  if (!topo.has_city(topo.coordinator))
    return invalid_argument(source + ": coordinator \"" + topo.coordinator + "\" is not a city of [cities]");
  if (rtts) {
    MESHRL_RETURN_IF_ERROR(parse_rtts(*rtts, source, topo));
  } else if (topo.cities.size() > 1) {
    return invalid_argument(source + ": [rtt_ms] is missing; every pair of cities needs its RTT");
  }
  return topo;
}

Result<Topology> load_topology(const std::filesystem::path& path) {
  auto text = read_file(path, uint64_t{1} << 20);
  if (!text.is_ok()) return Status(text.status().code(), "[topology] " + text.status().message());
  return parse_topology(text.value(), path.string());
}

LinkSpec link_spec_for(const Topology& topology, const std::string& city, const HostPort& upstream, uint16_t listen_port) {
  const City& x = topology.city(city);
  const City& c = topology.city(topology.coordinator);
  const double one_way_ms = topology.rtt(city, topology.coordinator) / 2;
  LinkSpec s;
  s.name = city;
  s.listen = HostPort{"127.0.0.1", listen_port};
  s.upstream = upstream;
  s.to_upstream = DirectionSpec{one_way_ms, x.jitter_ms, std::min(x.uplink_mbps, c.downlink_mbps) * 1e6};
  s.from_upstream = DirectionSpec{one_way_ms, x.jitter_ms, std::min(c.uplink_mbps, x.downlink_mbps) * 1e6};
  // Seeded by name, so adding a city does not change the others' jitter.
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char ch : city) h = (h ^ ch) * 1099511628211ULL;
  s.seed = topology.seed ^ h;
  return s;
}

Result<std::vector<LinkSpec>> link_specs(const Topology& topology, const HostPort& upstream, uint16_t listen_base) {
  if (listen_base != 0 && listen_base + topology.cities.size() - 1 > 65535)
    return invalid_argument("[topology] --listen-base " + std::to_string(listen_base) + " + " +
                            std::to_string(topology.cities.size()) + " cities runs past port 65535");
  std::vector<LinkSpec> out;
  for (size_t i = 0; i < topology.cities.size(); ++i) {
    const uint16_t port = listen_base == 0 ? 0 : static_cast<uint16_t>(listen_base + i);
    out.push_back(link_spec_for(topology, topology.cities[i].name, upstream, port));
  }
  return out;
}

}  // namespace meshrl::net

#include "net/topology.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/file_io.h"
#include "core/toml_document.h"

namespace meshrl::net {

namespace {

using config::Field;

constexpr double kMaxMbps = 1e6;      // 1 Tbit/s: anything above is a typo
constexpr double kMaxMs = 60'000;     // a minute of RTT or jitter: likewise
constexpr size_t kMaxCities = 1024;

std::pair<std::string, std::string> ordered(const std::string& a, const std::string& b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

bool valid_city_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

// The keys outside any table; [cities.NAME] and [rtt_ms] hold names the file chooses and are read
// by parse_city and parse_rtts.
config::Section top_section(Topology& t, int64_t& version) {
  return {"",
          {
              Field("version", &version, "format version"),
              Field("coordinator", &t.coordinator, "the city the coordinator sits in"),
              Field("seed", &t.seed, "jitter seed"),
              Field("same_city_rtt_ms", &t.same_city_rtt_ms, "RTT between a node and a coordinator in one city").in(config::closed(0, kMaxMs)),
          },
          "; keys are version, coordinator, seed, same_city_rtt_ms, [cities.NAME], [rtt_ms]"};
}

config::Section city_section(City& c, const std::string& name) {
  return {"cities." + name,
          {
              Field("uplink_mbps", &c.uplink_mbps, "home uplink, Mbit/s (10^6 bits/s)").in(config::open_closed(0, kMaxMbps)).must_be_given(),
              Field("downlink_mbps", &c.downlink_mbps, "home downlink, Mbit/s").in(config::open_closed(0, kMaxMbps)).must_be_given(),
              Field("jitter_ms", &c.jitter_ms, "jitter of links from this city").in(config::closed(0, kMaxMs)),
          },
          ""};
}

Status parse_city(const std::string& name, const toml::node& node, const std::string& source, City& city) {
  if (!valid_city_name(name))
    return invalid_argument(source + ": city name '" + name + "' must be lowercase letters, digits or '_' (up to 64)");
  const config::Scope scope{source, "cities." + name};
  const toml::table* t = node.as_table();
  if (!t) return invalid_argument(scope.where(config::position_of(node.source())) + " must be a table with uplink_mbps, downlink_mbps, jitter_ms");
  city.name = name;
  config::Section s = city_section(city, name);
  MESHRL_RETURN_IF_ERROR(config::read_section(*t, s, scope));
  return config::check_fields(s, scope);
}

Status parse_rtts(const toml::table& t, const std::string& source, Topology& topo) {
  const config::Scope scope{source, "rtt_ms"};
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    const std::string quoted = "\"" + key + "\"";
    const std::string where = scope.name(quoted, config::position_of(k.source()));
    const size_t dash = key.find('-');
    if (dash == std::string::npos || key.find('-', dash + 1) != std::string::npos)
      return invalid_argument(where + ": keys are \"CITY-CITY\", e.g. \"paris-zurich\"");
    const std::string a = key.substr(0, dash), b = key.substr(dash + 1);
    for (const std::string& c : {a, b})
      if (!topo.has_city(c)) return invalid_argument(where + ": unknown city '" + c + "'; add it under [cities." + c + "]");
    if (a == b) return invalid_argument(where + ": a city's RTT to itself is same_city_rtt_ms");
    if (topo.rtt_ms.count(ordered(a, b))) return invalid_argument(where + ": the pair " + a + "/" + b + " is given twice");
    double ms = 0;
    const Field f = Field(quoted, &ms, "round-trip time, ms").in(config::closed(0, kMaxMs));
    MESHRL_RETURN_IF_ERROR(config::set_from_toml(f.ref, v, scope.name(quoted, config::position_of(v.source()))));
    MESHRL_RETURN_IF_ERROR(config::check_field(f, scope));
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
  MESHRL_ASSIGN_OR_RETURN(toml::table root, config::parse_toml(text, source));
  // Version first: a file of another version may mean other things by the same keys.
  const toml::node* version = root.get("version");
  if (!version) return invalid_argument(source + ": version is missing; this build reads version = " + std::to_string(kTopologyVersion));
  if (!version->as_integer() || version->as_integer()->get() != kTopologyVersion)
    return invalid_argument(source + ": version must be " + std::to_string(kTopologyVersion) + " (this build's topology format)");

  Topology topo;
  int64_t version_read = 0;
  config::Section top = top_section(topo, version_read);
  const config::Scope scope{source, ""};
  const toml::table* cities = nullptr;
  const toml::table* rtts = nullptr;
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    if (key == "cities") {
      if (!(cities = v.as_table())) return invalid_argument(scope.name(key, config::position_of(v.source())) + " must be a table of [cities.NAME] tables");
    } else if (key == "rtt_ms") {
      if (!(rtts = v.as_table()))
        return invalid_argument(scope.name(key, config::position_of(v.source())) + " must be a table of \"CITY-CITY\" = milliseconds");
    } else {
      MESHRL_RETURN_IF_ERROR(config::read_key(top, key, v, config::position_of(k.source()), scope));
    }
  }
  MESHRL_RETURN_IF_ERROR(config::check_fields(top, scope));
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

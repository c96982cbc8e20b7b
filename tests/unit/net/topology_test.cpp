// The topology file: the shipped four-cities file, the link settings derived from it, and bad
// input refused with an error that names the key.
//   ./build/test_net --gtest_filter='Topology*'
#include "net/topology.h"

#include <gtest/gtest.h>

#include <string>

namespace meshrl::net {
namespace {

const char* kFourCities = MESHRL_TEST_DATA "/../../configs/four-cities.toml";

TEST(Topology, FourCitiesFileHasTheDesignRoundTripTimes) {
  auto t = load_topology(kFourCities);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->coordinator, "paris");
  ASSERT_EQ(t->cities.size(), 4u);
  const char* in_file_order[] = {"paris", "zurich", "dublin", "toronto"};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(t->cities[i].name, in_file_order[i]);
  // ../shared/DESIGN.md, "The four cities".
  EXPECT_EQ(t->rtt("paris", "zurich"), 10);
  EXPECT_EQ(t->rtt("dublin", "paris"), 20);
  EXPECT_EQ(t->rtt("zurich", "dublin"), 28);
  EXPECT_EQ(t->rtt("paris", "toronto"), 90);
  EXPECT_EQ(t->rtt("toronto", "dublin"), 80);
  EXPECT_EQ(t->rtt("zurich", "toronto"), 100);
  EXPECT_EQ(t->rtt("paris", "paris"), 1.0);
  for (const City& c : t->cities) {  // home broadband, 20 to 100 Mbit/s
    EXPECT_GE(c.uplink_mbps, 20) << c.name;
    EXPECT_LE(c.uplink_mbps, 100) << c.name;
    EXPECT_GE(c.downlink_mbps, 20) << c.name;
    EXPECT_LE(c.downlink_mbps, 100) << c.name;
    EXPECT_GT(c.jitter_ms, 0) << c.name;
    EXPECT_LE(c.jitter_ms, 5) << c.name;
  }
}

TEST(Topology, LinkSettingsFollowTheNodeAndTheCoordinator) {
  Topology t = load_topology(kFourCities).value();
  const HostPort coordinator{"127.0.0.1", 50051};
  const LinkSpec toronto = link_spec_for(t, "toronto", coordinator, 0);
  EXPECT_EQ(toronto.name, "toronto");
  EXPECT_EQ(toronto.to_upstream.delay_ms, 45);    // RTT 90 / 2
  EXPECT_EQ(toronto.from_upstream.delay_ms, 45);
  EXPECT_EQ(toronto.to_upstream.bandwidth_bps, 20e6);     // min(toronto up 20, paris down 100)
  EXPECT_EQ(toronto.from_upstream.bandwidth_bps, 100e6);  // min(paris up 100, toronto down 100)
  EXPECT_EQ(toronto.to_upstream.jitter_ms, t.city("toronto").jitter_ms);
  EXPECT_EQ(toronto.upstream.port, 50051);

  const LinkSpec dublin = link_spec_for(t, "dublin", coordinator, 0);
  EXPECT_EQ(dublin.to_upstream.delay_ms, 10);
  EXPECT_EQ(dublin.to_upstream.bandwidth_bps, 20e6);    // dublin's 20 Mbit/s uplink
  EXPECT_EQ(dublin.from_upstream.bandwidth_bps, 80e6);  // dublin's 80 Mbit/s downlink

  const LinkSpec paris = link_spec_for(t, "paris", coordinator, 0);
  EXPECT_EQ(paris.to_upstream.delay_ms, 0.5);  // same city
  EXPECT_NE(paris.seed, toronto.seed);

  // The coordinator moved: the same file, other links.
  t.coordinator = "toronto";
  const LinkSpec zurich = link_spec_for(t, "zurich", coordinator, 0);
  EXPECT_EQ(zurich.to_upstream.delay_ms, 50);
  EXPECT_EQ(zurich.to_upstream.bandwidth_bps, 50e6);     // min(zurich up 50, toronto down 100)
  EXPECT_EQ(zurich.from_upstream.bandwidth_bps, 20e6);   // min(toronto up 20, zurich down 100)
}

TEST(Topology, ListenPortsFollowTheFileOrder) {
  const Topology t = load_topology(kFourCities).value();
  auto specs = link_specs(t, HostPort{"127.0.0.1", 50051}, 41000);
  ASSERT_TRUE(specs.is_ok()) << specs.status().message();
  ASSERT_EQ(specs->size(), 4u);
  EXPECT_EQ((*specs)[0].name, "paris");
  EXPECT_EQ((*specs)[0].listen.port, 41000);
  EXPECT_EQ((*specs)[3].name, "toronto");
  EXPECT_EQ((*specs)[3].listen.port, 41003);
  EXPECT_EQ(link_specs(t, HostPort{"127.0.0.1", 50051}, 0).value()[2].listen.port, 0);
  auto past_end = link_specs(t, HostPort{"127.0.0.1", 50051}, 65534);
  ASSERT_FALSE(past_end.is_ok());
  EXPECT_NE(past_end.status().message().find("65535"), std::string::npos);
}

const std::string kTwoCities = R"(version = 1
coordinator = "paris"
[cities.paris]
uplink_mbps = 100
downlink_mbps = 100
[cities.dublin]
uplink_mbps = 20
downlink_mbps = 80
jitter_ms = 2
[rtt_ms]
paris-dublin = 20
)";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// Parses `text` and expects an error whose message holds every one of `needles`.
void expect_error(const std::string& text, std::initializer_list<const char*> needles) {
  auto t = parse_topology(text, "net.toml");
  ASSERT_FALSE(t.is_ok()) << "accepted:\n" << text;
  const std::string& m = t.status().message();
  EXPECT_NE(m.find("net.toml"), std::string::npos) << m;
  for (const char* n : needles) EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' not in: " << m;
}

TEST(Topology, SmallValidFileParses) {
  auto t = parse_topology(kTwoCities, "net.toml");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->city("paris").jitter_ms, 0);  // optional
  EXPECT_EQ(t->rtt("dublin", "paris"), 20);
}

TEST(Topology, BadInputIsRefusedNamingTheKey) {
  expect_error(replaced(kTwoCities, "coordinator", "seed = 1\nspeed = 3\ncoordinator"), {"unknown key 'speed'"});
  expect_error(replaced(kTwoCities, "jitter_ms = 2", "jiter_ms = 2"), {"[cities.dublin]", "unknown key 'jiter_ms'"});
  expect_error(replaced(kTwoCities, "paris-dublin = 20", "paris-dublin = 20\nparis-lyon = 5"), {"paris-lyon", "unknown city 'lyon'"});
  expect_error(replaced(kTwoCities, "paris-dublin = 20", ""), {"paris-dublin", "missing"});
  expect_error(replaced(kTwoCities, "[rtt_ms]\nparis-dublin = 20\n", ""), {"[rtt_ms] is missing"});
  expect_error(replaced(kTwoCities, "paris-dublin = 20", "paris-dublin = 20\ndublin-paris = 21"), {"given twice"});
  expect_error(replaced(kTwoCities, "paris-dublin = 20", "paris-dublin = -20"), {"paris-dublin", "in [0, 60000]", "-20"});
  expect_error(replaced(kTwoCities, "paris-dublin = 20", "paris-dublin = \"far\""), {"paris-dublin", "must be a number"});
  expect_error(replaced(kTwoCities, "paris-dublin = 20", "paris-dublin = nan"), {"paris-dublin"});
  expect_error(replaced(kTwoCities, "paris-dublin = 20", "paris-dublin = 20\nparis-paris = 1"), {"paris-paris", "itself"});
  expect_error(replaced(kTwoCities, "paris-dublin", "paris_dublin"), {"paris_dublin", "CITY-CITY"});
  expect_error(replaced(kTwoCities, "uplink_mbps = 20", "uplink_mbps = -3"), {"[cities.dublin] uplink_mbps", "in (0, 1000000]", "-3"});
  expect_error(replaced(kTwoCities, "uplink_mbps = 20", "uplink_mbps = 0"), {"[cities.dublin] uplink_mbps", "in (0, 1000000]"});
  expect_error(replaced(kTwoCities, "uplink_mbps = 20\n", ""), {"[cities.dublin] uplink_mbps is missing"});
  expect_error(replaced(kTwoCities, "jitter_ms = 2", "jitter_ms = -1"), {"[cities.dublin] jitter_ms"});
  expect_error(replaced(kTwoCities, "\"paris\"", "\"lyon\""), {"coordinator", "lyon"});
  expect_error(replaced(kTwoCities, "coordinator = \"paris\"\n", ""), {"coordinator is missing"});
  expect_error(replaced(kTwoCities, "version = 1", "version = 2"), {"version must be 1"});
  expect_error(replaced(kTwoCities, "version = 1\n", ""), {"version is missing"});
  expect_error(replaced(kTwoCities, "[cities.dublin]", "[cities.Dublin]"), {"Dublin", "lowercase"});
  expect_error(replaced(kTwoCities, "[cities.dublin]", "[cities.dub-lin]"), {"dub-lin"});
  // A top-level key written after a table belongs to that table (TOML), and is refused there.
  expect_error(kTwoCities + "same_city_rtt_ms = 1\n", {"same_city_rtt_ms", "CITY-CITY"});
  expect_error(replaced(kTwoCities, "coordinator", "same_city_rtt_ms = -1\ncoordinator"), {"same_city_rtt_ms", "in [0, 60000]"});
  expect_error(replaced(kTwoCities, "coordinator", "seed = -4\ncoordinator"), {"seed", "non-negative"});
  expect_error(replaced(kTwoCities, "[rtt_ms]", "[rtt_ms"), {"net.toml:"});  // TOML syntax: file and line
  expect_error("version = 1\ncoordinator = \"paris\"\n", {"[cities] is missing"});
}

TEST(Topology, MissingFileIsAnErrorNotACrash) {
  auto t = load_topology("/nonexistent/four-cities.toml");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("four-cities.toml"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace meshrl::net

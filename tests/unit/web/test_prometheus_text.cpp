// The Prometheus text of a snapshot written out by hand: counters, a cumulative histogram and
// label escaping.
//   build/tests/test_web --gtest_filter='PrometheusText*'
#include <gtest/gtest.h>

#include "two_round_snapshot.h"
#include "web/prometheus_text.h"

namespace meshrl::web {
namespace {

using testing::two_round_snapshot;

TEST(PrometheusText, CountersHistogramAndEscaping) {
  const std::string t = prometheus_text(two_round_snapshot());
  EXPECT_NE(t.find("# TYPE meshrl_rounds_committed_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_rounds_committed_total{closed_by=\"quorum\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_updates_total{outcome=\"rejected\",reason=\"stale\"} 1\n"), std::string::npos);
  // Buckets are cumulative: 3 at <= 0, 4 at <= 1, all 5 at +Inf.
  EXPECT_NE(t.find("meshrl_update_staleness_bucket{le=\"0\"} 3\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_update_staleness_bucket{le=\"1\"} 4\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_update_staleness_bucket{le=\"+Inf\"} 5\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_update_staleness_count 5\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_nodes{state=\"dropped\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_nodes{state=\"straggling\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("meshrl_node_policy_version{node=\"pa\\\"ris\"} 2\n"), std::string::npos);
  EXPECT_EQ(prometheus_escape("a\\b\n\"c\""), "a\\\\b\\n\\\"c\\\"");
}

}  // namespace
}  // namespace meshrl::web

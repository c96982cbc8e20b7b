// RUN_DIR/metrics.jsonl (VersionLog): evals merged into their version's point, torn last lines
// skipped, and what is appended read back by a new log.
//   build/tests/test_web --gtest_filter='VersionLog*'
#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "web/version_log.h"

namespace meshrl::web {
namespace {

TEST(VersionLog, MergesEvalsAndSkipsTornLines) {
  const auto points = VersionLog::parse(
      "{\"kind\":\"eval\",\"version\":0,\"pass_at_1\":0.25}\n"
      "{\"kind\":\"version\",\"version\":2,\"reward_mean\":0.5}\n"
      "{\"kind\":\"version\",\"version\":1,\"reward_mean\":0.4}\n"
      "{\"kind\":\"eval\",\"version\":2,\"pass_at_1\":0.3}\n"
      "{\"kind\":\"version\",\"vers");
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].version, 0);
  EXPECT_DOUBLE_EQ(*points[0].pass_at_1, 0.25);
  EXPECT_EQ(points[1].version, 1);
  EXPECT_FALSE(points[1].pass_at_1.has_value());
  EXPECT_DOUBLE_EQ(points[2].reward_mean, 0.5);
  EXPECT_DOUBLE_EQ(*points[2].pass_at_1, 0.3);
}

TEST(VersionLog, AppendsAndReadsBack) {
  test_support::TempDir dir;
  const auto file = dir.path() / "metrics.jsonl";
  {
    VersionLog log(file);
    VersionPoint p;
    p.version = 1;
    p.reward_mean = 0.75;
    ASSERT_TRUE(log.add_version(p).is_ok());
    ASSERT_TRUE(log.add_eval(1, 0.5).is_ok());
  }
  VersionLog again(file);
  ASSERT_EQ(again.points().size(), 1u);
  EXPECT_DOUBLE_EQ(again.points()[0].reward_mean, 0.75);
  EXPECT_DOUBLE_EQ(*again.points()[0].pass_at_1, 0.5);
}

}  // namespace
}  // namespace meshrl::web

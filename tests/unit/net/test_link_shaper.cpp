// The timing model of one link direction, driven with made-up clocks (no sockets, no sleeping).
//   build/tests/test_net --gtest_filter='LinkShaper*'
#include "net/link_shaper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace meshrl::net {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

TEST(LinkShaper, DelayOnlyAddsExactlyTheOneWayDelay) {
  DirectionShaper s(DirectionSpec{40, 0, 0}, 1);
  EXPECT_EQ(s.schedule(5 * kSec, 100), 5 * kSec + 40 * kMs);
  EXPECT_EQ(s.schedule(6 * kSec, 1 << 20), 6 * kSec + 40 * kMs);  // no cap: size does not matter
}

TEST(LinkShaper, EightMegabitsMoveOneMegabyteInOneSecondLessTheBurst) {
  // Everything read at t = 0, as from a sender that writes faster than the link.
  DirectionShaper s(DirectionSpec{0, 0, 8e6}, 1, 16384);
  int64_t last = 0;
  size_t left = 1'000'000;
  while (left > 0) {
    const size_t n = std::min<size_t>(left, 16384);
    last = s.schedule(0, n);
    left -= n;
  }
  // 1 MB at 1 MB/s, minus the 16 KiB the full bucket lets through at once.
  EXPECT_NEAR(static_cast<double>(last) / kSec, (1'000'000.0 - 16384) / 1e6, 1e-6);
}

TEST(LinkShaper, IdleTimeRefillsTheBucketOnlyUpToItsDepth) {
  DirectionShaper s(DirectionSpec{0, 0, 8e6}, 1, 16384);
  EXPECT_EQ(s.schedule(0, 16384), 0);             // the full bucket
  EXPECT_EQ(s.schedule(0, 1000), kMs);  // 1000 bytes at 1 byte/us: 1 ms
  // Ten idle seconds refill 16 KiB, not 10 MB: after those, 100 KB still takes its full 100 ms.
  const int64_t t = 10 * kSec;
  EXPECT_EQ(s.schedule(t, 16384), t);
  EXPECT_NEAR(static_cast<double>(s.schedule(t, 100'000) - t) / kMs, 100.0, 1e-3);
}

TEST(LinkShaper, JitterNeverReordersAndStaysWithinItsBounds) {
  const DirectionSpec spec{5, 20, 0};  // jitter wider than the delay: raw times would cross often
  DirectionShaper s(spec, 42);
  int64_t prev = INT64_MIN;
  int crossings_avoided = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t now = i * kMs / 10;  // a chunk every 0.1 ms
    const int64_t due = s.schedule(now, 100);
    ASSERT_GE(due, prev) << "chunk " << i << " would overtake chunk " << i - 1;
    ASSERT_GE(due, now);
    // Never later than the latest bound of any chunk so far (all of them read no later than now).
    ASSERT_LE(due, now + 25 * kMs);
    if (due == prev) ++crossings_avoided;
    prev = due;
  }
  EXPECT_GT(crossings_avoided, 100);  // the clamp did real work
}

TEST(LinkShaper, JitterIsSpreadAndSeeded) {
  auto delays = [](uint64_t seed) {
    DirectionShaper s(DirectionSpec{10, 4, 0}, seed);
    std::vector<int64_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.schedule(i * kSec, 10) - i * kSec);  // isolated messages
    return out;
  };
  const auto a = delays(7), b = delays(7), c = delays(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto [lo, hi] = std::minmax_element(a.begin(), a.end());
  EXPECT_GE(*lo, 6 * kMs);
  EXPECT_LT(*hi, 14 * kMs);
  EXPECT_LT(*lo, 7 * kMs);   // 200 uniform draws reach both ends of [6, 14) ms
  EXPECT_GT(*hi, 13 * kMs);
  EXPECT_GT(std::set<int64_t>(a.begin(), a.end()).size(), 150u);
}

TEST(LinkShaper, EndOfStreamKeepsItsPlaceBehindTheData) {
  DirectionShaper s(DirectionSpec{0, 0, 8e6}, 1, 1000);
  const int64_t data = s.schedule(0, 100'000);
  EXPECT_GT(data, 0);
  EXPECT_EQ(s.schedule(0, 0), data);  // the FIN takes no tokens but cannot overtake
}

}  // namespace
}  // namespace meshrl::net

// The link emulator over real loopback sockets: integrity, delay, bandwidth, back-pressure,
// partitions, shutdown and idle cost. Each test is bounded (receive timeouts of a few seconds);
// the whole file runs in a few seconds.
//   build/tests/test_net --gtest_filter='LinkEmulator*'
#include "net/link_emulator.h"

#include <gtest/gtest.h>

#include <time.h>

#include <algorithm>
#include <random>
#include <thread>

#include "core/check.h"
#include "support/loopback_peers.h"

namespace meshrl::net {
namespace {

using test_support::connect_loopback;
using test_support::recv_until_eof;
using test_support::recv_up_to;
using test_support::seconds_since;
using test_support::send_all;
using test_support::TestServer;
using Clock = std::chrono::steady_clock;

LinkSpec link_to(uint16_t upstream_port, DirectionSpec both = {}) {
  LinkSpec s;
  s.name = "paris";
  s.upstream = HostPort{"127.0.0.1", upstream_port};
  s.to_upstream = both;
  s.from_upstream = both;
  s.seed = 3;
  return s;
}

std::unique_ptr<LinkEmulator> start_one(const LinkSpec& spec) {
  auto e = LinkEmulator::start({spec});
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return std::move(e).value();
}

// Waits (bounded) until pred() holds; the proxy's thread updates stats asynchronously.
template <typename Pred>
bool eventually(Pred pred, double seconds = 3.0) {
  const auto t0 = Clock::now();
  while (!pred()) {
    if (seconds_since(t0) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// One byte there and back; seconds, or a negative number if the byte did not come back.
double ping(int fd) {
  const auto t0 = Clock::now();
  char b = 'p';
  if (!send_all(fd, &b, 1) || recv_up_to(fd, &b, 1) != 1 || b != 'p') return -1;
  return seconds_since(t0);
}

TEST(LinkEmulator, ForwardsOneMebibyteIntactAndInOrder) {
  TestServer echo(TestServer::Mode::kEcho);
  // Jitter wider than the delay, so a proxy that delivered chunks by their raw times would reorder.
  auto emu = start_one(link_to(echo.port(), DirectionSpec{1, 3, 0}));
  std::vector<char> payload(1 << 20);
  std::mt19937 rng(7);
  for (auto& c : payload) c = static_cast<char>(rng());

  const int fd = connect_loopback(emu->port("paris"));
  ASSERT_GE(fd, 0);
  // Send from a second thread: the echo comes back while we are still sending.
  std::thread sender([&] {
    for (size_t off = 0; off < payload.size(); off += 4096) send_all(fd, payload.data() + off, 4096);
    shutdown(fd, SHUT_WR);  // the FIN must cross too, or recv_until_eof times out
  });
  const auto back = recv_until_eof(fd);
  sender.join();
  close(fd);
  ASSERT_EQ(back.size(), payload.size());
  EXPECT_TRUE(back == payload) << "bytes changed or reordered";
  EXPECT_TRUE(eventually([&] { return emu->stats("paris").bytes_from_upstream == payload.size(); }));
  const LinkStats st = emu->stats("paris");
  EXPECT_EQ(st.bytes_to_upstream, payload.size());
  EXPECT_EQ(st.connections, 1u);
}

TEST(LinkEmulator, PingCrossesTheDelayBothWays) {
  TestServer echo(TestServer::Mode::kEcho);
  auto emu = start_one(link_to(echo.port(), DirectionSpec{40, 0, 0}));
  const int fd = connect_loopback(emu->port("paris"));
  ASSERT_GE(fd, 0);
  std::vector<double> rtts;
  for (int i = 0; i < 5; ++i) rtts.push_back(ping(fd));
  close(fd);
  std::sort(rtts.begin(), rtts.end());
  // The floor is exact (a monotonic clock, due times rounded up); the ceiling allows 120 ms of
  // scheduling delay on a shared 2-core machine for three threads to wake in turn.
  EXPECT_GE(rtts.front(), 0.080);
  EXPECT_LT(rtts.back(), 0.200);
  std::printf("[ measured ] RTT through a 40 ms one-way link: min %.1f ms, median %.1f ms, max %.1f ms\n", 1e3 * rtts.front(),
              1e3 * rtts[2], 1e3 * rtts.back());
}

// Sends an 8-byte length and `n` bytes to a sink behind the link and waits for its 1-byte answer.
double send_to_sink(uint16_t port, size_t n) {
  const int fd = connect_loopback(port, 10000);
  if (fd < 0) return -1;
  std::vector<char> data(n, 'x');
  const uint64_t len = n;
  const auto t0 = Clock::now();
  char ack = 0;
  const bool ok = send_all(fd, &len, sizeof len) && send_all(fd, data.data(), n) && recv_up_to(fd, &ack, 1) == 1 && ack == 'k';
  const double s = seconds_since(t0);
  close(fd);
  return ok ? s : -1;
}

TEST(LinkEmulator, EightMegabitCapMovesOneMegabyteInAboutOneSecond) {
  TestServer sink(TestServer::Mode::kSink);
  auto emu = start_one(link_to(sink.port(), DirectionSpec{0, 0, 8e6}));
  const double s = send_to_sink(emu->port("paris"), 1'000'000);
  // Ideal: 1 MB at 1 MB/s = 1.0 s, less the 16 KiB token-bucket burst (16 ms). The floor, 0.8 s,
  // catches a cap that leaks; the ceiling, 2.5 s, leaves room for a loaded shared machine where
  // the proxy thread may wait its turn for the CPU (each late wake-up only delays, never speeds).
  EXPECT_GE(s, 0.8);
  EXPECT_LE(s, 2.5);
  std::printf("[ measured ] 1 MB through an 8 Mbit/s cap: %.3f s (%.2f Mbit/s)\n", s, 8.0 / s);
}

TEST(LinkEmulator, BackPressureKeepsTheQueueUnderItsCap) {
  TestServer sink(TestServer::Mode::kSink);
  LinkSpec spec = link_to(sink.port(), DirectionSpec{0, 0, 40e6});
  spec.buffer_bytes = 64 * 1024;
  auto emu = start_one(spec);
  const size_t n = 2'000'000;  // 30x the cap: without back-pressure the queue would hold most of it
  const double s = send_to_sink(emu->port("paris"), n);
  ASSERT_GT(s, 0);
  const LinkStats st = emu->stats("paris");
  EXPECT_LE(st.peak_queued_bytes, spec.buffer_bytes);
  EXPECT_GT(st.peak_queued_bytes, spec.buffer_bytes / 2);  // the queue did fill: the cap was tested
  EXPECT_EQ(st.bytes_to_upstream, n + 8);
}

TEST(LinkEmulator, PartitionCutsAndRefusesThenHeals) {
  TestServer echo(TestServer::Mode::kEcho);
  auto emu = start_one(link_to(echo.port(), DirectionSpec{1, 0, 0}));
  const uint16_t port = emu->port("paris");

  const int before = connect_loopback(port, 2000);
  ASSERT_GT(ping(before), 0);

  emu->set_partitioned("paris", true);
  char b = 'x';
  // The open connection is cut: reset (or EOF) instead of an answer, long before the 2 s timeout.
  auto t0 = Clock::now();
  send_all(before, &b, 1);
  EXPECT_EQ(recv_up_to(before, &b, 1), 0u);
  EXPECT_LT(seconds_since(t0), 1.0);
  close(before);
  // A new connection is accepted by the kernel, then reset by the proxy.
  const int during = connect_loopback(port, 2000);
  if (during >= 0) {
    t0 = Clock::now();
    send_all(during, &b, 1);
    EXPECT_EQ(recv_up_to(during, &b, 1), 0u);
    EXPECT_LT(seconds_since(t0), 1.0);
    close(during);
  }
  LinkStats st = emu->stats("paris");
  EXPECT_TRUE(st.partitioned);
  EXPECT_EQ(st.connections_cut, 1u);
  EXPECT_TRUE(eventually([&] { return emu->stats("paris").connections_refused >= 1; }));

  emu->set_partitioned("paris", false);
  const int after = connect_loopback(port, 2000);
  EXPECT_GT(ping(after), 0);
  close(after);
  EXPECT_FALSE(emu->stats("paris").partitioned);
}

// End to end through the proxy's queues; LinkShaper.JitterNeverReorders* checks the due times.
TEST(LinkEmulator, JitterKeepsMessagesInOrder) {
  TestServer echo(TestServer::Mode::kEcho);
  auto emu = start_one(link_to(echo.port(), DirectionSpec{2, 10, 0}));
  const int fd = connect_loopback(emu->port("paris"));
  ASSERT_GE(fd, 0);
  constexpr uint32_t kN = 300;
  std::thread sender([&] {
    for (uint32_t i = 0; i < kN; ++i) {
      send_all(fd, &i, sizeof i);  // separate small writes, each with its own jittered due time
      if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    shutdown(fd, SHUT_WR);
  });
  const auto back = recv_until_eof(fd);
  sender.join();
  close(fd);
  ASSERT_EQ(back.size(), kN * sizeof(uint32_t));
  for (uint32_t i = 0; i < kN; ++i) {
    uint32_t v;
    std::memcpy(&v, back.data() + i * sizeof v, sizeof v);
    ASSERT_EQ(v, i) << "message " << i << " out of order";
  }
}

TEST(LinkEmulator, StopWithOpenConnectionsReturnsPromptly) {
  TestServer echo(TestServer::Mode::kEcho);
  auto emu = start_one(link_to(echo.port(), DirectionSpec{2000, 0, 0}));  // everything stays queued
  std::vector<int> fds;
  std::vector<char> data(100'000, 'q');
  for (int i = 0; i < 3; ++i) {
    fds.push_back(connect_loopback(emu->port("paris"), 3000));
    ASSERT_GE(fds.back(), 0);
    send_all(fds.back(), data.data(), data.size());
  }
  ASSERT_TRUE(eventually([&] { return emu->stats("paris").connections_open == 3; }));
  const auto t0 = Clock::now();
  emu->stop();
  const double s = seconds_since(t0);
  EXPECT_LT(s, 0.5);  // expected: a few ms; the queued 2-second-delayed bytes are dropped
  std::printf("[ measured ] stop() with 3 open connections and 300 KB queued: %.1f ms\n", 1e3 * s);
  for (int fd : fds) {
    char b;
    EXPECT_EQ(recv_up_to(fd, &b, 1), 0u);  // reset, not left hanging
    close(fd);
  }
  emu->stop();  // idempotent
}

TEST(LinkEmulator, IdleLinkUsesNoCpu) {
  TestServer echo(TestServer::Mode::kEcho);
  auto emu = start_one(link_to(echo.port(), DirectionSpec{5, 1, 8e6}));
  const int fd = connect_loopback(emu->port("paris"));
  ASSERT_GT(ping(fd), 0);  // an open, idle connection with a shaper that has run
  auto cpu_seconds = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  const double c0 = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = cpu_seconds() - c0;
  close(fd);
  // A busy-waiting loop would burn most of the 300 ms; a sleeping one uses next to nothing.
  EXPECT_LT(used, 0.03);
  std::printf("[ measured ] CPU over 300 ms idle with one open connection: %.2f ms\n", 1e3 * used);
}

TEST(LinkEmulator, UnreachableUpstreamResetsTheClient) {
  uint16_t dead_port;
  {
    TestServer gone(TestServer::Mode::kEcho);  // bound, then closed: nothing listens there now
    dead_port = gone.port();
  }
  auto emu = start_one(link_to(dead_port));
  const int fd = connect_loopback(emu->port("paris"), 2000);
  ASSERT_GE(fd, 0);
  char b = 'x';
  send_all(fd, &b, 1);
  EXPECT_EQ(recv_up_to(fd, &b, 1), 0u);
  close(fd);
  EXPECT_TRUE(eventually([&] { return emu->stats("paris").connections_refused == 1; }));
}

TEST(LinkEmulator, SeveralLinksAreIndependent) {
  TestServer echo(TestServer::Mode::kEcho);
  LinkSpec near = link_to(echo.port(), DirectionSpec{0.5, 0, 0});
  LinkSpec far = link_to(echo.port(), DirectionSpec{30, 0, 0});
  near.name = "paris";
  far.name = "toronto";
  auto e = LinkEmulator::start({near, far});
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  auto& emu = *e;
  EXPECT_EQ(emu->names(), (std::vector<std::string>{"paris", "toronto"}));
  EXPECT_NE(emu->port("paris"), emu->port("toronto"));
  emu->set_partitioned("toronto", true);
  const int fd = connect_loopback(emu->port("paris"));
  const double rtt = ping(fd);
  close(fd);
  EXPECT_GT(rtt, 0.001);
  EXPECT_LT(rtt, 0.060);  // the near link: neither toronto's 60 ms RTT nor its partition
  EXPECT_FALSE(emu->stats("paris").partitioned);
  EXPECT_TRUE(emu->stats("toronto").partitioned);
  EXPECT_THROW(emu->port("lyon"), CheckFailure);
}

TEST(LinkEmulator, StartRejectsDuplicateNamesAndTakenPorts) {
  TestServer echo(TestServer::Mode::kEcho);
  LinkSpec a = link_to(echo.port());
  auto dup = LinkEmulator::start({a, a});
  ASSERT_FALSE(dup.is_ok());
  EXPECT_NE(dup.status().message().find("two links are named 'paris'"), std::string::npos) << dup.status().message();

  auto first = start_one(a);
  LinkSpec b = a;
  b.name = "zurich";
  b.listen.port = first->port("paris");  // already taken
  auto taken = LinkEmulator::start({b});
  ASSERT_FALSE(taken.is_ok());
  EXPECT_NE(taken.status().message().find("[link zurich]"), std::string::npos) << taken.status().message();

}

}  // namespace
}  // namespace meshrl::net

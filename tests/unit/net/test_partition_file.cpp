// The partition control file (net/partition_file.h): its format, and that writing, fixing and
// deleting it cuts off and heals real links of a running emulator. Runs in well under a second.
//   build/tests/test_net --gtest_filter='Partition*'
#include "net/partition_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/file_io.h"
#include "support/loopback_peers.h"
#include "support/temp_dir.h"

namespace meshrl::net {
namespace {

using test_support::connect_loopback;
using test_support::recv_up_to;
using test_support::send_all;
using test_support::TestServer;

const std::vector<std::string> kLinks = {"paris", "zurich", "toronto"};

TEST(PartitionList, NamesCommentsAndBlanks) {
  auto r = parse_partition_list("# cut off for the test\n  toronto  \n\n\tparis # and paris\r\ntoronto\n", kLinks, "p.txt");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), (std::set<std::string>{"paris", "toronto"}));
  EXPECT_TRUE(parse_partition_list("", kLinks, "p.txt").value().empty());
  EXPECT_TRUE(parse_partition_list("# nothing\n\n", kLinks, "p.txt").value().empty());
  EXPECT_EQ(parse_partition_list("zurich", kLinks, "p.txt").value(), (std::set<std::string>{"zurich"}));  // no final newline
}

TEST(PartitionList, UnknownNameIsAnErrorNamingLineAndLinks) {
  auto r = parse_partition_list("paris\ntornto\n", kLinks, "p.txt");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "p.txt:2: no link named 'tornto'; links are paris, zurich, toronto");
  EXPECT_FALSE(parse_partition_list("paris zurich\n", kLinks, "p.txt").is_ok());  // one name per line
}

LinkSpec link(const std::string& name, uint16_t upstream) {
  LinkSpec s;
  s.name = name;
  s.upstream = HostPort{"127.0.0.1", upstream};
  return s;
}

// One byte through the link and back within 2 s.
bool link_up(LinkEmulator& emu, const std::string& name) {
  const int fd = connect_loopback(emu.port(name), 2000);
  if (fd < 0) return false;
  char b = 'p';
  const bool ok = send_all(fd, &b, 1) && recv_up_to(fd, &b, 1) == 1 && b == 'p';
  close(fd);
  return ok;
}

TEST(PartitionFile, WritingAndDeletingTheFileCutsOffAndHealsLinks) {
  TestServer echo(TestServer::Mode::kEcho);
  auto emu = LinkEmulator::start({link("paris", echo.port()), link("toronto", echo.port())}).value();
  test_support::TempDir dir;
  const auto path = dir.path() / "parts.txt";
  PartitionFile parts(path);

  // Absent: nothing partitioned, nothing changed.
  auto c = parts.apply(*emu);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c.value().empty());

  ASSERT_TRUE(write_file_atomic(path, std::string("toronto\n")).is_ok());
  c = parts.apply(*emu);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c.value(), (std::vector<std::pair<std::string, bool>>{{"toronto", true}}));
  EXPECT_TRUE(emu->stats("toronto").partitioned);
  EXPECT_FALSE(emu->stats("paris").partitioned);
  EXPECT_FALSE(link_up(*emu, "toronto"));
  EXPECT_TRUE(link_up(*emu, "paris"));
  EXPECT_TRUE(parts.apply(*emu).value().empty());  // unchanged file: no changes reported

  // A typo changes nothing: toronto stays cut off.
  ASSERT_TRUE(write_file_atomic(path, std::string("paris\ntornto\n")).is_ok());
  c = parts.apply(*emu);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("no link named 'tornto'"), std::string::npos);
  EXPECT_TRUE(emu->stats("toronto").partitioned);
  EXPECT_FALSE(emu->stats("paris").partitioned);

  // Swap: paris cut off, toronto healed, both reported.
  ASSERT_TRUE(write_file_atomic(path, std::string("paris\n")).is_ok());
  c = parts.apply(*emu);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c.value(), (std::vector<std::pair<std::string, bool>>{{"paris", true}, {"toronto", false}}));
  EXPECT_TRUE(link_up(*emu, "toronto"));
  EXPECT_FALSE(link_up(*emu, "paris"));

  // Deleted: every link healed.
  std::filesystem::remove(path);
  c = parts.apply(*emu);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c.value(), (std::vector<std::pair<std::string, bool>>{{"paris", false}}));
  EXPECT_TRUE(link_up(*emu, "paris"));
  EXPECT_TRUE(link_up(*emu, "toronto"));
}

}  // namespace
}  // namespace meshrl::net

// Switching partitions of a running link emulator from outside its process: a control file that
// names the links to cut off, one per line (`meshrl link-emulator --partitions FILE` rereads it
// every 100 ms). Tests and operators write it to partition a city and truncate or delete it to heal:
//
//   echo toronto > parts.txt     # toronto drops off the WAN (its connections are reset)
//   : > parts.txt                # healed: every link up again
//
// Format: one link name per line; leading/trailing blanks, empty lines and '#' comments are
// ignored. An absent file partitions nothing. A name that is not a link of the emulator makes the
// whole file an error and changes nothing (a typo must not quietly heal a partition). Write the
// file atomically (temp + rename) so the emulator never reads half of it.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "net/link_emulator.h"

namespace meshrl::net {

// The names listed in `text`; every one must be in `links`. Errors name `source` and the line:
// "parts.txt:2: no link named 'tornto'; links are paris, toronto".
Result<std::set<std::string>> parse_partition_list(const std::string& text, const std::vector<std::string>& links,
                                                   const std::string& source);

class PartitionFile {
 public:
  explicit PartitionFile(std::filesystem::path path) : path_(std::move(path)) {}

  // Reads the file and makes the emulator match it: the links it names partitioned, the others it
  // partitioned before healed (links start healed). Returns the links whose state this call
  // changed, in the emulator's order, as (name, partitioned now). On an unreadable or invalid
  // file changes nothing and returns the error.
  Result<std::vector<std::pair<std::string, bool>>> apply(LinkEmulator& emulator);

  const std::set<std::string>& partitioned() const { return current_; }

 private:
  std::filesystem::path path_;
  std::set<std::string> current_;
};

}  // namespace meshrl::net

// The partition control file. See partition_file.h.
#include "net/partition_file.h"

#include <algorithm>
#include <system_error>

#include "core/file_io.h"

namespace meshrl::net {

Result<std::set<std::string>> parse_partition_list(const std::string& text, const std::vector<std::string>& links,
                                                   const std::string& source) {
  std::set<std::string> out;
  size_t line_no = 0, from = 0;
  while (from <= text.size()) {
    size_t end = text.find('\n', from);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(from, end - from);
    from = end + 1;
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const std::string name = line.substr(b, e - b + 1);
    if (std::find(links.begin(), links.end(), name) == links.end()) {
      std::string known;
      for (const auto& l : links) known += (known.empty() ? "" : ", ") + l;
      std::string shown = name.size() > 40 ? name.substr(0, 37) + "..." : name;
      return invalid_argument(source + ":" + std::to_string(line_no) + ": no link named '" + shown + "'; links are " + known);
    }
    out.insert(name);
  }
  return out;
}

Result<std::vector<std::pair<std::string, bool>>> PartitionFile::apply(LinkEmulator& emulator) {
  std::string text;
  std::error_code ec;
  if (std::filesystem::exists(path_, ec)) {
    auto r = read_file(path_, 1 << 20);
    // Deleted between the two calls: the same as absent.
    if (!r.is_ok() && std::filesystem::exists(path_, ec)) return r.status();
    if (r.is_ok()) text = std::move(r).value();
  }
  const std::vector<std::string> names = emulator.names();
  MESHRL_ASSIGN_OR_RETURN(std::set<std::string> want, parse_partition_list(text, names, path_.filename().string()));
  std::vector<std::pair<std::string, bool>> changed;
  for (const std::string& n : names) {
    const bool on = want.count(n) > 0;
    if (on == (current_.count(n) > 0)) continue;
    emulator.set_partitioned(n, on);
    changed.emplace_back(n, on);
  }
  current_ = std::move(want);
  return changed;
}

}  // namespace meshrl::net

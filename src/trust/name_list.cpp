#include "trust/name_list.h"

#include <sstream>

#include "core/file_io.h"

namespace meshrl::trust {

namespace fs = std::filesystem;

namespace {

std::set<std::string> parse_names(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const auto e = line.find_last_not_of(" \t\r");
    out.insert(line.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

void NameListFile::reload_if_changed() const {
  std::error_code ec;
  const auto t = fs::last_write_time(file_, ec);
  if (ec) {  // missing: empty
    names_.clear();
    size_ = UINTMAX_MAX;
    return;
  }
  const uintmax_t n = fs::file_size(file_, ec);
  if (!ec && t == mtime_ && n == size_) return;
  auto text = read_file(file_, 16 << 20);
  // An unreadable list keeps the last good one rather than admitting or refusing everyone.
  if (!text.is_ok()) return;
  names_ = parse_names(text.value());
  mtime_ = t;
  size_ = n;
}

bool NameListFile::contains(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  reload_if_changed();
  return names_.count(name) > 0;
}

Status add_to_name_list(const fs::path& file, const std::string& name) {
  std::string text;
  if (fs::exists(file)) {
    MESHRL_ASSIGN_OR_RETURN(text, read_file(file, 16 << 20));
    if (parse_names(text).count(name)) return Status::ok();
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += name + "\n";
  return write_file_atomic(file, text);
}

std::string AccessPolicy::refusal(const std::string& name) const {
  if (revoked_.contains(name)) return "node '" + name + "' is revoked (" + revoked_.file().string() + ")";
  if (!allowed_.contains(name)) return "node '" + name + "' is not on the run's allow-list (" + allowed_.file().string() + ")";
  return {};
}

}  // namespace meshrl::trust

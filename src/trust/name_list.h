// A list of node names in a text file (one a line, '#' starts a comment), reread whenever the
// file changes, so `meshrl ca revoke` takes effect on a running coordinator at its next call.
// AccessPolicy combines the allow-list and the revocation list of a run CA (run_ca.h).
// Thread-safe. Knows nothing about certificates or gRPC.
#pragma once

#include <filesystem>
#include <mutex>
#include <set>
#include <string>

#include "core/status.h"

namespace meshrl::trust {

class NameListFile {
 public:
  explicit NameListFile(std::filesystem::path file) : file_(std::move(file)) {}
  // A missing file is an empty list.
  bool contains(const std::string& name) const;
  const std::filesystem::path& file() const { return file_; }

 private:
  void reload_if_changed() const;  // under mu_
  std::filesystem::path file_;
  mutable std::mutex mu_;
  mutable std::set<std::string> names_;
  mutable std::filesystem::file_time_type mtime_{};
  mutable uintmax_t size_ = UINTMAX_MAX;
};

// Appends `name` unless already listed (atomic rewrite of the whole file).
Status add_to_name_list(const std::filesystem::path& file, const std::string& name);

class AccessPolicy {
 public:
  AccessPolicy(std::filesystem::path allowed, std::filesystem::path revoked) : allowed_(std::move(allowed)), revoked_(std::move(revoked)) {}
  // Empty when `name` may take part; else why not (for the refusal sent to the peer).
  std::string refusal(const std::string& name) const;

 private:
  NameListFile allowed_, revoked_;
};

}  // namespace meshrl::trust

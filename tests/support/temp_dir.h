// TempDir: a fresh directory under the system temp dir for one test (mkdtemp, so parallel test
// processes never share one), removed with everything in it when the object goes away.
// write() puts a small file in it and returns the file's path.
//   #include "support/temp_dir.h"
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace meshrl::test_support {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "meshrl-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `text` to path() / name (executable: owner may run it); returns that path.
  std::string write(const std::string& name, const std::string& text, bool executable = false) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    if (executable)
      std::filesystem::permissions(p, std::filesystem::perms::owner_all, std::filesystem::perm_options::add);
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace meshrl::test_support

// Helpers shared by the tasks unit tests: a scratch directory and file writing.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "tasks/task.h"

namespace meshrl::tasks::testing {

// A fresh directory under the system temp dir, removed when the object goes away.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("meshrl_tasks_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
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

inline std::string data_path(const std::string& name) { return std::string(MESHRL_TEST_DATA) + "/tasks/" + name; }

}  // namespace meshrl::tasks::testing

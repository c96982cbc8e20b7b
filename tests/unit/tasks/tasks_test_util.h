// Where the tasks unit tests' data files are (tests/data/tasks/). A scratch directory is
// support/temp_dir.h's TempDir.
#pragma once

#include <string>

namespace meshrl::tasks::testing {

inline std::string data_path(const std::string& name) { return std::string(MESHRL_TEST_DATA) + "/tasks/" + name; }

}  // namespace meshrl::tasks::testing

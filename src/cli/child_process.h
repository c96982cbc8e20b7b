// Child processes of `meshrl demo` (and the integration tests' launcher): start this same binary
// (/proc/self/exe) with arguments, its stdout and stderr appended to a log file, and wait for or
// kill it by pid. POSIX only. Knows nothing about what the children do.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace meshrl::cli {

struct Child {
  pid_t pid = -1;
  std::string name;
};

// argv[0] is replaced by this executable. env entries "KEY=VALUE" are added to ours.
Result<Child> spawn_self(const std::string& name, const std::vector<std::string>& args, const std::filesystem::path& log,
                         const std::vector<std::string>& env = {});

// Non-blocking: the exit status (code, or 128 + signal) once the child has ended, else nullopt.
std::optional<int> poll_child(Child& c);
// Sends sig to the child (not its group, nothing else).
void signal_child(const Child& c, int sig);

}  // namespace meshrl::cli

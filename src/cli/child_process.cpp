// Spawning this binary as a child. See child_process.h.
#include "cli/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace meshrl::cli {

Result<Child> spawn_self(const std::string& name, const std::vector<std::string>& args, const std::filesystem::path& log,
                         const std::vector<std::string>& env) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return io_error("[spawn] cannot read /proc/self/exe: " + std::string(std::strerror(errno)));
  exe[n] = 0;
  std::vector<std::string> argv_s{exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string log_s = log.string();
  posix_spawn_file_actions_addopen(&fa, 1, log_s.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  Child c;
  c.name = name;
  const int rc = posix_spawn(&c.pid, exe, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return io_error("[spawn] " + name + ": " + std::strerror(rc));
  return c;
}

std::optional<int> poll_child(Child& c) {
  if (c.pid <= 0) return -1;
  int st = 0;
  const pid_t r = waitpid(c.pid, &st, WNOHANG);
  if (r == 0) return std::nullopt;
  c.pid = -1;
  if (r < 0) return -1;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

void signal_child(const Child& c, int sig) {
  if (c.pid > 0) kill(c.pid, sig);
}

}  // namespace meshrl::cli

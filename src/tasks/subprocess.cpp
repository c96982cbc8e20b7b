// Spawning and supervising one child process. See subprocess.h.
#include "tasks/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace meshrl::tasks {
namespace {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int e) { return std::strerror(e); }

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Kills the child's process group (and the child itself, should the group be gone) and reaps it.
void kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
}

// Reads what is available now; returns false at EOF or on a hard error (the fd is then done).
bool read_available(int fd, std::string* sink, size_t keep_at_most, bool* over) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      const size_t room = keep_at_most > sink->size() ? keep_at_most - sink->size() : 0;
      sink->append(buf, std::min(room, size_t(n)));
      if (size_t(n) > room) *over = true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

}  // namespace

Result<SubprocessResult> run_subprocess(const std::vector<std::string>& argv, std::string_view input, const SubprocessOptions& opt) {
  if (argv.empty() || argv[0].empty()) return invalid_argument("[subprocess] empty argv");
  const std::string who = "'" + argv[0] + "'";

  int sv[2], outp[2], errp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return io_error("[subprocess] socketpair: " + errno_text(errno));
  Fd in_parent(sv[0]), in_child(sv[1]);
  if (::pipe2(outp, O_CLOEXEC) != 0) return io_error("[subprocess] pipe: " + errno_text(errno));
  Fd out_read(outp[0]), out_write(outp[1]);
  if (::pipe2(errp, O_CLOEXEC) != 0) return io_error("[subprocess] pipe: " + errno_text(errno));
  Fd err_read(errp[0]), err_write(errp[1]);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_child.get(), 0);  // dup2 clears close-on-exec on 0, 1, 2
  posix_spawn_file_actions_adddup2(&fa, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, err_write.get(), 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // also drop descriptors others opened without O_CLOEXEC
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, s);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);  // we may ignore SIGPIPE; the verifier should not
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);  // own process group, so a timeout kills its children too
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return io_error("[subprocess] cannot start " + who + ": " + errno_text(rc));

  in_child.reset();
  out_write.reset();
  err_write.reset();
  set_nonblocking(in_parent.get());
  set_nonblocking(out_read.get());
  set_nonblocking(err_read.get());
  if (input.empty()) in_parent.reset();

  SubprocessResult res;
  const auto deadline = Clock::now() + std::chrono::milliseconds(opt.timeout_ms);
  size_t written = 0;
  bool out_over = false, err_over = false;
  int wstatus = 0;
  for (;;) {
    // WNOWAIT: notice the exit but leave the zombie in place, so its process-group id cannot be
    // reused by an unrelated process before we kill the group below.
    siginfo_t info;
    info.si_pid = 0;
    if (::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      // What it wrote is already in the pipes (a full pipe would have blocked its exit).
      if (out_read.open()) read_available(out_read.get(), &res.out, size_t(opt.max_output_bytes), &out_over);
      if (err_read.open()) read_available(err_read.get(), &res.err, opt.max_stderr_bytes, &err_over);
      ::kill(-pid, SIGKILL);  // grandchildren left in its group must not outlive the call
      while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      kill_and_reap(pid);
      res.timed_out = true;
      return res;
    }
    pollfd fds[3];
    int n = 0;
    int i_out = -1, i_err = -1, i_in = -1;
    if (out_read.open()) fds[i_out = n++] = {out_read.get(), POLLIN, 0};
    if (err_read.open()) fds[i_err = n++] = {err_read.get(), POLLIN, 0};
    if (in_parent.open()) fds[i_in = n++] = {in_parent.get(), POLLOUT, 0};
    // Short ticks once the pipes are closed: then only the exit is left to notice.
    const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    const int tick = int(std::min<int64_t>(left_ms, (out_read.open() || err_read.open()) ? 20 : 2));
    const int pr = ::poll(fds, n, tick);
    if (pr < 0 && errno != EINTR) {
      const int e = errno;
      kill_and_reap(pid);
      return io_error("[subprocess] poll: " + errno_text(e));
    }
    if (pr <= 0) continue;
    if (i_out >= 0 && fds[i_out].revents) {
      if (!read_available(out_read.get(), &res.out, size_t(opt.max_output_bytes), &out_over)) out_read.reset();
      if (out_over) {
        kill_and_reap(pid);
        res.output_over = true;
        return res;
      }
    }
    if (i_err >= 0 && fds[i_err].revents) {
      if (!read_available(err_read.get(), &res.err, opt.max_stderr_bytes, &err_over)) err_read.reset();
    }
    if (i_in >= 0 && fds[i_in].revents) {
      const ssize_t k = ::send(in_parent.get(), input.data() + written, input.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) written += size_t(k);
      // Done, or the child closed its stdin without reading everything: that is its choice.
      if (written == input.size() || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) in_parent.reset();
    }
  }
  res.output_over = out_over;
  if (WIFEXITED(wstatus)) res.exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) res.term_signal = WTERMSIG(wstatus);
  return res;
}

}  // namespace meshrl::tasks

#include "net/link_proxy.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <system_error>
#include <vector>

namespace meshrl::net {

namespace {

constexpr size_t kReadChunk = 16 * 1024;  // one read; small enough that pacing stays smooth
constexpr int kReadsPerWake = 8;          // bounded so one busy connection cannot starve the rest
constexpr int64_t kAcceptPauseNs = 100'000'000;  // after EMFILE & co., so the loop does not spin

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  return z ^ (z >> 31);
}

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

// A run of bytes read at one moment, due at one moment. Empty bytes = the sender's end of stream.
struct Chunk {
  int64_t due_ns;
  std::vector<char> bytes;
  size_t sent = 0;
};

// One direction of one connection: source socket -> timed queue -> sink socket.
struct Direction {
  Direction(const DirectionSpec& spec, uint64_t seed) : shaper(spec, seed) {}
  DirectionShaper shaper;
  std::deque<Chunk> queue;
  size_t queued = 0;          // bytes in the queue not yet sent
  bool source_done = false;   // the source sent FIN; nothing more to read
  bool sink_done = false;     // FIN forwarded to the sink
  bool sink_blocked = false;  // the sink's buffer was full: wait for POLLOUT
};

struct Connection {
  Connection(int client, int upstream, const LinkSpec& spec, uint64_t index)
      : client_fd(client), upstream_fd(upstream),
        up(spec.to_upstream, mix_seed(spec.seed, 2 * index)),
        down(spec.from_upstream, mix_seed(spec.seed, 2 * index + 1)) {}
  int client_fd;
  int upstream_fd;
  bool connecting = true;  // the upstream connect is in flight
  bool dead = false;       // an error on either side: reset both
  Direction up;            // client -> upstream
  Direction down;          // upstream -> client
  bool finished() const { return up.sink_done && down.sink_done; }
};

}  // namespace

struct LinkProxy::Loop {
  LinkProxy& link;
  std::vector<std::unique_ptr<Connection>> conns;
  uint64_t n_accepted = 0;
  int64_t accept_paused_until = 0;

  size_t cap() const { return std::max<size_t>(link.spec_.buffer_bytes, 1); }

  void close_connection(Connection& c, bool reset) {
    if (reset) {
      close_with_reset(c.client_fd);
      close_with_reset(c.upstream_fd);
    } else {
      close(c.client_fd);
      close(c.upstream_fd);
    }
    c.client_fd = c.upstream_fd = -1;
  }

  void cut_all() {
    link.connections_cut_ += conns.size();  // counted first: a peer may look as soon as it sees the reset
    for (auto& c : conns) close_connection(*c, /*reset=*/true);
    conns.clear();
  }

  void reap() {
    auto gone = std::remove_if(conns.begin(), conns.end(), [&](std::unique_ptr<Connection>& c) {
      if (!c->dead && !c->finished()) return false;
      close_connection(*c, /*reset=*/c->dead);
      return true;
    });
    conns.erase(gone, conns.end());
    link.connections_open_ = conns.size();
  }

  void accept_all(int64_t now) {
    for (;;) {
      const int fd = accept(link.listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) accept_paused_until = now + kAcceptPauseNs;
        return;  // EAGAIN: drained
      }
      ++link.connections_;
      if (link.partitioned_ || conns.size() >= link.spec_.max_connections) {
        ++link.connections_refused_;
        close_with_reset(fd);
        continue;
      }
      prepare_stream_socket(fd);
      auto upstream = connect_tcp_nonblocking(link.upstream_addr_);
      if (!upstream.is_ok()) {
        ++link.connections_refused_;
        close_with_reset(fd);
        continue;
      }
      conns.push_back(std::make_unique<Connection>(fd, upstream.value(), link.spec_, n_accepted++));
    }
    link.connections_open_ = conns.size();
  }

  // Reads what the source has (up to the queue cap) and stamps each chunk with its due time.
  void read_into(Connection& c, Direction& d, int fd, int64_t now) {
    for (int i = 0; i < kReadsPerWake && !d.source_done && d.queued < cap(); ++i) {
      std::vector<char> buf(std::min(kReadChunk, cap() - d.queued));
      const long n = recv(fd, buf.data(), buf.size(), 0);
      if (n < 0) {
        if (!would_block(errno)) c.dead = true;
        return;
      }
      buf.resize(static_cast<size_t>(n));
      const int64_t due = d.shaper.schedule(now, buf.size());
      if (n == 0) d.source_done = true;
      d.queued += buf.size();
      d.queue.push_back(Chunk{due, std::move(buf)});
      uint64_t peak = link.peak_queued_bytes_.load();
      while (d.queued > peak && !link.peak_queued_bytes_.compare_exchange_weak(peak, d.queued)) {}
      if (n == 0 || static_cast<size_t>(n) < kReadChunk) return;  // probably drained; poll again
    }
  }

  // Sends every chunk that is due, until the sink's buffer is full.
  void pump(Connection& c, Direction& d, int fd, std::atomic<uint64_t>& delivered, int64_t now) {
    while (!c.dead && !d.queue.empty() && !d.sink_blocked && d.queue.front().due_ns <= now) {
      Chunk& ch = d.queue.front();
      if (ch.bytes.empty()) {
        shutdown(fd, SHUT_WR);  // forward the FIN; nothing can follow it
        d.sink_done = true;
        d.queue.pop_front();
        continue;
      }
      const long n = send_no_signal(fd, ch.bytes.data() + ch.sent, ch.bytes.size() - ch.sent);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) d.sink_blocked = true;
        else c.dead = true;
        return;
      }
      ch.sent += static_cast<size_t>(n);
      d.queued -= static_cast<size_t>(n);
      delivered += static_cast<uint64_t>(n);
      if (ch.sent == ch.bytes.size()) d.queue.pop_front();
    }
  }

  void pump_all(int64_t now) {
    for (auto& c : conns) {
      if (!c->connecting) pump(*c, c->up, c->upstream_fd, link.bytes_to_upstream_, now);
      pump(*c, c->down, c->client_fd, link.bytes_from_upstream_, now);
    }
  }

  // The next moment a queued chunk falls due (only chunks that can be sent then), or -1.
  int poll_timeout_ms(int64_t now) const {
    int64_t next = INT64_MAX;
    auto consider = [&](const Direction& d, bool sink_ready) {
      if (sink_ready && !d.sink_blocked && !d.queue.empty()) next = std::min(next, d.queue.front().due_ns);
    };
    for (const auto& c : conns) {
      consider(c->up, !c->connecting);
      consider(c->down, true);
    }
    if (accept_paused_until > now) next = std::min(next, accept_paused_until);
    if (next == INT64_MAX) return -1;
    // Round up: waking a little late is harmless, waking early would deliver before the delay.
    const int64_t ms = (std::max<int64_t>(next - now, 0) + 999'999) / 1'000'000;
    return static_cast<int>(std::min<int64_t>(ms, 60'000));
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      if (link.stop_) break;
      if (link.partitioned_ && !conns.empty()) cut_all();
      const int64_t now = now_ns();
      pump_all(now);
      reap();

      fds.clear();
      fds.push_back({link.wake_read_fd_, POLLIN, 0});
      fds.push_back({now >= accept_paused_until ? link.listen_fd_ : -1, POLLIN, 0});
      for (const auto& c : conns) {
        short client_events = 0, upstream_events = 0;
        if (!c->up.source_done && c->up.queued < cap()) client_events |= POLLIN;
        if (c->down.sink_blocked) client_events |= POLLOUT;
        if (c->connecting) {
          upstream_events = POLLOUT;
        } else {
          if (!c->down.source_done && c->down.queued < cap()) upstream_events |= POLLIN;
          if (c->up.sink_blocked) upstream_events |= POLLOUT;
        }
        // An fd with no interest is left out: poll reports POLLHUP regardless, and a hung-up socket
        // we are not reading from (queue full) would otherwise wake us in a tight loop.
        fds.push_back({client_events ? c->client_fd : -1, client_events, 0});
        fds.push_back({upstream_events ? c->upstream_fd : -1, upstream_events, 0});
      }
      const int timeout = poll_timeout_ms(now);
      const int rc = poll(fds.data(), fds.size(), timeout);
      if (rc < 0) {
        if (errno == EINTR) continue;
        break;  // EFAULT/EINVAL/ENOMEM: nothing sensible left to do; stop() still joins
      }
      if (rc == 0) continue;
      const int64_t t = now_ns();
      if (fds[0].revents) {
        char drain[64];
        while (read(link.wake_read_fd_, drain, sizeof drain) > 0) {}
      }
      // Connections accepted below have no pollfd yet; only the first n_polled are walked.
      const size_t n_polled = conns.size();
      if (fds[1].fd >= 0 && fds[1].revents) accept_all(t);
      for (size_t i = 0; i < n_polled; ++i) {
        Connection& c = *conns[i];
        const short cr = fds[2 + 2 * i].fd >= 0 ? fds[2 + 2 * i].revents : 0;
        const short ur = fds[3 + 2 * i].fd >= 0 ? fds[3 + 2 * i].revents : 0;
        if (c.connecting && ur) {
          if (connect_result(c.upstream_fd) != 0) {
            c.dead = true;  // upstream unreachable: the client sees a reset
            ++link.connections_refused_;
            continue;
          }
          c.connecting = false;
        } else if (ur) {
          if (ur & (POLLOUT | POLLERR | POLLHUP)) c.up.sink_blocked = false;  // the next send tells
          if (fds[3 + 2 * i].events & POLLIN && ur & (POLLIN | POLLERR | POLLHUP)) read_into(c, c.down, c.upstream_fd, t);
        }
        if (cr) {
          if (cr & (POLLOUT | POLLERR | POLLHUP)) c.down.sink_blocked = false;
          if (fds[2 + 2 * i].events & POLLIN && cr & (POLLIN | POLLERR | POLLHUP)) read_into(c, c.up, c.client_fd, t);
        }
      }
    }
    for (auto& c : conns) close_connection(*c, /*reset=*/true);
    conns.clear();
    link.connections_open_ = 0;
  }
};

Result<std::unique_ptr<LinkProxy>> LinkProxy::start(const LinkSpec& spec) {
  const std::string where = "[link " + spec.name + "]";
  std::unique_ptr<LinkProxy> p(new LinkProxy(spec));
  auto upstream = resolve_tcp(spec.upstream);
  if (!upstream.is_ok()) return Status(upstream.status().code(), where + " upstream: " + upstream.status().message());
  p->upstream_addr_ = upstream.value();
  auto fd = listen_tcp(spec.listen, 128);
  if (!fd.is_ok()) return Status(fd.status().code(), where + " " + fd.status().message());
  p->listen_fd_ = fd.value();
  auto port = bound_port(p->listen_fd_);
  if (!port.is_ok()) return Status(port.status().code(), where + " " + port.status().message());
  p->port_ = port.value();
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return io_error(where + " pipe: " + std::strerror(errno));
  p->wake_read_fd_ = pipe_fds[0];
  p->wake_write_fd_ = pipe_fds[1];
  for (int f : pipe_fds) {
    fcntl(f, F_SETFL, fcntl(f, F_GETFL, 0) | O_NONBLOCK);
    fcntl(f, F_SETFD, fcntl(f, F_GETFD, 0) | FD_CLOEXEC);
  }
  try {
    p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  } catch (const std::system_error& e) {
    return io_error(where + " cannot start its thread: " + e.what());
  }
  return p;
}

LinkProxy::~LinkProxy() {
  stop();
  for (int* fd : {&listen_fd_, &wake_read_fd_, &wake_write_fd_})
    if (*fd >= 0) close(*fd), *fd = -1;
}

void LinkProxy::run() {
  Loop loop{*this, {}};
  loop.run();
}

void LinkProxy::wake() {
  const char b = 1;
  [[maybe_unused]] const auto n = write(wake_write_fd_, &b, 1);  // a full pipe already means "wake up"
}

void LinkProxy::set_partitioned(bool on) {
  partitioned_ = on;
  wake();
}

void LinkProxy::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  wake();
  thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_), listen_fd_ = -1;
}

LinkStats LinkProxy::stats() const {
  LinkStats s;
  s.bytes_to_upstream = bytes_to_upstream_;
  s.bytes_from_upstream = bytes_from_upstream_;
  s.connections = connections_;
  s.connections_open = connections_open_;
  s.connections_refused = connections_refused_;
  s.connections_cut = connections_cut_;
  s.peak_queued_bytes = peak_queued_bytes_;
  s.partitioned = partitioned_;
  return s;
}

}  // namespace meshrl::net

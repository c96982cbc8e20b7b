// Plain TCP peers on 127.0.0.1 for tests of anything that listens or proxies (the link emulator,
// the HTTP server): an upstream server that echoes or swallows bytes, and blocking client helpers
// with receive timeouts so a broken peer fails a test instead of hanging it.
//   #include "support/loopback_peers.h"
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace meshrl::test_support {

inline int connect_loopback(uint16_t port, int recv_timeout_ms = 5000) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{recv_timeout_ms / 1000, (recv_timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

inline bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const long k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Reads up to n bytes; stops early at EOF, a reset or the receive timeout. Returns the count.
inline size_t recv_up_to(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    const long k = recv(fd, p + got, n - got, 0);
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  return got;
}

// Reads until EOF, a reset or the timeout.
inline std::vector<char> recv_until_eof(int fd) {
  std::vector<char> out;
  char buf[65536];
  for (;;) {
    const long k = recv(fd, buf, sizeof buf, 0);
    if (k <= 0) break;
    out.insert(out.end(), buf, buf + k);
  }
  return out;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// An upstream on 127.0.0.1:ephemeral. kEcho sends every byte back and closes after the client's
// EOF. kSink reads an 8-byte little-endian length L, then L bytes, then answers one byte 'k'.
class TestServer {
 public:
  enum class Mode { kEcho, kSink };

  explicit TestServer(Mode mode) : mode_(mode) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listen_fd_, 64);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (pipe(stop_pipe_) != 0) stop_pipe_[0] = stop_pipe_[1] = -1;
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~TestServer() {
    const char b = 1;
    [[maybe_unused]] auto n = write(stop_pipe_[1], &b, 1);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : conn_fds_) shutdown(fd, SHUT_RDWR);  // unblocks the connection threads
    }
    for (auto& t : workers_) t.join();
    for (int fd : conn_fds_) close(fd);
    close(listen_fd_);
    close(stop_pipe_[0]);
    close(stop_pipe_[1]);
  }

  uint16_t port() const { return port_; }
  int connections() const { return n_connections_; }

 private:
  void accept_loop() {
    for (;;) {
      pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
      if (poll(p, 2, -1) < 0) continue;
      if (p[1].revents) return;
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ++n_connections_;
      std::lock_guard<std::mutex> lock(mu_);
      conn_fds_.push_back(fd);
      workers_.emplace_back([this, fd] { mode_ == Mode::kEcho ? echo(fd) : sink(fd); });
    }
  }

  static void echo(int fd) {
    char buf[65536];
    for (;;) {
      const long k = recv(fd, buf, sizeof buf, 0);
      if (k <= 0 || !send_all(fd, buf, static_cast<size_t>(k))) break;
    }
    shutdown(fd, SHUT_WR);
  }

  static void sink(int fd) {
    uint64_t want = 0;
    if (recv_up_to(fd, &want, sizeof want) != sizeof want) return;
    std::vector<char> buf(65536);
    uint64_t got = 0;
    while (got < want) {
      const long k = recv(fd, buf.data(), std::min<uint64_t>(buf.size(), want - got), 0);
      if (k <= 0) return;
      got += static_cast<uint64_t>(k);
    }
    send_all(fd, "k", 1);
  }

  Mode mode_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<int> n_connections_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> workers_;
};

}  // namespace meshrl::test_support

#include "net/sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace meshrl::net {

namespace {
std::string errno_text(int e) { return std::strerror(e); }

void set_flags(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  fcntl(fd, F_SETFD, fcntl(fd, F_GETFD, 0) | FD_CLOEXEC);
}
}  // namespace

Result<HostPort> parse_host_port(const std::string& text, bool allow_zero) {
  const std::string where = "[net] address '" + text + "'";
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return invalid_argument(where + " must be HOST:PORT, e.g. 127.0.0.1:50051");
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) return invalid_argument(where + ": an IPv6 host is written [addr]:PORT");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return invalid_argument(where + ": write an IPv6 host in brackets, [addr]:PORT");
  }
  const std::string port_text = text.substr(colon + 1);
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument(where + ": port '" + port_text + "' is not a number in 0..65535");
  const long port = std::stol(port_text);
  if (port > 65535 || (port == 0 && !allow_zero))
    return invalid_argument(where + ": port " + port_text + " is out of range " + (allow_zero ? "0" : "1") + "..65535");
  return HostPort{host, static_cast<uint16_t>(port)};
}

Result<SocketAddress> resolve_tcp(const HostPort& where) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(where.port);
  const int rc = getaddrinfo(where.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || !found)
    return not_found("[net] cannot resolve '" + where.host + "': " + (rc != 0 ? gai_strerror(rc) : "no address"));
  SocketAddress a;
  std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
  a.length = found->ai_addrlen;
  freeaddrinfo(found);
  return a;
}

Result<int> listen_tcp(const HostPort& where, int backlog) {
  const std::string what = "[net] listen on " + where.host + ":" + std::to_string(where.port);
  auto addr = resolve_tcp(where);
  if (!addr.is_ok()) return Status(addr.status().code(), what + ": " + addr.status().message());
  const int fd = socket(addr->storage.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return io_error(what + ": socket: " + errno_text(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart at once on the same port
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr->storage), addr->length) != 0 || listen(fd, backlog) != 0) {
    const int e = errno;
    close(fd);
    return io_error(what + ": " + errno_text(e) + (e == EADDRINUSE ? " (another process holds the port; pick another or 0)" : ""));
  }
  set_flags(fd);
  return fd;
}

Result<uint16_t> bound_port(int fd) {
  sockaddr_storage s{};
  socklen_t n = sizeof s;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&s), &n) != 0) return io_error("[net] getsockname: " + errno_text(errno));
  if (s.ss_family == AF_INET) return static_cast<uint16_t>(ntohs(reinterpret_cast<sockaddr_in*>(&s)->sin_port));
  if (s.ss_family == AF_INET6) return static_cast<uint16_t>(ntohs(reinterpret_cast<sockaddr_in6*>(&s)->sin6_port));
  return io_error("[net] getsockname: not an IP socket");
}

Result<int> connect_tcp_nonblocking(const SocketAddress& to) {
  const int fd = socket(to.storage.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return io_error("[net] socket: " + errno_text(errno));
  prepare_stream_socket(fd);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to.storage), to.length) != 0 && errno != EINPROGRESS) {
    const int e = errno;
    close(fd);
    return io_error("[net] connect: " + errno_text(e));
  }
  return fd;
}

int connect_result(int fd) {
  int err = 0;
  socklen_t n = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) != 0) return errno;
  return err;
}

void prepare_stream_socket(int fd) {
  set_flags(fd);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
  setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
}

void close_with_reset(int fd) {
  if (fd < 0) return;
  linger l{};
  l.l_onoff = 1;
  l.l_linger = 0;  // discard unsent data and send RST
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

long send_no_signal(int fd, const void* data, size_t n) {
#ifdef MSG_NOSIGNAL
  return send(fd, data, n, MSG_NOSIGNAL);
#else
  return send(fd, data, n, 0);  // SO_NOSIGPIPE (prepare_stream_socket) covers it
#endif
}

}  // namespace meshrl::net

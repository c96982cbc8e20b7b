// Thin POSIX socket plumbing for the link emulator: parse and resolve "host:port", open a
// non-blocking listener or outgoing connection, close with a reset. Owns no state; knows nothing
// about delays, links or the topology. Every call that can fail for normal reasons (a taken port,
// an unknown host) returns a Status naming what was attempted.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace meshrl::net {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// "127.0.0.1:50051", "localhost:50051", "[::1]:50051". Port 1..65535 unless allow_zero.
Result<HostPort> parse_host_port(const std::string& text, bool allow_zero = false);

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// The first TCP address getaddrinfo gives for host:port (blocking; call once, at start).
Result<SocketAddress> resolve_tcp(const HostPort& where);

// A non-blocking, close-on-exec listening socket bound to host:port (port 0 = ephemeral).
Result<int> listen_tcp(const HostPort& where, int backlog);

// The port a bound socket ended up on.
Result<uint16_t> bound_port(int fd);

// Starts a non-blocking connect; returns the fd (the connection may still be in progress: wait for
// POLLOUT, then connect_result) or an error.
Result<int> connect_tcp_nonblocking(const SocketAddress& to);

// 0 once a non-blocking connect has succeeded, else the errno it failed with.
int connect_result(int fd);

// Non-blocking, close-on-exec, TCP_NODELAY (the emulator schedules every byte itself; Nagle's
// algorithm on top would add its own tens of milliseconds to small messages), no SIGPIPE.
void prepare_stream_socket(int fd);

// Closes so the peer sees a connection reset (RST) at once, as on a cut link, not a polite FIN.
void close_with_reset(int fd);

// send() that never raises SIGPIPE.
long send_no_signal(int fd, const void* data, size_t n);

}  // namespace meshrl::net

// One emulated WAN link: a TCP proxy that listens on one port, opens a connection to one upstream
// (the coordinator) for every connection it accepts, and hands each byte across only when the
// link's timing model (link_shaper.h) says it has crossed the "WAN". One thread per link runs a
// poll() loop over non-blocking sockets; it sleeps in poll until a socket is ready or the next
// queued chunk falls due, so an idle link costs no CPU. Knows nothing about cities, topology files
// or what the bytes mean (gRPC, HTTP/2: all the same to it).
//
// Semantics, per connection and per direction:
//   - bytes are delivered in order, each chunk at the time DirectionShaper::schedule gave it when it
//     was read; end of stream (FIN) is forwarded the same way, after the data before it.
//   - memory is bounded: at most buffer_bytes queued per direction; past that the proxy stops
//     reading from the sender, so TCP flow control pushes back on it (back-pressure). The sender's
//     own kernel buffers still absorb some bytes before its write() blocks.
//   - an error or reset on either side resets the other side too.
//   - partitioned: every open connection is cut with a reset (RST) on both sides, and new
//     connections are accepted and reset at once, so a client sees "connection reset" on its first
//     read or write. (We keep the port bound rather than closing the listener so that nothing else
//     can take the port while the link is down.) Turning the partition off lets new connections
//     through again; cut ones stay cut, as after a real outage the client reconnects.
// Not emulated: TCP's own handshake and congestion control over the long path (the proxy
// terminates TCP at both ends on loopback), packet loss, reordering.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "net/link_shaper.h"
#include "net/sockets.h"

namespace meshrl::net {

struct LinkSpec {
  std::string name;                      // what callers call the link by (the node's city)
  HostPort listen{"127.0.0.1", 0};       // port 0 = ephemeral; LinkProxy::port() says which
  HostPort upstream{"127.0.0.1", 0};     // where each accepted connection is forwarded
  DirectionSpec to_upstream;             // node -> coordinator
  DirectionSpec from_upstream;           // coordinator -> node
  uint64_t seed = 0;                     // jitter; each connection and direction derives its own
  size_t buffer_bytes = 4 << 20;         // queue cap per direction per connection; >= the
                                         // bandwidth-delay product or it, not the cap, limits speed
  size_t max_connections = 256;          // beyond this, new connections are reset
};

// A snapshot; counters only grow.
struct LinkStats {
  uint64_t bytes_to_upstream = 0;    // delivered to the upstream
  uint64_t bytes_from_upstream = 0;  // delivered back to the node
  uint64_t connections = 0;          // accepted by the listener, refused ones included
  uint64_t connections_open = 0;
  uint64_t connections_refused = 0;  // reset at once: partitioned, too many, upstream unreachable
  uint64_t connections_cut = 0;      // open connections reset by a partition
  uint64_t peak_queued_bytes = 0;    // the largest one-direction queue seen (<= buffer_bytes)
  bool partitioned = false;
};

class LinkProxy {
 public:
  // Binds the listener (errors name the link and the address), resolves the upstream once, and
  // starts the link's thread. The upstream need not be up yet: connections made before it is are
  // reset.
  static Result<std::unique_ptr<LinkProxy>> start(const LinkSpec& spec);
  ~LinkProxy();  // stop()
  LinkProxy(const LinkProxy&) = delete;
  LinkProxy& operator=(const LinkProxy&) = delete;

  const LinkSpec& spec() const { return spec_; }
  uint16_t port() const { return port_; }
  void set_partitioned(bool on);  // thread-safe; takes effect within one loop turn
  LinkStats stats() const;        // thread-safe
  // Resets every open connection, closes the listener and joins the thread. Idempotent; returns
  // promptly whatever is queued.
  void stop();

 private:
  struct Loop;  // the state only the link's thread touches (link_proxy.cpp)
  explicit LinkProxy(LinkSpec spec) : spec_(std::move(spec)) {}
  void run();
  void wake();

  LinkSpec spec_;
  SocketAddress upstream_addr_;
  int listen_fd_ = -1;
  int wake_read_fd_ = -1, wake_write_fd_ = -1;  // a self-pipe: stop and partition switches
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> partitioned_{false};
  std::atomic<uint64_t> bytes_to_upstream_{0}, bytes_from_upstream_{0};
  std::atomic<uint64_t> connections_{0}, connections_open_{0}, connections_refused_{0}, connections_cut_{0};
  std::atomic<uint64_t> peak_queued_bytes_{0};
};

}  // namespace meshrl::net

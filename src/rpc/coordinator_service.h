// The coordinator's gRPC server: the Coordinator service of proto/meshrl.proto over a
// mesh::Coordinator. Streams weights and broadcasts in kChunkBytes chunks (resumable by offset),
// reads uploads chunk by chunk up to the declared size (one byte more is "larger than
// declared"; fewer at end of stream is "truncated"), and holds WatchVersions streams open.
// Explicit message size limits (kMaxMessageBytes). Knows nothing about rounds or tensors.
// Security: mutual TLS with the run CA, every call's peer checked before any handler and every
// request's node name checked against its certificate (peer_identity.h); plaintext only on loopback.
//
// What an admitted node can hold of the server is bounded here, before a request reaches the
// Coordinator:
//   - every string, bytes and repeated field of every request (request_limits.h): INVALID_ARGUMENT
//     naming the field, its limit and what arrived;
//   - WatchVersions only on the caller's live session (else FAILED_PRECONDITION "not joined"), at
//     most max_watch_streams_per_node per node and max_watch_streams in all: RESOURCE_EXHAUSTED;
//   - SubmitUpdate decides everything the header alone decides (protocol, session, declared size,
//     a signature present, run id) before it reads one payload byte; then one upload at a time per
//     node, and at most upload_bytes_in_flight payload bytes buffered across all uploads:
//     RESOURCE_EXHAUSTED (the node backs off and retries);
//   - the server's threads (gRPC's sync server runs each call on its own thread): max_threads,
//     beyond which gRPC itself answers RESOURCE_EXHAUSTED.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "mesh/coordinator.h"

namespace meshrl::rpc {

inline constexpr uint64_t kMinUploadBytesInFlight = uint64_t{256} << 20;

struct ServerOptions {
  std::string listen = "127.0.0.1:0";   // host:port; port 0 = ephemeral (port() says which)
  bool insecure = true;                 // plaintext, loopback only; else mutual TLS with the run CA below
  std::string ca_dir;                   // run CA folder (trust/run_ca.h): client CA, allow/revocation lists
  std::string cert;                     // PEM certificate chain of the coordinator (default CA_DIR/coordinator/cert.pem)
  std::string key;                      // PEM private key (default CA_DIR/coordinator/key.pem)
  // A node holds one watch; the second covers a reconnect while the server has not yet noticed
  // that the old stream is gone.
  int max_watch_streams_per_node = 2;
  int max_watch_streams = 256;          // all nodes together
  int max_threads = 512;                // the server's thread pool: open streams and calls in flight
  // Payload bytes buffered at once across all uploads; 0 = twice the largest update the run
  // allows (Coordinator::max_update_bytes), so two maximal uploads or many compressed ones fit,
  // and at least kMinUploadBytesInFlight, so the many nodes of a small model upload at once.
  // An upload reserves its declared size + 1 before reading; less than max_update_bytes + 1 here
  // refuses the largest updates outright.
  uint64_t upload_bytes_in_flight = 0;
};

class CoordinatorServer {
 public:
  static Result<std::unique_ptr<CoordinatorServer>> start(mesh::Coordinator& coordinator, const ServerOptions& options);
  ~CoordinatorServer();  // shutdown()
  int port() const { return port_; }
  // What the server holds now (tests, dashboards).
  int watch_streams() const;
  uint64_t upload_bytes_in_flight() const;
  // Ends open streams (WatchVersions returns), then stops. Idempotent.
  void shutdown();

 private:
  struct Impl;
  CoordinatorServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace meshrl::rpc

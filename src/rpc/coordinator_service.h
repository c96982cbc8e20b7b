// The coordinator's gRPC server: the Coordinator service of proto/meshrl.proto over a
// mesh::Coordinator. Streams weights and broadcasts in kChunkBytes chunks (resumable by offset),
// reads uploads chunk by chunk up to the declared size (one byte more is "larger than
// declared"; fewer at end of stream is "truncated"), and holds WatchVersions streams open.
// Explicit message size limits (kMaxMessageBytes). Knows nothing about rounds or tensors.
// Security: mutual TLS with the run CA, every call's peer checked before any handler and every
// request's node name checked against its certificate (peer_identity.h); plaintext only on loopback.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "mesh/coordinator.h"

namespace meshrl::rpc {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";   // host:port; port 0 = ephemeral (port() says which)
  bool insecure = true;                 // plaintext, loopback only; else mutual TLS with the run CA below
  std::string ca_dir;                   // run CA folder (trust/run_ca.h): client CA, allow/revocation lists
  std::string cert;                     // PEM certificate chain of the coordinator (default CA_DIR/coordinator/cert.pem)
  std::string key;                      // PEM private key (default CA_DIR/coordinator/key.pem)
};

class CoordinatorServer {
 public:
  static Result<std::unique_ptr<CoordinatorServer>> start(mesh::Coordinator& coordinator, const ServerOptions& options);
  ~CoordinatorServer();  // shutdown()
  int port() const { return port_; }
  // Ends open streams (WatchVersions returns), then stops. Idempotent.
  void shutdown();

 private:
  struct Impl;
  CoordinatorServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace meshrl::rpc

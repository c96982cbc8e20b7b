// The coordinator's gRPC server: the Coordinator service of proto/meshrl.proto over a
// mesh::Coordinator. Streams weights and broadcasts in kChunkBytes chunks (resumable by offset),
// reads uploads chunk by chunk up to the declared size (one byte more is "larger than
// declared"; fewer at end of stream is "truncated"), and holds WatchVersions streams open.
// Explicit message size limits (kMaxMessageBytes). Knows nothing about rounds or tensors.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "mesh/coordinator.h"

namespace meshrl::rpc {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";   // host:port; port 0 = ephemeral (port() says which)
  bool insecure = true;                 // plaintext; else TLS with the files below
  std::string cert;                     // PEM certificate chain of the coordinator
  std::string key;                      // PEM private key
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

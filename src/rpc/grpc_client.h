// The gRPC implementation of CoordinatorClient (mesh/coordinator_client.h): one channel to the
// coordinator (or to a link-emulator port in front of it), explicit message size limits, a
// deadline on every call, chunked uploads and resumable chunked downloads, each refused at its
// first chunk when it declares more than the caller's cap (mesh/coordinator_client.h).
// Knows nothing about training or the round logic.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "mesh/coordinator_client.h"

namespace meshrl::rpc {

struct ChannelOptions {
  std::string target;          // host:port
  bool insecure = true;        // plaintext, loopback only; else TLS with the files below
  std::string ca_cert;         // PEM file of the CA that signed the coordinator's certificate
  std::string client_cert;     // the node's certificate + key (a run coordinator requires them: mutual TLS)
  std::string client_key;
  // Progress of full-weight downloads (DownloadWeights, not broadcasts), may be empty: bytes held
  // of the declared total after each chunk. Called from the downloading thread.
  std::function<void(uint64_t done, uint64_t total)> on_download_bytes;
};

Result<std::unique_ptr<mesh::CoordinatorClient>> make_grpc_client(const ChannelOptions& options);

}  // namespace meshrl::rpc

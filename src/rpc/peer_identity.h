// Who is on the other end of a call, for the coordinator's server under mutual TLS.
//
// TLS itself (grpc::SslServerCredentials with REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY)
// refuses a peer without a certificate or with one of another CA during the handshake. Then
// NodeAuthProcessor, run by gRPC for every call before any handler, reads the certificate's
// common name, requires it among the certificate's SAN DNS names, and refuses it (UNAUTHENTICATED)
// when the run CA's lists say so (trust::AccessPolicy: not on allowed.txt, or on revoked.txt,
// reread when they change). An admitted call carries the name as the auth-context property
// kNodeProperty, and the service compares it with the node name each request claims.
#pragma once

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/server_context.h>

#include <memory>
#include <optional>
#include <string>

#include "trust/name_list.h"

namespace meshrl::rpc {

inline constexpr const char* kNodeProperty = "meshrl_node";

class NodeAuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit NodeAuthProcessor(std::shared_ptr<const trust::AccessPolicy> policy) : policy_(std::move(policy)) {}
  // The checks are a few string compares and a stat of two small files: no need for gRPC's thread pool.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context, OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  std::shared_ptr<const trust::AccessPolicy> policy_;
};

// The node name mutual TLS authenticated for this call; nullopt on a plaintext server.
std::optional<std::string> authenticated_node(const grpc::ServerContext& ctx);

// Host part of "host:port", "[v6]:port" or a bare host; true for 127.0.0.0/8, ::1 and localhost.
// Plaintext gRPC is allowed only there (--insecure).
bool is_loopback_target(const std::string& target);

}  // namespace meshrl::rpc

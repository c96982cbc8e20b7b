#include "rpc/peer_identity.h"

#include <arpa/inet.h>

#include <algorithm>

namespace meshrl::rpc {

grpc::Status NodeAuthProcessor::Process(const InputMetadata&, grpc::AuthContext* context, OutputMetadata*, OutputMetadata*) {
  const auto cns = context->FindPropertyValues("x509_common_name");
  if (cns.empty()) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no client certificate: this run requires mutual TLS");
  const std::string cn(cns.front().data(), cns.front().size());
  const auto sans = context->FindPropertyValues("x509_subject_alternative_name");
  const bool cn_in_san = std::any_of(sans.begin(), sans.end(), [&](const grpc::string_ref& s) { return s == cn; });
  if (!cn_in_san)
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "certificate of '" + cn + "' does not name it in its subject alternative names; issue it with `meshrl ca issue`");
  if (std::string why = policy_->refusal(cn); !why.empty()) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
  context->AddProperty(kNodeProperty, cn);
  return grpc::Status::OK;
}

std::optional<std::string> authenticated_node(const grpc::ServerContext& ctx) {
  auto auth = ctx.auth_context();
  if (!auth) return std::nullopt;
  const auto v = auth->FindPropertyValues(kNodeProperty);
  if (v.empty()) return std::nullopt;
  return std::string(v.front().data(), v.front().size());
}

bool is_loopback_target(const std::string& target) {
  std::string host = target;
  if (host.rfind("ipv4:", 0) == 0) host = host.substr(5);
  if (host.rfind("ipv6:", 0) == 0) host = host.substr(5);
  if (!host.empty() && host.front() == '[') {
    const auto e = host.find(']');
    if (e == std::string::npos) return false;
    host = host.substr(1, e - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));
  }
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

}  // namespace meshrl::rpc

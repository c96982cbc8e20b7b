// The coordinator's gRPC service. See coordinator_service.h.
#include "rpc/coordinator_service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "core/fault_point.h"
#include "core/file_io.h"
#include "meshrl.grpc.pb.h"
#include "mesh/protocol.h"
#include "rpc/peer_identity.h"
#include "trust/run_ca.h"

namespace meshrl::rpc {

namespace {

namespace v1 = ::meshrl::v1;
using mesh::Coordinator;

class Service final : public v1::Coordinator::Service {
 public:
  Service(Coordinator& c, bool mutual_tls) : c_(c), mutual_tls_(mutual_tls) {}
  std::atomic<bool> stopping{false};

  // Under mutual TLS a request may only speak for the node its certificate names (the auth
  // processor has already refused unknown, revoked and CA-less peers before any handler runs).
  std::string identity_refusal(const grpc::ServerContext& ctx, const std::string& claimed) const {
    if (!mutual_tls_) return {};
    const auto who = authenticated_node(ctx);
    if (!who) return "no authenticated node name on this connection";
    if (*who != claimed)
      return "this connection is authenticated as '" + *who + "' but the request speaks for '" + claimed.substr(0, 64) + "'";
    return {};
  }
  static grpc::Status denied(const std::string& why) { return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, why); }

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req, v1::JoinReply* reply) override {
    if (std::string why = identity_refusal(*ctx, req->name()); !why.empty()) {
      reply->set_accepted(false);  // an answer, not a transport error: the node stops instead of retrying
      reply->set_reason(why);
      reply->set_protocol_version(mesh::kProtocolVersion);
      return grpc::Status::OK;
    }
    *reply = c_.join(*req, ctx->peer());
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req, v1::HeartbeatReply* reply) override {
    if (std::string why = identity_refusal(*ctx, req->name()); !why.empty()) return denied(why);
    *reply = c_.heartbeat(*req);
    return grpc::Status::OK;
  }
  grpc::Status Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req, v1::LeaveReply* reply) override {
    if (std::string why = identity_refusal(*ctx, req->name()); !why.empty()) return denied(why);
    *reply = c_.leave(*req);
    return grpc::Status::OK;
  }

  grpc::Status stream_blob(grpc::ServerContext* ctx, const std::string& name, Result<Coordinator::Blob> blob, uint64_t offset,
                           grpc::ServerWriter<v1::DataChunk>* w, bool full) {
    v1::DataChunk c;
    if (!blob.is_ok()) {
      c.set_error(blob.status().message());
      w->Write(c);
      return grpc::Status::OK;
    }
    const Coordinator::Blob& b = blob.value();
    const std::string& bytes = *b.bytes;
    if (offset > bytes.size()) {
      c.set_error("offset " + std::to_string(offset) + " beyond the " + std::to_string(bytes.size()) + " bytes");
      w->Write(c);
      return grpc::Status::OK;
    }
    uint64_t sent = 0;
    // An empty blob still sends one chunk so the client learns total_bytes = 0.
    for (uint64_t off = offset; off < bytes.size() || (off == 0 && bytes.empty()); off += mesh::kChunkBytes) {
      if (ctx->IsCancelled() || stopping) break;
      c.Clear();
      c.set_version(b.version);
      c.set_offset(off);
      c.set_total_bytes(bytes.size());
      c.set_hash(b.hash);
      const size_t n = std::min<uint64_t>(mesh::kChunkBytes, bytes.size() - off);
      c.set_data(bytes.data() + off, n);
      if (!w->Write(c)) break;
      sent += n;
      if (bytes.empty()) break;
    }
    c_.count_bytes_down(name, sent, full);
    return grpc::Status::OK;
  }

  grpc::Status DownloadWeights(grpc::ServerContext* ctx, const v1::DownloadRequest* req, grpc::ServerWriter<v1::DataChunk>* w) override {
    if (std::string why = identity_refusal(*ctx, req->name()); !why.empty()) return denied(why);
    auto blob = req->base() ? c_.base_weights(req->name(), req->session()) : c_.weights(req->name(), req->session(), req->version());
    return stream_blob(ctx, req->name(), std::move(blob), req->offset(), w, true);
  }
  grpc::Status GetBroadcast(grpc::ServerContext* ctx, const v1::BroadcastRequest* req, grpc::ServerWriter<v1::DataChunk>* w) override {
    if (std::string why = identity_refusal(*ctx, req->name()); !why.empty()) return denied(why);
    return stream_blob(ctx, req->name(), c_.broadcast(req->name(), req->session(), req->version()), req->offset(), w, false);
  }

  grpc::Status SubmitUpdate(grpc::ServerContext* ctx, grpc::ServerReader<v1::UpdateChunk>* r, v1::SubmitReply* reply) override {
    v1::UpdateChunk c;
    if (!r->Read(&c) || !c.has_header()) {
      reply->set_accepted(false);
      reply->set_reason("an update must start with its header");
      return grpc::Status::OK;
    }
    const v1::UpdateHeader h = c.header();
    if (std::string why = identity_refusal(*ctx, h.name()); !why.empty()) return denied(why);
    // Read at most one byte past what was declared (capped by the run's maximum): enough to know
    // the payload is larger than declared, never enough to exhaust memory.
    const uint64_t cap = std::min<uint64_t>(h.declared_bytes(), c_.max_update_bytes()) + 1;
    std::string payload;
    while (payload.size() < cap && r->Read(&c)) {
      if (c.has_header()) break;
      const std::string& d = c.data();
      payload.append(d.data(), std::min<uint64_t>(d.size(), cap - payload.size()));
      fault_point("mid_upload", h.base_version() + 1);  // test-only: core/fault_point.h
    }
    *reply = c_.submit(h, payload);
    return grpc::Status::OK;
  }

  grpc::Status AnswerAudit(grpc::ServerContext* ctx, const v1::AuditAnswer* req, v1::AuditVerdict* reply) override {
    if (std::string why = identity_refusal(*ctx, req->name()); !why.empty()) return denied(why);
    *reply = c_.answer_audit(*req);
    return grpc::Status::OK;
  }

  grpc::Status WatchVersions(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                             grpc::ServerWriter<v1::VersionAnnouncement>* w) override {
    if (std::string why = identity_refusal(*ctx, req->name()); !why.empty()) return denied(why);
    int64_t after = -1;
    while (!ctx->IsCancelled() && !stopping) {
      auto a = c_.wait_version(after, 0.5);
      if (!a) {
        if (c_.fatal()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator stopped");
        continue;
      }
      if (!w->Write(*a)) break;
      after = a->version();
      if (a->finished()) break;
    }
    return grpc::Status::OK;
  }

 private:
  Coordinator& c_;
  const bool mutual_tls_;
};

}  // namespace

struct CoordinatorServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
};

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::start(mesh::Coordinator& coordinator, const ServerOptions& o) {
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->service = std::make_unique<Service>(coordinator, !o.insecure);
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (o.insecure) {
    if (!is_loopback_target(o.listen))
      return invalid_argument("[coordinator] refusing plaintext gRPC on " + o.listen +
                              ": --insecure is for loopback only (--listen 127.0.0.1); use --ca DIR from `meshrl ca init`");
    creds = grpc::InsecureServerCredentials();
  } else {
    if (o.ca_dir.empty())
      return invalid_argument("[coordinator] mutual TLS needs --ca DIR (a run CA from `meshrl ca init DIR`); or --insecure on loopback");
    const trust::CaFiles ca{o.ca_dir};
    const trust::IdentityFiles own = ca.coordinator();
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    MESHRL_ASSIGN_OR_RETURN(ssl.pem_root_certs, read_file(ca.ca_cert(), 1 << 20));
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    MESHRL_ASSIGN_OR_RETURN(pair.cert_chain, read_file(o.cert.empty() ? own.cert : std::filesystem::path(o.cert), 1 << 20));
    MESHRL_ASSIGN_OR_RETURN(pair.private_key, read_file(o.key.empty() ? own.key : std::filesystem::path(o.key), 1 << 20));
    ssl.pem_key_cert_pairs.push_back(pair);
    creds = grpc::SslServerCredentials(ssl);
    creds->SetAuthMetadataProcessor(
        std::make_shared<NodeAuthProcessor>(std::make_shared<const trust::AccessPolicy>(ca.allowed(), ca.revoked())));
  }
  grpc::ServerBuilder b;
  b.AddListeningPort(o.listen, creds, &s->port_);
  b.RegisterService(s->impl_->service.get());
  b.SetMaxReceiveMessageSize(mesh::kMaxMessageBytes);
  b.SetMaxSendMessageSize(mesh::kMaxMessageBytes);
  s->impl_->server = b.BuildAndStart();
  if (!s->impl_->server || s->port_ == 0) return io_error("[coordinator] cannot listen on " + o.listen);
  return s;
}

CoordinatorServer::~CoordinatorServer() { shutdown(); }

void CoordinatorServer::shutdown() {
  if (!impl_ || !impl_->server) return;
  impl_->service->stopping = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace meshrl::rpc

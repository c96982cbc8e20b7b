// The coordinator's gRPC service. See coordinator_service.h.
#include "rpc/coordinator_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>

#include "core/fault_point.h"
#include "core/file_io.h"
#include "meshrl.grpc.pb.h"
#include "mesh/protocol.h"
#include "rpc/peer_identity.h"
#include "rpc/request_limits.h"
#include "trust/run_ca.h"

namespace meshrl::rpc {

namespace {

namespace v1 = ::meshrl::v1;
using mesh::Coordinator;

const char* const kNotJoined = "not joined (unknown session or lease expired); join again";

template <typename F>
struct OnExit {
  F f;
  ~OnExit() { f(); }
};
template <typename F>
OnExit(F) -> OnExit<F>;

// What nodes hold open at once of one kind (watch streams, uploads): at most per_node for one
// node and total for all of them together.
class Slots {
 public:
  Slots(std::string what, int per_node, int total) : what_(std::move(what)), per_node_(per_node), total_(total) {}
  // "" and one slot held for `node` until release(node), or why not.
  std::string acquire(const std::string& node) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = held_.find(node);
    const int mine = it == held_.end() ? 0 : it->second;
    if (mine >= per_node_)
      return "'" + node + "' already has " + std::to_string(mine) + " " + what_ + " open, the limit per node is " +
             std::to_string(per_node_) + "; wait for one to end";
    if (in_use_ >= total_)
      return "the coordinator has " + std::to_string(in_use_) + " " + what_ + " open, its limit for all nodes; retry later";
    ++held_[node];
    ++in_use_;
    return {};
  }
  void release(const std::string& node) {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = held_.find(node); it != held_.end() && --it->second == 0) held_.erase(it);
    --in_use_;
  }
  int in_use() const {
    std::lock_guard<std::mutex> lk(mu_);
    return in_use_;
  }

 private:
  const std::string what_;
  const int per_node_, total_;
  mutable std::mutex mu_;
  std::map<std::string, int> held_;
  int in_use_ = 0;
};

// Payload bytes buffered across all uploads: each upload reserves what it may buffer before it
// reads any, so the sum never exceeds the cap whatever the nodes declare.
class ByteBudget {
 public:
  explicit ByteBudget(uint64_t cap) : cap_(cap) {}
  std::string reserve(uint64_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    if (n > cap_ - used_)
      return "uploads in flight hold " + std::to_string(used_) + " of the " + std::to_string(cap_) +
             " payload bytes the coordinator buffers at once, this one needs " + std::to_string(n) + "; retry later";
    used_ += n;
    return {};
  }
  void release(uint64_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    used_ -= n;
  }
  uint64_t used() const {
    std::lock_guard<std::mutex> lk(mu_);
    return used_;
  }

 private:
  const uint64_t cap_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;
};

class Service final : public v1::Coordinator::Service {
 public:
  Service(Coordinator& c, const ServerOptions& o, uint64_t upload_bytes_in_flight)
      : c_(c),
        mutual_tls_(!o.insecure),
        watches_("WatchVersions stream(s)", o.max_watch_streams_per_node, o.max_watch_streams),
        uploads_("upload stream(s)", 1, o.max_threads),
        upload_bytes_(upload_bytes_in_flight) {
    const auto& cfg = c.config();
    limits_.max_audit_rollouts =
        mesh::samples_per_update_bound(cfg.mesh.inner_steps, cfg.run.grpo.prompts_per_step, cfg.run.grpo.group_size);
  }
  std::atomic<bool> stopping{false};
  int watch_streams() const { return watches_.in_use(); }
  uint64_t upload_bytes_in_flight() const { return upload_bytes_.used(); }

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
  static grpc::Status exhausted(const std::string& why) { return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why); }

  // Every request passes here first: its fields within request_limits.h, then (mutual TLS) the
  // name it speaks for is the one its certificate names.
  grpc::Status screen(const grpc::ServerContext& ctx, const google::protobuf::Message& req, const std::string& claimed) const {
    if (std::string why = check_request(req, limits_); !why.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
    if (std::string why = identity_refusal(ctx, claimed); !why.empty()) return denied(why);
    return grpc::Status::OK;
  }

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req, v1::JoinReply* reply) override {
    if (std::string why = check_request(*req, limits_); !why.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
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
    if (grpc::Status st = screen(*ctx, *req, req->name()); !st.ok()) return st;
    *reply = c_.heartbeat(*req);
    return grpc::Status::OK;
  }
  grpc::Status Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req, v1::LeaveReply* reply) override {
    if (grpc::Status st = screen(*ctx, *req, req->name()); !st.ok()) return st;
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
    if (grpc::Status st = screen(*ctx, *req, req->name()); !st.ok()) return st;
    auto blob = req->base() ? c_.base_weights(req->name(), req->session()) : c_.weights(req->name(), req->session(), req->version());
    return stream_blob(ctx, req->name(), std::move(blob), req->offset(), w, true);
  }
  grpc::Status GetBroadcast(grpc::ServerContext* ctx, const v1::BroadcastRequest* req, grpc::ServerWriter<v1::DataChunk>* w) override {
    if (grpc::Status st = screen(*ctx, *req, req->name()); !st.ok()) return st;
    return stream_blob(ctx, req->name(), c_.broadcast(req->name(), req->session(), req->version()), req->offset(), w, false);
  }

  // The refusals the header alone decides (protocol, session, declared size, a signature present,
  // run id), before one payload byte is read. The Coordinator still writes the answer, and the
  // ledger's node event, as for any upload: it gets the header with an empty payload, and for the
  // two checks it makes after comparing sizes (signature present, run id) with declared_bytes 0,
  // so that its size checks pass and it reaches them. nullopt: read the payload.
  std::optional<v1::SubmitReply> refuse_on_header(const v1::UpdateHeader& h) {
    if (h.protocol_version() != mesh::kProtocolVersion || !c_.session_valid(h.name(), h.session()) ||
        h.declared_bytes() > c_.max_update_bytes())
      return c_.submit(h, {});
    if (h.signature().empty() || h.run_id() != c_.run_id()) {
      v1::UpdateHeader empty = h;
      empty.set_declared_bytes(0);
      return c_.submit(empty, {});
    }
    return std::nullopt;
  }

  grpc::Status SubmitUpdate(grpc::ServerContext* ctx, grpc::ServerReader<v1::UpdateChunk>* r, v1::SubmitReply* reply) override {
    v1::UpdateChunk c;
    if (!r->Read(&c) || !c.has_header()) {
      reply->set_accepted(false);
      reply->set_reason("an update must start with its header");
      return grpc::Status::OK;
    }
    const v1::UpdateHeader h = c.header();
    if (grpc::Status st = screen(*ctx, h, h.name()); !st.ok()) return st;
    if (auto refused = refuse_on_header(h)) {
      *reply = std::move(*refused);
      return grpc::Status::OK;
    }
    if (std::string why = uploads_.acquire(h.name()); !why.empty()) return exhausted(why);
    OnExit release_slot{[&] { uploads_.release(h.name()); }};
    // Read at most one byte past what was declared (declared is within the run's maximum now):
    // enough to know the payload is larger than declared, never more than was reserved.
    const uint64_t cap = h.declared_bytes() + 1;
    if (std::string why = upload_bytes_.reserve(cap); !why.empty()) return exhausted(why);
    OnExit release_bytes{[&] { upload_bytes_.release(cap); }};
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
    if (grpc::Status st = screen(*ctx, *req, req->name()); !st.ok()) return st;
    *reply = c_.answer_audit(*req);
    return grpc::Status::OK;
  }

  grpc::Status WatchVersions(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                             grpc::ServerWriter<v1::VersionAnnouncement>* w) override {
    if (grpc::Status st = screen(*ctx, *req, req->name()); !st.ok()) return st;
    // A made-up session holds no thread: refused before the stream waits on anything.
    if (!c_.session_valid(req->name(), req->session())) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, kNotJoined);
    if (std::string why = watches_.acquire(req->name()); !why.empty()) return exhausted(why);
    OnExit release{[&] { watches_.release(req->name()); }};
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
  RequestLimits limits_;
  Slots watches_;
  Slots uploads_;  // one per node; the thread pool bounds them all
  ByteBudget upload_bytes_;
};

}  // namespace

struct CoordinatorServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
};

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::start(mesh::Coordinator& coordinator, const ServerOptions& o) {
  if (o.max_watch_streams_per_node < 1 || o.max_watch_streams < 1 || o.max_threads < 4)
    return invalid_argument("[coordinator] server limits must be positive (watch streams per node " +
                            std::to_string(o.max_watch_streams_per_node) + ", watch streams " + std::to_string(o.max_watch_streams) +
                            ") and max_threads at least 4, got " + std::to_string(o.max_threads));
  const uint64_t max_update = coordinator.max_update_bytes();
  const uint64_t in_flight =
      o.upload_bytes_in_flight > 0 ? o.upload_bytes_in_flight : std::max<uint64_t>(2 * (max_update + 1), kMinUploadBytesInFlight);
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->service = std::make_unique<Service>(coordinator, o, in_flight);
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
  // The sync server runs each call on a thread of its own: the quota bounds them all, and a call
  // beyond it is answered RESOURCE_EXHAUSTED by gRPC. One completion queue with 1..2 idle pollers.
  grpc::ResourceQuota quota("meshrl-coordinator");
  quota.SetMaxThreads(o.max_threads);
  b.SetResourceQuota(quota);
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  s->impl_->server = b.BuildAndStart();
  if (!s->impl_->server || s->port_ == 0) return io_error("[coordinator] cannot listen on " + o.listen);
  return s;
}

CoordinatorServer::~CoordinatorServer() { shutdown(); }

int CoordinatorServer::watch_streams() const { return impl_ ? impl_->service->watch_streams() : 0; }
uint64_t CoordinatorServer::upload_bytes_in_flight() const { return impl_ ? impl_->service->upload_bytes_in_flight() : 0; }

void CoordinatorServer::shutdown() {
  if (!impl_ || !impl_->server) return;
  impl_->service->stopping = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace meshrl::rpc

// The node's gRPC client. See grpc_client.h.
#include "rpc/grpc_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "core/file_io.h"
#include "meshrl.grpc.pb.h"
#include "mesh/protocol.h"
#include "rpc/peer_identity.h"

namespace meshrl::rpc {

namespace {

using mesh::Download;
namespace v1 = ::meshrl::v1;

void set_deadline(grpc::ClientContext& ctx, double seconds) {
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

Status transport_error(const char* call, const grpc::Status& s) {
  // Refused for who we are (not on the allow-list, revoked, another node's name): retrying cannot
  // help, so it is not an I/O error (which the node retries with backoff).
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED || s.error_code() == grpc::StatusCode::PERMISSION_DENIED)
    return invalid_argument(std::string("[rpc] ") + call + " refused by the coordinator: " + s.error_message());
  return io_error(std::string("[rpc] ") + call + ": " + s.error_message() + " (grpc code " +
                  std::to_string(static_cast<int>(s.error_code())) + ")");
}

class GrpcClient : public mesh::CoordinatorClient {
 public:
  GrpcClient(std::shared_ptr<grpc::Channel> ch, std::function<void(uint64_t, uint64_t)> on_download_bytes)
      : stub_(v1::Coordinator::NewStub(ch)), on_download_bytes_(std::move(on_download_bytes)) {}

  Result<v1::JoinReply> join(const v1::JoinRequest& req) override {
    grpc::ClientContext ctx;
    set_deadline(ctx, mesh::kUnaryDeadlineS);
    v1::JoinReply r;
    grpc::Status s = stub_->Join(&ctx, req, &r);
    if (!s.ok()) return transport_error("Join", s);
    return r;
  }
  Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest& req) override {
    grpc::ClientContext ctx;
    set_deadline(ctx, mesh::kUnaryDeadlineS);
    v1::HeartbeatReply r;
    grpc::Status s = stub_->Heartbeat(&ctx, req, &r);
    if (!s.ok()) return transport_error("Heartbeat", s);
    return r;
  }
  Result<v1::LeaveReply> leave(const v1::LeaveRequest& req) override {
    grpc::ClientContext ctx;
    set_deadline(ctx, mesh::kUnaryDeadlineS);
    v1::LeaveReply r;
    grpc::Status s = stub_->Leave(&ctx, req, &r);
    if (!s.ok()) return transport_error("Leave", s);
    return r;
  }

  // One attempt per stream; a broken stream resumes at the bytes already held. The declared total
  // is checked against max_bytes at the first chunk, and every chunk against the declared total,
  // so a coordinator declaring (or streaming) more than the caller can take costs one chunk.
  template <typename Open>
  Result<Download> fetch(const char* call, uint64_t max_bytes, Open open, const std::function<void(uint64_t, uint64_t)>& on_bytes = {}) {
    Download d;
    uint64_t total = UINT64_MAX;
    Status last = io_error(std::string("[rpc] ") + call + ": no attempt");
    for (int attempt = 0; attempt < 4; ++attempt) {
      grpc::ClientContext ctx;
      set_deadline(ctx, 600);
      auto reader = open(ctx, d.bytes.size());
      v1::DataChunk c;
      while (reader->Read(&c)) {
        if (!c.error().empty()) return invalid_argument(c.error());
        if (c.offset() != d.bytes.size()) return data_loss(std::string("[rpc] ") + call + ": chunk at offset " +
                                                           std::to_string(c.offset()) + ", expected " + std::to_string(d.bytes.size()));
        if (total == UINT64_MAX) {
          if (c.total_bytes() > max_bytes)
            return data_loss(std::string("[rpc] ") + call + ": the coordinator declares " + std::to_string(c.total_bytes()) +
                             " bytes, more than the " + std::to_string(max_bytes) + " this node's model can encode to; refused");
          total = c.total_bytes();
        }
        if (c.total_bytes() != total || d.bytes.size() + c.data().size() > total)
          return data_loss(std::string("[rpc] ") + call + ": stream exceeds its declared " + std::to_string(total) + " bytes");
        d.bytes += c.data();
        d.version = c.version();
        d.hash = c.hash();
        if (on_bytes) on_bytes(d.bytes.size(), total);
      }
      grpc::Status s = reader->Finish();
      if (s.ok() && total != UINT64_MAX && d.bytes.size() == total) return d;
      last = s.ok() ? io_error(std::string("[rpc] ") + call + ": stream ended at " + std::to_string(d.bytes.size()) +
                               " of " + std::to_string(total) + " bytes")
                    : transport_error(call, s);
      if (!s.ok() && s.error_code() != grpc::StatusCode::UNAVAILABLE && s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
        break;
    }
    return last;
  }

  Result<Download> download_weights(const std::string& name, uint64_t session, int64_t version, uint64_t max_bytes) override {
    return fetch("DownloadWeights", max_bytes, [&](grpc::ClientContext& ctx, uint64_t offset) {
      v1::DownloadRequest req;
      req.set_name(name);
      req.set_session(session);
      req.set_version(version);
      req.set_offset(offset);
      return stub_->DownloadWeights(&ctx, req);
    }, on_download_bytes_);
  }
  Result<Download> download_base(const std::string& name, uint64_t session, uint64_t max_bytes) override {
    return fetch("DownloadWeights", max_bytes, [&](grpc::ClientContext& ctx, uint64_t offset) {
      v1::DownloadRequest req;
      req.set_name(name);
      req.set_session(session);
      req.set_base(true);
      req.set_offset(offset);
      return stub_->DownloadWeights(&ctx, req);
    }, on_download_bytes_);
  }
  Result<Download> get_broadcast(const std::string& name, uint64_t session, int64_t version, uint64_t max_bytes) override {
    return fetch("GetBroadcast", max_bytes, [&](grpc::ClientContext& ctx, uint64_t offset) {
      v1::BroadcastRequest req;
      req.set_offset(offset);
      req.set_name(name);
      req.set_session(session);
      req.set_version(version);
      return stub_->GetBroadcast(&ctx, req);
    });
  }

  Result<v1::SubmitReply> submit(const v1::UpdateHeader& header, const std::string& payload) override {
    grpc::ClientContext ctx;
    set_deadline(ctx, 600);
    v1::SubmitReply r;
    auto writer = stub_->SubmitUpdate(&ctx, &r);
    v1::UpdateChunk c;
    *c.mutable_header() = header;
    bool ok = writer->Write(c);
    for (size_t off = 0; ok && off < payload.size(); off += mesh::kChunkBytes) {
      v1::UpdateChunk d;
      d.set_data(payload.substr(off, mesh::kChunkBytes));
      ok = writer->Write(d);
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (!s.ok()) return transport_error("SubmitUpdate", s);
    return r;
  }

  Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer& answer) override {
    grpc::ClientContext ctx;
    set_deadline(ctx, 60);  // the coordinator re-scores a few rollouts (a command verifier may be slow)
    v1::AuditVerdict r;
    grpc::Status s = stub_->AnswerAudit(&ctx, answer, &r);
    if (!s.ok()) return transport_error("AnswerAudit", s);
    return r;
  }

  Status watch(const std::string& name, uint64_t session,
               const std::function<bool(const v1::VersionAnnouncement&)>& on_version) override {
    grpc::ClientContext ctx;
    set_deadline(ctx, 3600);
    v1::WatchRequest req;
    req.set_name(name);
    req.set_session(session);
    auto reader = stub_->WatchVersions(&ctx, req);
    v1::VersionAnnouncement a;
    while (reader->Read(&a)) {
      if (!on_version(a)) {
        ctx.TryCancel();
        break;
      }
    }
    grpc::Status s = reader->Finish();
    if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) return transport_error("WatchVersions", s);
    return Status::ok();
  }

 private:
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::function<void(uint64_t, uint64_t)> on_download_bytes_;
};

}  // namespace

Result<std::unique_ptr<mesh::CoordinatorClient>> make_grpc_client(const ChannelOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(mesh::kMaxMessageBytes);
  args.SetMaxSendMessageSize(mesh::kMaxMessageBytes);
  // Reconnect quickly after the coordinator restarts or a partition heals.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (o.insecure) {
    if (!is_loopback_target(o.target))
      return invalid_argument("[node] refusing plaintext gRPC to " + o.target + ": --insecure is for loopback only; use --identity DIR");
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    if (!o.ca_cert.empty()) {
      MESHRL_ASSIGN_OR_RETURN(ssl.pem_root_certs, read_file(o.ca_cert, 1 << 20));
    }
    if (!o.client_cert.empty()) {
      MESHRL_ASSIGN_OR_RETURN(ssl.pem_cert_chain, read_file(o.client_cert, 1 << 20));
      MESHRL_ASSIGN_OR_RETURN(ssl.pem_private_key, read_file(o.client_key, 1 << 20));
    }
    creds = grpc::SslCredentials(ssl);
  }
  auto ch = grpc::CreateCustomChannel(o.target, creds, args);
  return std::unique_ptr<mesh::CoordinatorClient>(new GrpcClient(ch, o.on_download_bytes));
}

}  // namespace meshrl::rpc

// CoordinatorClient: the node's view of the coordinator, one method per call of the protocol
// (proto/meshrl.proto). The seam between the node's logic (node.h) and a transport: the gRPC one
// (src/rpc/grpc_client.h) for real runs, an in-process one for tests. Knows nothing about training.
//
// Errors: a transport failure (connection refused or reset, deadline) is kIoError and worth a
// retry with backoff; a refusal by the coordinator comes back in the reply (accepted = false and
// a reason), or for downloads as kInvalidArgument carrying the coordinator's reason; a call refused
// for the caller's identity (mutual TLS: unknown, revoked, another node's name) is kInvalidArgument.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "meshrl.pb.h"

namespace meshrl::mesh {

namespace v1 = ::meshrl::v1;

// A download's cap when the caller sets none.
inline constexpr uint64_t kNoDownloadCap = UINT64_MAX;

// A downloaded blob: all its bytes, checked against the announced total size.
struct Download {
  std::string bytes;
  int64_t version = 0;
  std::string hash;   // the coordinator's content hash of the weights at `version`
};

class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual Result<v1::JoinReply> join(const v1::JoinRequest& req) = 0;
  virtual Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest& req) = 0;
  virtual Result<v1::LeaveReply> leave(const v1::LeaveRequest& req) = 0;
  // Resumes by offset inside the call when a stream breaks part-way (a few attempts). max_bytes:
  // a stream that declares more is refused (kDataLoss) at its first chunk, and no stream may send
  // more than it declared; the node sets it from its own model's shapes (node.h download_caps).
  virtual Result<Download> download_weights(const std::string& name, uint64_t session, int64_t version,
                                            uint64_t max_bytes = kNoDownloadCap) = 0;
  // [lora] runs: the frozen base under the adapters (Download.hash = the manifest's base_weights_hash).
  virtual Result<Download> download_base(const std::string& name, uint64_t session, uint64_t max_bytes = kNoDownloadCap) = 0;
  virtual Result<Download> get_broadcast(const std::string& name, uint64_t session, int64_t version,
                                         uint64_t max_bytes = kNoDownloadCap) = 0;
  // Sends the header, then the payload in chunks of at most kChunkBytes.
  virtual Result<v1::SubmitReply> submit(const v1::UpdateHeader& header, const std::string& payload) = 0;
  // Calls on_version for each announcement until the stream ends (ok), fails (kIoError), or
  // on_version returns false (stop watching).
  virtual Status watch(const std::string& name, uint64_t session,
                       const std::function<bool(const v1::VersionAnnouncement&)>& on_version) = 0;
  // Answers the reward audit a SubmitReply asked for (reward_audit.h).
  virtual Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer& answer) = 0;
};

// A refusal that means "your session is gone: join again" (lease expired, coordinator restarted).
inline bool is_not_joined(const std::string& reason) { return reason.rfind("not joined", 0) == 0; }

}  // namespace meshrl::mesh

// InProcessClient: a CoordinatorClient (mesh/coordinator_client.h) that calls a mesh::Coordinator
// in this process, with no gRPC and no sockets, so node and coordinator logic are tested
// together. It answers as the gRPC service and client do (src/rpc/coordinator_service.cpp,
// src/rpc/grpc_client.cpp): a refusal of a download is kInvalidArgument carrying the
// coordinator's reason, a download declaring more than max_bytes is kDataLoss, a watch on an
// unknown session fails with "not joined", a payload is read up to one byte past what its header
// declared, and bytes served are counted at the coordinator.
//
// Switches for tests: set_reachable(false) turns every call into a transport failure (kIoError),
// as a partition would; close() ends open watches and fails every later call the same way.
// calls(method) counts the attempts per method ("join", "submit", ...). Thread-safe.
//   #include "support/in_process_client.h"
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "core/status.h"
#include "mesh/coordinator.h"
#include "mesh/coordinator_client.h"

namespace meshrl::test_support {

namespace v1 = ::meshrl::v1;

class InProcessClient : public mesh::CoordinatorClient {
 public:
  explicit InProcessClient(mesh::Coordinator& coordinator) : coord_(coordinator) {}

  void set_reachable(bool reachable) { reachable_ = reachable; }
  void close() { closed_ = true; }
  int calls(const std::string& method) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(method);
    return it == calls_.end() ? 0 : it->second;
  }

  Result<v1::JoinReply> join(const v1::JoinRequest& req) override {
    MESHRL_RETURN_IF_ERROR(attempt("join"));
    return coord_.join(req, "in-process");
  }
  Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest& req) override {
    MESHRL_RETURN_IF_ERROR(attempt("heartbeat"));
    return coord_.heartbeat(req);
  }
  Result<v1::LeaveReply> leave(const v1::LeaveRequest& req) override {
    MESHRL_RETURN_IF_ERROR(attempt("leave"));
    return coord_.leave(req);
  }
  Result<mesh::Download> download_weights(const std::string& name, uint64_t session, int64_t version, uint64_t max_bytes) override {
    MESHRL_RETURN_IF_ERROR(attempt("download_weights"));
    return serve(name, coord_.weights(name, session, version), max_bytes, /*full=*/true);
  }
  Result<mesh::Download> download_base(const std::string& name, uint64_t session, uint64_t max_bytes) override {
    MESHRL_RETURN_IF_ERROR(attempt("download_base"));
    return serve(name, coord_.base_weights(name, session), max_bytes, /*full=*/true);
  }
  Result<mesh::Download> get_broadcast(const std::string& name, uint64_t session, int64_t version, uint64_t max_bytes) override {
    MESHRL_RETURN_IF_ERROR(attempt("get_broadcast"));
    return serve(name, coord_.broadcast(name, session, version), max_bytes, /*full=*/false);
  }
  Result<v1::SubmitReply> submit(const v1::UpdateHeader& header, const std::string& payload) override {
    MESHRL_RETURN_IF_ERROR(attempt("submit"));
    // The service reads at most one byte past the declared size: enough to refuse a larger payload.
    const uint64_t cap = header.declared_bytes() < payload.size() ? header.declared_bytes() + 1 : payload.size();
    return coord_.submit(header, payload.substr(0, cap));
  }
  Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer& answer) override {
    MESHRL_RETURN_IF_ERROR(attempt("answer_audit"));
    return coord_.answer_audit(answer);
  }
  Status watch(const std::string& name, uint64_t session,
               const std::function<bool(const v1::VersionAnnouncement&)>& on_version) override {
    MESHRL_RETURN_IF_ERROR(attempt("watch"));
    if (!coord_.session_valid(name, session))
      return io_error("[in-process] WatchVersions: not joined (unknown session or lease expired); join again");
    int64_t after = -1;
    while (true) {
      auto a = coord_.wait_version(after, 0.1);
      if (closed_ || !reachable_) return io_error("[in-process] WatchVersions: the stream broke");
      if (!a) {
        if (coord_.fatal()) return io_error("[in-process] WatchVersions: coordinator stopped");
        continue;
      }
      if (!on_version(*a)) return Status::ok();
      after = a->version();
      if (a->finished()) return Status::ok();
    }
  }

 private:
  Status attempt(const char* method) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++calls_[method];
    }
    if (closed_) return io_error(std::string("[in-process] ") + method + ": the client is closed");
    if (!reachable_) return io_error(std::string("[in-process] ") + method + ": coordinator unreachable");
    return Status::ok();
  }

  Result<mesh::Download> serve(const std::string& name, Result<mesh::Coordinator::Blob> blob, uint64_t max_bytes, bool full) {
    if (!blob.is_ok()) return invalid_argument(blob.status().message());
    const mesh::Coordinator::Blob& b = blob.value();
    if (b.bytes->size() > max_bytes)
      return data_loss("[in-process] the coordinator declares " + std::to_string(b.bytes->size()) + " bytes, more than the " +
                       std::to_string(max_bytes) + " this node's model can encode to; refused");
    coord_.count_bytes_down(name, b.bytes->size(), full);
    return mesh::Download{*b.bytes, b.version, b.hash};
  }

  mesh::Coordinator& coord_;
  std::atomic<bool> reachable_{true};
  std::atomic<bool> closed_{false};
  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
};

}  // namespace meshrl::test_support

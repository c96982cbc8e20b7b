// A node's membership of a run. See node_session.h.
#include "mesh/node_session.h"

#include <algorithm>
#include <chrono>

#include "mesh/protocol.h"

namespace meshrl::mesh {

NodeSession::NodeSession(CoordinatorClient& client, const NodeOptions& options, std::string public_key, NodeTally& tally,
                         const std::atomic<bool>* stop)
    : client_(client), o_(options), public_key_(std::move(public_key)), tally_(tally), stop_ext_(stop) {}

std::string NodeSession::run_id() const {
  std::lock_guard<std::mutex> lk(mu_);
  return run_id_;
}

void NodeSession::request_stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
}

Status NodeSession::backoff(double& delay, const std::string& why) {
  if (seconds_without_contact() > o_.give_up_s)
    return io_error("[node " + o_.name + "] no contact with the coordinator for " + std::to_string(static_cast<int>(o_.give_up_s)) +
                    " s: " + why);
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::duration<double>(delay), [this] { return stopping(); });
  delay = std::min(delay * 2, o_.max_backoff_s);
  if (stopping()) return io_error("[node " + o_.name + "] stopped");
  return Status::ok();
}

Result<v1::JoinReply> NodeSession::join() {
  v1::JoinRequest req;
  req.set_protocol_version(kProtocolVersion);
  req.set_name(o_.name);
  req.set_device(o_.device);
  req.set_threads(o_.threads);
  req.set_tokens_per_s(tally_.tokens_per_s());
  req.set_run_id(run_id());
  req.set_model_config_hash(model_hash_);
  req.set_signing_key(public_key_);
  double delay = 0.2;
  last_contact_ = std::max(last_contact_.load(), steady_now_s());
  while (true) {
    auto r = client_.join(req);
    if (r.is_ok()) {
      mark_contact();
      if (r.value().accepted() && r.value().protocol_version() != kProtocolVersion)
        return invalid_argument("[node " + o_.name + "] the coordinator speaks protocol version " +
                                std::to_string(r.value().protocol_version()) + ", this node " + std::to_string(kProtocolVersion) +
                                "; run the same meshrl release on every machine");
      if (r.value().accepted()) {
        const std::string run = r.value().manifest().run_id();
        {
          std::lock_guard<std::mutex> lk(mu_);
          run_id_ = run;
        }
        session_ = r.value().session();
        tally_.count([&](NodeCounters& c) {
          c.name = o_.name;
          c.run_id = run;
        });
        log("joined run " + run + " at version " + std::to_string(r.value().manifest().current_version()));
        return r;
      }
      const std::string& why = r.value().reason();
      // A name still held by our own earlier session (we crashed) frees when its lease expires,
      // and a join refused for the rate is tried again after the backoff.
      if (why.find("already joined") == std::string::npos && why.rfind("rate_limited", 0) != 0)
        return invalid_argument("[node " + o_.name + "] join refused: " + why);
      log("join refused, retrying: " + why);
    } else if (r.status().code() == StatusCode::kInvalidArgument) {
      return invalid_argument("[node " + o_.name + "] join refused: " + r.status().message());  // e.g. revoked
    } else {
      log("join: " + r.status().message());
    }
    MESHRL_RETURN_IF_ERROR(backoff(delay, r.is_ok() ? r.value().reason() : r.status().message()));
  }
}

Status NodeSession::rejoin(uint64_t failed_session) {
  std::lock_guard<std::mutex> lk(join_mu_);
  if (session_ != failed_session) return Status::ok();
  return join().status();
}

void NodeSession::leave(bool report_progress) {
  v1::LeaveRequest lr;
  lr.set_name(o_.name);
  lr.set_session(session_);
  if (report_progress) *lr.mutable_progress() = tally_.progress();
  (void)client_.leave(lr);
}

}  // namespace meshrl::mesh

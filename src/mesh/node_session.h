// NodeSession: a node's membership of a run, as the coordinator sees it. Joins (retrying a name
// still held by an earlier session of ours, or a join refused for the rate, with backoff), joins
// again when a call is refused "not joined" (the coordinator restarted, or the lease expired),
// retries transport failures with backoff (with_retry), gives up after give_up_s without
// contact, and leaves with or without the node's progress (node_tally.h). The heartbeats and the
// watch on version announcements run beside it (node_watch.h).
//
// Threads: every method is safe from any thread (the uploader and the fetcher call with_retry
// beside the trainer in overlap mode; the watch rejoins from its own thread).
// Knows nothing about weights, codecs or training.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/status.h"
#include "mesh/coordinator_client.h"
#include "mesh/node.h"
#include "mesh/node_tally.h"

namespace meshrl::mesh {

class NodeSession {
 public:
  // options: name, device, threads, max_backoff_s, give_up_s and log (outlive the session).
  // public_key: the node's Ed25519 key, registered at every join. stop: the caller's stop flag
  // (may be null; it is polled, not waited on).
  NodeSession(CoordinatorClient& client, const NodeOptions& options, std::string public_key, NodeTally& tally,
              const std::atomic<bool>* stop);

  // Joins, retrying "already joined" (our own earlier session, until its lease expires),
  // "rate_limited" and transport failures with backoff. Fails on any other refusal, on another
  // protocol version, or after give_up_s without contact.
  Result<v1::JoinReply> join();
  // Joins again unless another thread already did since `failed_session` was refused.
  Status rejoin(uint64_t failed_session);
  // Sent with every later join: the model's config hash, once the node has checked it.
  void set_model_hash(const std::string& hash) { model_hash_ = hash; }

  // Runs a network call until it succeeds: rejoins on "not joined" (kInvalidArgument) and backs
  // off on transport errors (kIoError); any other failure is returned as it is. `call` reads
  // session() itself, so a retry after a rejoin carries the new session.
  template <typename Call>
  auto with_retry(const char* what, Call call) -> decltype(call());
  // Sleeps `delay` (waking early on request_stop) and doubles it up to max_backoff_s. Fails once
  // give_up_s passed without contact, or when stopping.
  Status backoff(double& delay, const std::string& why);
  // Tells the coordinator the node is gone; with its progress when report_progress. The answer
  // is not needed: a lease that runs out says the same.
  void leave(bool report_progress);

  // The node is shutting down: every backoff wakes and fails, and stopping() is true from now on.
  void request_stop();
  bool stopping() const { return quit_ || (stop_ext_ && stop_ext_->load()); }
  void mark_contact() { last_contact_ = steady_now_s(); }
  double seconds_without_contact() const { return steady_now_s() - last_contact_; }
  uint64_t session() const { return session_; }
  std::string run_id() const;
  const NodeOptions& options() const { return o_; }
  const std::string& name() const { return o_.name; }
  CoordinatorClient& client() { return client_; }
  void log(const std::string& line) const {
    if (o_.log) o_.log(line);
  }

 private:
  CoordinatorClient& client_;
  const NodeOptions& o_;
  const std::string public_key_;
  NodeTally& tally_;
  const std::atomic<bool>* stop_ext_;
  std::atomic<bool> quit_{false};
  std::atomic<uint64_t> session_{0};
  std::string model_hash_;          // set before the watch starts, read by later joins
  std::mutex join_mu_;              // one join at a time
  std::atomic<double> last_contact_{0};
  mutable std::mutex mu_;           // run_id_, and the condition a backoff sleeps on
  std::condition_variable cv_;
  std::string run_id_;
};

template <typename Call>
auto NodeSession::with_retry(const char* what, Call call) -> decltype(call()) {
  double delay = 0.2;
  while (true) {
    const uint64_t used = session_;
    auto r = call();
    if (r.is_ok()) {
      mark_contact();
      return r;
    }
    const Status& s = r.status();
    if (s.code() == StatusCode::kInvalidArgument && is_not_joined(s.message())) {
      log(std::string(what) + ": " + s.message());
      MESHRL_RETURN_IF_ERROR(rejoin(used));
      continue;
    }
    if (s.code() != StatusCode::kIoError) return s;
    log(std::string(what) + ": " + s.message() + "; retrying");
    MESHRL_RETURN_IF_ERROR(backoff(delay, s.message()));
  }
}

}  // namespace meshrl::mesh

// Coordinator: the one process of a run that holds the global weights theta_v, admits nodes,
// validates and aggregates their updates, and publishes each new version durably
// (store/run_store.h) before announcing it. Transport-free: the gRPC service
// (src/rpc/coordinator_service.cpp) and tests call these methods with the protocol's messages
// (proto/meshrl.proto) and send back what they return. Thread-safe: one mutex over all of it.
//
// An orchestrator over rooms, each with its contract in its header and its own unit tests:
//   membership.h        joins, sessions, leases, signing keys, NodeRecords, who a resume waits for
//   update_ingest.h     the ordered checks of an arriving update -> a typed refusal or an admission
//   audit_desk.h        reward audits: draws, updates held until their answer, the exclusion tally
//   version_builder.h   the open round and the arithmetic of its close (aggregate ... hash)
//   version_blobs.h     weights, broadcasts and the [lora] base served to nodes; byte counters
//   run_model.h         the policy on the CPU, theta, the hashes and sizes the wire checks against
//   run_manifest.h      what a node is told at its join
//   coordinator_startup.h/.cpp   new run, resume, re-admitting pending updates
//   coordinator_audits.cpp       answer_audit and audit outcomes written to the ledger
// Where things happen, in this folder:
//   an update is admitted   coordinator.cpp submit(): UpdateIngest::check (update_ingest.cpp, the
//                           order of every refusal) -> spool (fsync) -> ledger.record_received ->
//                           audit desk (held) or count_in_round (fresh: aggregated now; stale:
//                           held in the book until the close) -> ack
//   a round closes          coordinator.cpp round_loop() -> close_round(): VersionBuilder::build
//                           (version_builder.cpp: fold held stale updates -> aggregate -> outer
//                           Nesterov step -> delta + error feedback -> encode -> decode -> apply ->
//                           hash) -> store.write_version -> ledger.commit_round -> announce
//                           (wait_version / WatchVersions)
// Sync mode closes at quorum or deadline (round.h); async mode as soon as one update is in. A crash
// anywhere resumes (CoordinatorOptions.resume) at the ledger's current version with every
// still-pending update re-aggregated (coordinator_startup.cpp readmit_pending).
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "meshrl.pb.h"
#include "mesh/audit_desk.h"
#include "mesh/coordinator_startup.h"
#include "mesh/membership.h"
#include "mesh/mesh_config.h"
#include "mesh/reject_code.h"
#include "mesh/run_model.h"
#include "mesh/update_ingest.h"
#include "mesh/version_blobs.h"
#include "mesh/version_builder.h"
#include "rl/sft.h"
#include "store/run_store.h"

namespace meshrl::mesh {

namespace v1 = ::meshrl::v1;

// What the coordinator reports after each version (progress lines, the demo's summary).
struct VersionReport {
  int64_t version = 0;
  std::string hash;
  std::string closed_by;           // quorum, deadline, async
  int64_t n_updates = 0;
  double mean_staleness = 0;
  double reward_mean = 0;          // mean of the applied updates' reported rewards
  double kl_mean = 0;              // mean of the applied updates' reported KL and entropy
  double entropy_mean = 0;
  int64_t samples = 0;             // completions behind the applied updates
  int64_t nodes_online = 0;
  uint64_t bytes_up = 0;           // cumulative update payload bytes received
  uint64_t bytes_down = 0;         // cumulative weights + broadcast bytes served
  uint64_t broadcast_bytes = 0;    // this version's encoded delta
  std::optional<double> pass_at_1; // when evaluated at this version
  double seconds = 0;              // since the coordinator started
};

struct CoordinatorOptions {
  std::filesystem::path run_dir;
  bool resume = false;             // open run_dir (else create a new run there)
  MeshRunConfig config;            // ignored on resume: the run's own config is read back
  std::function<void(const std::string&)> log;
  std::function<void(const VersionReport&)> on_version;
  std::function<void(const rl::SftProgress&)> on_sft_step;  // while training the warm start
};

class Coordinator {
 public:
  // Seconds of clock skew a node's seq (microseconds since the epoch) may run ahead of ours.
  static constexpr double kMaxSeqSkewS = UpdateIngest::kMaxSeqSkewS;
  // Joins per minute under one name: a node restarting in a loop cannot flood the ledger.
  static constexpr int64_t kMaxJoinsPerMinute = Membership::kMaxJoinsPerMinute;
  // New run: SFT warm start (cached), initial weights = version 0, run directory created.
  // Resume: reopens run_dir at the ledger's current version and re-aggregates pending updates.
  static Result<std::unique_ptr<Coordinator>> start(CoordinatorOptions options);
  ~Coordinator();  // stop()

  v1::JoinReply join(const v1::JoinRequest& req, const std::string& peer);
  v1::HeartbeatReply heartbeat(const v1::HeartbeatRequest& req);
  v1::LeaveReply leave(const v1::LeaveRequest& req);
  // True when `session` is the live session of `name` (renews its lease). The service asks before
  // it opens a stream or reads an upload's payload, so a made-up session costs no thread or buffer.
  bool session_valid(const std::string& name, uint64_t session);

  // An encoded blob (weights of a version, or the delta version-1 -> version) and the content
  // hash of the weights at that version. Refused (kInvalidArgument, a reason for the node) on an
  // unknown session or version.
  using Blob = VersionBlob;
  Result<Blob> weights(const std::string& name, uint64_t session, int64_t version);
  Result<Blob> broadcast(const std::string& name, uint64_t session, int64_t version);
  // [lora] runs: the frozen base under the adapters (fp32, hash = the manifest's base_weights_hash),
  // for a node that does not hold it. Refused in a full-weight run.
  Result<Blob> base_weights(const std::string& name, uint64_t session);
  // Bytes actually sent of a blob (the service counts what it streams); full = weights, else a broadcast.
  void count_bytes_down(const std::string& name, uint64_t n, bool full);

  // Largest payload an update of this run may declare (its fp32 size plus headroom).
  uint64_t max_update_bytes() const { return model_.max_update_bytes; }
  // `payload` as received: larger than declared or shorter (a truncated upload) is refused here.
  v1::SubmitReply submit(const v1::UpdateHeader& header, const std::string& payload);
  // The node's answer to the audit of one of its updates (SubmitReply.audit): re-scores the drawn
  // rollouts; passed -> the held update enters the open round; failed -> it is rejected
  // (audit_failed), the node flagged, and excluded after [mesh] audit_exclude_after failures.
  v1::AuditVerdict answer_audit(const v1::AuditAnswer& answer);

  // The current announcement at once when version > after_version or finished, else waits up to
  // timeout_s for a new version. Returns nullopt on timeout or stop().
  std::optional<v1::VersionAnnouncement> wait_version(int64_t after_version, double timeout_s);

  bool finished() const;
  // Every node that joined has left, or its lease expired (the run can shut down).
  bool all_nodes_gone() const;
  int64_t version() const;
  std::string hash() const;
  const std::string& run_id() const { return run_id_; }
  const MeshRunConfig& config() const { return config_; }
  int64_t param_count() const { return model_.param_count; }
  std::map<std::string, NodeRecord> nodes() const;
  // Who holds a lease now, and how long ago each renewed it (dashboards; read-only).
  using LeaseView = mesh::LeaseView;
  std::vector<LeaseView> leases() const;
  uint64_t bytes_up() const;
  uint64_t bytes_down() const;
  uint64_t bytes_down_full() const;  // the part of bytes_down that was full weights (joins, re-syncs)
  store::RunStore& store() { return *store_; }
  // A fatal error (disk) stopped the round loop; the process should exit and be resumed.
  std::optional<Status> fatal() const;

  // Held-out pass@1 of the current weights with the run's [eval] options (n_eval problems).
  // on_progress (may be empty) gets generated rows of the total; it runs under the coordinator's
  // lock, so it must not call back into the coordinator.
  Result<double> evaluate_current(int64_t n_eval, std::function<void(int64_t rows_done, int64_t rows_total)> on_progress = {});

  void stop();

 private:
  Coordinator() = default;
  // Start-up (coordinator_startup.cpp).
  Status init_new(CoordinatorOptions& o);
  Status init_resume(CoordinatorOptions& o);
  Status load_common(const std::string& policy_spec);  // the model and the rooms, once run_id_ is known
  Status readmit_pending();

  void round_loop();
  // Under mu_. nodes_online: the count the round's close was judged against (async scaling, round.h).
  Status close_round(CloseReason reason, int64_t nodes_online);
  void expire_leases(double now);                    // under mu_: drops them and writes lease_expired
  // Answers "<code>: <detail>"; record: a row under the key (a retry gets the same answer), else a node event.
  v1::SubmitReply reject(const store::UpdateKey& key, RejectCode code, const std::string& detail, bool record);  // under mu_
  // Places an acknowledged update in the open round as the book decided (fresh: aggregated now;
  // stale: held for the close; a superseded entry is rejected in the ledger). Under mu_.
  Status count_in_round(const RoundEntry& e, const BookDecision& d, const NamedTensors& u, double norm);
  // Audits (coordinator_audits.cpp). One outcome into the tally, the node's record and the ledger
  // (flagged / excluded events). Under mu_.
  void record_audit(const std::string& node, bool passed, const std::string& detail);
  void expire_audits(double now);                    // under mu_: unanswered past their deadline = failed
  void log(const std::string& line) const;

  CoordinatorOptions opts_;
  MeshRunConfig config_;
  std::string run_id_;
  RunModel model_;                           // policy, task, theta (views into the policy), hashes, sizes
  std::unique_ptr<store::RunStore> store_;
  // The rooms (see the top of this file).
  std::unique_ptr<Membership> members_;
  std::unique_ptr<UpdateIngest> ingest_;
  std::unique_ptr<AuditDesk> audits_;
  std::unique_ptr<VersionBuilder> round_;
  VersionBlobs blobs_;

  mutable std::mutex mu_;
  std::condition_variable version_cv_;       // a new version, a new update (wakes the round loop), stop
  int64_t version_ = 0;
  std::string hash_;
  bool finished_ = false;
  bool stopping_ = false;
  std::optional<Status> fatal_;
  double t0_ = 0;
  std::thread loop_;
};

// Seconds on a monotonic clock (leases, deadlines).
double mono_seconds();

}  // namespace meshrl::mesh

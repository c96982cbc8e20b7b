// Coordinator: the one process of a run that holds the global weights theta_v, the outer
// optimizer and the round, admits nodes, validates and aggregates their updates, and publishes
// each new version durably (store/run_store.h) before announcing it. Transport-free: the gRPC
// service (src/rpc/coordinator_service.cpp) and tests call these methods with the protocol's
// messages (proto/meshrl.proto) and send back what they return. Thread-safe (one mutex).
//
// One round, sync mode (round.h decides when it closes):
//   submit: session -> rate limit (every attempt, before anything is written) -> protocol, sizes ->
//           run id + Ed25519 signature over every claimed field (update_signature.h) ->
//           ledger lookup (a retry gets the recorded outcome) -> seq above the node's last
//           accepted one and not ahead of our clock (replay, seq_ahead) -> staleness and samples
//           bound (round.h) -> one vote per node per round (round_book.h) -> decode (finite) +
//           layout + norm bound (refusals written to the ledger) ->
//           spool (fsync) -> ledger.record_received -> the round's book (fresh: accumulated now,
//           weight = samples x staleness; stale: held until the close) -> ack
//   close:  fold in the held stale updates (from the spool) -> aggregate ([mesh] aggregator) -> outer Nesterov step -> delta + error-feedback residual -> encode
//           (the run's codec) -> decode -> apply exactly the decoded delta to theta -> hash ->
//           store.write_version -> ledger.commit_round -> announce (WatchVersions)
// In async mode a round closes as soon as one update is in. A crash anywhere resumes (resume())
// at the ledger's current version with every still-pending update re-aggregated.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "meshrl.pb.h"
#include "mesh/aggregate.h"
#include "mesh/codec.h"
#include "mesh/error_feedback.h"
#include "mesh/mesh_config.h"
#include "mesh/named_tensors.h"
#include "mesh/outer_optimizer.h"
#include "mesh/reject_code.h"
#include "mesh/reward_audit.h"
#include "mesh/robust_aggregate.h"
#include "mesh/round.h"
#include "mesh/round_book.h"
#include "mesh/update_guard.h"
#include "rl/sft.h"
#include "rollout/policy.h"
#include "store/run_store.h"
#include "tasks/task.h"

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

struct NodeRecord {
  std::string name;
  int64_t updates_applied = 0;
  int64_t updates_rejected = 0;
  int64_t samples_applied = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  v1::NodeProgress last_progress;  // from its last heartbeat or leave
  bool left = false;               // left cleanly after the run finished
  int64_t audits_passed = 0;       // reward audits (reward_audit.h)
  int64_t audits_failed = 0;
  bool excluded = false;           // failed [mesh] audit_exclude_after audits: its updates are refused
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
  static constexpr double kMaxSeqSkewS = 600;
  // Joins per minute under one name: a node restarting in a loop cannot flood the ledger.
  static constexpr int64_t kMaxJoinsPerMinute = 30;
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
  struct Blob {
    std::shared_ptr<const std::string> bytes;
    int64_t version = 0;
    std::string hash;
  };
  Result<Blob> weights(const std::string& name, uint64_t session, int64_t version);
  Result<Blob> broadcast(const std::string& name, uint64_t session, int64_t version);
  // [lora] runs: the frozen base under the adapters (fp32, hash = the manifest's base_weights_hash),
  // for a node that does not hold it. Refused in a full-weight run.
  Result<Blob> base_weights(const std::string& name, uint64_t session);
  // Bytes actually sent of a blob (the service counts what it streams); full = weights, else a broadcast.
  void count_bytes_down(const std::string& name, uint64_t n, bool full);

  // Largest payload an update of this run may declare (its fp32 size plus headroom).
  uint64_t max_update_bytes() const { return max_update_bytes_; }
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
  int64_t param_count() const { return param_count_; }
  std::map<std::string, NodeRecord> nodes() const;
  // Who holds a lease now, and how long ago each renewed it (dashboards; read-only).
  struct LeaseView {
    std::string name;
    double last_seen_age_s = 0;
    double joined_age_s = 0;
  };
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
  struct Member {
    uint64_t session = 0;
    double last_seen = 0;
    double joined_at = 0;
  };
  Status init_new(CoordinatorOptions& o);
  Status init_resume(CoordinatorOptions& o);
  Status load_common(const std::string& spec);
  Status readmit_pending();
  void round_loop();
  // Under mu_. nodes_online: the count the round's close was judged against (async scaling, round.h).
  Status close_round(CloseReason reason, int64_t nodes_online);
  void expire_leases(double now);                    // under mu_
  bool session_ok(const std::string& name, uint64_t session);  // under mu_; renews the lease
  // Answers "<code>: <detail>"; record: a row under the key (a retry gets the same answer), else a node event.
  v1::SubmitReply reject(const store::UpdateKey& key, RejectCode code, const std::string& detail, bool record);  // under mu_
  v1::Manifest manifest() const;                     // under mu_
  int64_t schedule_step() const;                     // under mu_: see Manifest.schedule_step
  // Places an acknowledged update in the open round as the book decided (fresh: aggregated now;
  // stale: held for the close; a superseded entry is rejected in the ledger). Under mu_.
  Status count_in_round(const RoundEntry& e, const BookDecision& d, const NamedTensors& u, double norm);
  // The book's entry for an update (stats only when the node sent them). Under mu_.
  static RoundEntry round_entry(const store::UpdateKey& key, const Admission& a, int64_t n_samples, const v1::RewardStats* stats);

  // One audit outcome into the tally, the node's record and the ledger (flagged / excluded events). Under mu_.
  void record_audit(const std::string& node, bool passed, const std::string& detail);
  void expire_audits(double now);                    // under mu_: unanswered past their deadline = failed
  void log(const std::string& line) const;

  CoordinatorOptions opts_;
  MeshRunConfig config_;
  RoundRules rules_;
  std::string run_id_, model_spec_, model_config_json_, model_config_hash_, tokenizer_hash_;
  std::string base_weights_hash_;  // [lora] runs: the frozen base under the adapters ("" otherwise)
  NamedTensors base_params_;       // [lora] runs: views of that base
  std::shared_ptr<const std::string> base_blob_;  // base_params_ encoded (lazy)
  int64_t param_count_ = 0;
  uint64_t max_update_bytes_ = 0;
  UpdateDecodeLimits limits_;
  std::unique_ptr<store::RunStore> store_;
  rollout::Policy policy_;                  // theta_ are views into its parameters
  std::shared_ptr<const tasks::Task> task_;
  NamedTensors theta_;
  std::unique_ptr<OuterOptimizer> outer_;
  ErrorFeedback ef_;
  std::unique_ptr<UpdateCodec> codec_;            // the nodes' updates
  std::unique_ptr<UpdateCodec> broadcast_codec_;  // the broadcast deltas ([mesh] broadcast_codec, else codec_'s)
  std::unique_ptr<UpdateCodec> weights_codec_;    // fp32, no zstd

  mutable std::mutex mu_;
  std::condition_variable version_cv_;
  int64_t version_ = 0;
  std::string hash_;
  bool finished_ = false;
  bool stopping_ = false;
  std::optional<Status> fatal_;
  std::shared_ptr<const std::string> weights_blob_;  // encoded theta at version_ (lazy)
  std::map<int64_t, Blob> broadcasts_;  // recent ones, with the hash of the version they lead to
  std::map<std::string, Member> members_;
  std::map<std::string, std::string> signing_keys_;  // node -> Ed25519 public key registered at its last join
  std::map<std::string, NodeRecord> records_;
  std::set<std::string> ever_joined_;
  // After a resume, the nodes of the last round count towards the quorum until they are back or
  // a lease has passed: otherwise the first node to reconnect would close rounds on its own.
  std::set<std::string> expected_;
  std::set<std::string> not_left_;  // after a resume: nodes the ledger shows joined and not left
  double grace_until_ = 0;
  // The open round.
  OpenRound round_;
  std::unique_ptr<Aggregator> acc_;           // [mesh] aggregator: mean (O(P)) or a robust rule (O(N P))
  std::unique_ptr<NormBound> norm_bound_;     // ingest: norm within factor x running median
  std::unique_ptr<RateLimiter> rate_;         // ingest: update attempts per node per minute, refusals included
  std::unique_ptr<RateLimiter> join_rate_;    // joins per name per minute
  // Reward audits: on only for shared tasks (or audit_private). An audited update is spooled and
  // acknowledged but held out of the round until its audit answer passes.
  bool audit_on_ = false;
  uint64_t audit_secret_ = 0;                 // drawn per process: nodes cannot predict which updates or rollouts
  std::unique_ptr<AuditTally> audits_;
  struct HeldUpdate {
    store::UpdateKey key;
    NamedTensors update;
    double norm = 0;
    int64_t n_samples = 0;
    v1::RewardStats stats;
    AuditClaim claim;
    double deadline = 0;                      // mono_seconds
  };
  std::map<std::string, HeldUpdate> held_;    // by key.str()
  RoundBook book_;                            // what the open round counts, one vote per node
  uint64_t bytes_up_ = 0, bytes_down_ = 0, bytes_down_full_ = 0;
  double t0_ = 0;
  std::thread loop_;
};

// Seconds on a monotonic clock (leases, deadlines).
double mono_seconds();

}  // namespace meshrl::mesh

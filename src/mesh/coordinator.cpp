// The coordinator's orchestration: each call takes the lock, asks the rooms, and does the writes
// (ledger, spool, run directory) in the order the run's durability needs. See coordinator.h.
#include "mesh/coordinator.h"

#include <chrono>
#include <cstdio>

#include "core/fault_point.h"
#include "mesh/protocol.h"
#include "mesh/robust_aggregate.h"
#include "mesh/run_manifest.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {

using store::UpdateKey;

double mono_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

// The coordinator's state as UpdateIngest::check sees it (under the coordinator's lock).
class LiveIngestState final : public IngestState {
 public:
  LiveIngestState(Membership& m, const store::Ledger& l, const AuditDesk& a, const VersionBuilder& r, const NamedTensors& layout,
                  int64_t version, bool finished)
      : m_(m), l_(l), a_(a), r_(r), layout_(layout), version_(version), finished_(finished) {}
  bool session_ok(const std::string& node, uint64_t session) override { return m_.session_ok(node, session, mono_seconds()); }
  const std::string& signing_key(const std::string& node) const override { return m_.signing_key(node); }
  Result<std::optional<store::UpdateRow>> find(const UpdateKey& key) const override { return l_.find(key); }
  Result<std::optional<int64_t>> last_accepted_seq(const std::string& node) const override { return l_.last_accepted_seq(node); }
  bool excluded(const std::string& node) const override { return a_.excluded(node); }
  int64_t version() const override { return version_; }
  bool finished() const override { return finished_; }
  BookDecision offer(const RoundEntry& e) const override { return r_.offer(e); }
  const NamedTensors& layout() const override { return layout_; }

 private:
  Membership& m_;
  const store::Ledger& l_;
  const AuditDesk& a_;
  const VersionBuilder& r_;
  const NamedTensors& layout_;
  int64_t version_;
  bool finished_;
};

std::string share_text(double share) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", share);
  return b;
}

}  // namespace

Result<std::unique_ptr<Coordinator>> Coordinator::start(CoordinatorOptions o) {
  std::unique_ptr<Coordinator> c(new Coordinator());
  c->t0_ = mono_seconds();
  c->opts_ = o;
  MESHRL_RETURN_IF_ERROR(o.resume ? c->init_resume(o) : c->init_new(o));
  c->loop_ = std::thread([p = c.get()] { p->round_loop(); });
  return c;
}

Coordinator::~Coordinator() { stop(); }

void Coordinator::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  version_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void Coordinator::log(const std::string& line) const {
  if (opts_.log) opts_.log(line);
}

v1::JoinReply Coordinator::join(const v1::JoinRequest& req, const std::string& peer) {
  v1::JoinReply r;
  r.set_protocol_version(kProtocolVersion);
  std::lock_guard<std::mutex> lk(mu_);
  const double now = mono_seconds();
  expire_leases(now);
  const JoinDecision d = members_->join(req, run_id_, model_.config_hash, now);
  if (!d.accepted) {
    r.set_accepted(false);
    r.set_reason(d.reason);
    if (d.rate_limited) return r;  // nothing written: a loop of joins cannot grow the ledger
    (void)store_->ledger().node_event(d.node, "join_refused", d.reason + " (peer " + peer + ")");
    log("refused join of '" + d.node + "': " + d.reason);
    return r;
  }
  if (d.replaced_key)
    (void)store_->ledger().node_event(req.name(), "signing_key_changed", trust::to_hex(*d.replaced_key) + " -> " + trust::to_hex(req.signing_key()));
  nlohmann::json detail = {{"device", req.device()}, {"threads", req.threads()}, {"tokens_per_s", req.tokens_per_s()},
                           {"peer", peer}, {"version", version_}, {"signing_key", trust::to_hex(req.signing_key())}};
  (void)store_->ledger().node_event(req.name(), d.rejoin ? "rejoin" : "join", detail.dump());
  log(std::string(d.rejoin ? "rejoined: " : "joined: ") + req.name() + " (" + req.device() + ", " +
      std::to_string(req.threads()) + " threads) at version " + std::to_string(version_) + "; " +
      std::to_string(members_->n_online()) + " online");
  r.set_accepted(true);
  r.set_session(d.session);
  *r.mutable_manifest() = run_manifest(run_id_, config_, model_, version_, hash_, finished_,
                                        schedule_step(config_.mesh, version_, members_->records()));
  return r;
}

bool Coordinator::session_valid(const std::string& name, uint64_t session) {
  std::lock_guard<std::mutex> lk(mu_);
  return members_->session_ok(name, session, mono_seconds());
}

v1::HeartbeatReply Coordinator::heartbeat(const v1::HeartbeatRequest& req) {
  v1::HeartbeatReply r;
  std::lock_guard<std::mutex> lk(mu_);
  r.set_current_version(version_);
  r.set_finished(finished_);
  if (!members_->session_ok(req.name(), req.session(), mono_seconds())) {
    r.set_ok(false);
    r.set_reason(kNotJoinedReason);
    return r;
  }
  members_->record(req.name()).last_progress = req.progress();
  r.set_ok(true);
  return r;
}

v1::LeaveReply Coordinator::leave(const v1::LeaveRequest& req) {
  v1::LeaveReply r;
  std::lock_guard<std::mutex> lk(mu_);
  if (!members_->session_ok(req.name(), req.session(), mono_seconds())) {
    r.set_ok(false);
    return r;
  }
  members_->leave(req.name(), req.progress());
  (void)store_->ledger().node_event(req.name(), "leave",
                                    "version " + std::to_string(req.progress().version()) + " hash " + req.progress().hash());
  log("left: " + req.name() + " at version " + std::to_string(req.progress().version()) +
      (req.progress().hash() == hash_ ? " (hash ok)" : " (hash " + req.progress().hash() + " != " + hash_ + ")"));
  r.set_ok(true);
  version_cv_.notify_all();
  return r;
}

void Coordinator::expire_leases(double now) {
  for (const ExpiredLease& e : members_->expire(now)) {
    (void)store_->ledger().node_event(e.name, "lease_expired", "silent for " + std::to_string(e.silent_s) + " s");
    log("dropped: " + e.name + " (lease expired)");
  }
}

Result<Coordinator::Blob> Coordinator::weights(const std::string& name, uint64_t session, int64_t version) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!members_->session_ok(name, session, mono_seconds())) return invalid_argument(kNotJoinedReason);
  if (version == version_) return blobs_.current_weights(model_.theta, version_, hash_);
  if (version < 0 || version > version_)
    return invalid_argument("version " + std::to_string(version) + " does not exist (current is " + std::to_string(version_) + ")");
  lk.unlock();  // an old version comes from disk; the store is safe to read concurrently
  return blobs_.stored_weights(*store_, version);
}

Result<Coordinator::Blob> Coordinator::base_weights(const std::string& name, uint64_t session) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!members_->session_ok(name, session, mono_seconds())) return invalid_argument(kNotJoinedReason);
  if (model_.base_weights_hash.empty()) return invalid_argument("this run trains full weights: there is no separate frozen base to download");
  return blobs_.base(model_.base_params, model_.base_weights_hash);
}

Result<Coordinator::Blob> Coordinator::broadcast(const std::string& name, uint64_t session, int64_t version) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!members_->session_ok(name, session, mono_seconds())) return invalid_argument(kNotJoinedReason);
  if (version < 1 || version > version_)
    return invalid_argument("no broadcast for version " + std::to_string(version) + " (current is " + std::to_string(version_) + ")");
  if (auto recent = blobs_.recent_broadcast(version)) return *recent;
  lk.unlock();
  return blobs_.stored_broadcast(*store_, version);
}

void Coordinator::count_bytes_down(const std::string& name, uint64_t n, bool full) {
  std::lock_guard<std::mutex> lk(mu_);
  blobs_.count_down(n, full);
  members_->record(name).bytes_down += n;
}

v1::SubmitReply Coordinator::reject(const UpdateKey& key, RejectCode code, const std::string& detail, bool record) {
  const std::string reason = std::string(reject_code_name(code)) + ": " + detail;
  v1::SubmitReply r;
  r.set_accepted(false);
  r.set_reason(reason);
  r.set_code(reject_code_name(code));
  r.set_current_version(version_);
  if (record) (void)store_->ledger().mark_rejected(key, reason);
  else (void)store_->ledger().node_event(key.node, "update_refused", key.str() + ": " + reason);
  if (NodeRecord* nr = members_->find_record(key.node)) ++nr->updates_rejected;
  log("rejected update " + key.str() + ": " + reason);
  return r;
}

v1::SubmitReply Coordinator::submit(const v1::UpdateHeader& h, const std::string& payload) {
  const UpdateKey key{h.name().substr(0, 64), h.base_version(), h.seq()};
  // Decode outside the lock (the costly part); everything it checks is independent of state.
  UpdateArrival a;
  a.header = &h;
  a.payload_bytes = payload.size();
  Result<NamedTensors> decoded = invalid_argument("not decoded");
  const bool sizes_ok = payload.size() == h.declared_bytes() && h.declared_bytes() <= model_.max_update_bytes;
  if (sizes_ok) a.digest = trust::blake2b_256(payload);
  if (sizes_ok) decoded = round_->decode(payload, "update " + key.str());
  if (decoded.is_ok()) a.decoded = &decoded.value();
  else a.decode_error = decoded.status().message();
  a.norm = decoded.is_ok() ? update_norm(decoded.value()) : 0.0;

  std::lock_guard<std::mutex> lk(mu_);
  a.now_s = mono_seconds();
  a.now_us = 1e6 * std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  LiveIngestState state(*members_, store_->ledger(), *audits_, *round_, model_.theta, version_, finished_);
  const IngestVerdict v = ingest_->check(a, state);
  if (v.payload_counted) {
    blobs_.count_up(payload.size());
    members_->record(h.name()).bytes_up += payload.size();
  }
  v1::SubmitReply r;
  r.set_current_version(version_);
  switch (v.outcome) {
    case IngestOutcome::kNotJoined:
      r.set_accepted(false);
      r.set_reason(kNotJoinedReason);
      return r;
    case IngestOutcome::kRateLimited:  // counted, nothing written: a flood costs a map lookup each
      ++members_->record(h.name()).updates_rejected;
      r.set_accepted(false);
      r.set_code(reject_code_name(v.code));
      r.set_reason(std::string(reject_code_name(v.code)) + ": " + v.detail);
      return r;
    case IngestOutcome::kRetry:  // answer what was decided then
      r.set_duplicate(true);
      r.set_accepted(v.retry_row.state != store::UpdateState::kRejected);
      r.set_reason(v.retry_row.reason);
      return r;
    case IngestOutcome::kRefused:
      return reject(key, v.code, v.detail, v.recorded);
    case IngestOutcome::kAdmitted:
      break;
  }
  if (auto st = store_->spool_update(key.str(), payload); !st.is_ok()) return reject(key, RejectCode::kInternal, "spool: " + st.message(), false);
  auto rec = store_->ledger().record_received(key, h.n_samples(), static_cast<int64_t>(payload.size()));
  if (!rec.is_ok()) return reject(key, RejectCode::kInternal, "ledger: " + rec.status().message(), false);
  // Failed verifier calls behind an accepted update (masked on the node), counted by kind.
  if (const auto& st = h.stats(); st.verifier_timeouts() + st.verifier_crashes() + st.verifier_garbage() > 0)
    (void)store_->ledger().node_event(key.node, "verifier_failures",
                                      nlohmann::json({{"update", key.str()}, {"timeout", st.verifier_timeouts()},
                                                      {"crash", st.verifier_crashes()}, {"garbage", st.verifier_garbage()}})
                                          .dump());
  // Audited: acknowledged (it is on disk) but held out of the round until the node's answer to
  // the reward audit holds (answer_audit) or its deadline passes (expire_audits).
  if (auto q = audits_->hold_if_drawn(key, decoded.value(), a.norm, h.n_samples(), h.stats(), mono_seconds())) {
    log("auditing update " + key.str() + ": " + std::to_string(q->indices_size()) + " of " + std::to_string(h.stats().n_scored()) +
        " committed rollouts");
    *r.mutable_audit() = std::move(*q);
    r.set_accepted(true);
    return r;
  }
  // Only now, with the bytes and the row on disk, does the update count (and get acknowledged).
  if (auto st = count_in_round(v.entry, v.placed, decoded.value(), a.norm); !st.is_ok())
    return reject(key, RejectCode::kInternal, "aggregate: " + st.message(), true);
  r.set_accepted(true);
  return r;
}

Status Coordinator::count_in_round(const RoundEntry& e, const BookDecision& d, const NamedTensors& u, double norm) {
  // A fresh update is folded in now; a stale one waits in the book for the close (a fresher
  // update of its node may still take its place), and is read back from the spool then.
  if (auto st = round_->count(e, d, u); !st.is_ok()) {
    fatal_ = st;
    return st;
  }
  ingest_->accepted(norm);
  if (d.superseded) {
    (void)store_->ledger().mark_rejected(*d.superseded, std::string(reject_code_name(RejectCode::kSuperseded)) +
                                                            ": update " + e.key.str() + " of the same node is fresher");
    (void)store_->remove_spooled(d.superseded->str());
    ++members_->record(e.key.node).updates_rejected;
    log("superseded update " + d.superseded->str() + " by " + e.key.str());
  }
  version_cv_.notify_all();  // wakes the round loop
  return Status::ok();
}

Status Coordinator::close_round(CloseReason reason, int64_t nodes_online) {
  const double t_start = mono_seconds();
  MESHRL_ASSIGN_OR_RETURN(BuiltVersion b, round_->build(model_.theta, nodes_online,
                                                        [this](const std::string& key) { return store_->read_spooled(key); }));
  const std::string parent = hash_;
  const int64_t v = b.version;
  fault_point("before_persist", v);  // test-only crash points: core/fault_point.h
  MESHRL_RETURN_IF_ERROR(store_->write_version(v, b.hash, parent, {model_.theta.names, model_.theta.tensors}, round_->optimizer_state(),
                                               b.broadcast));
  fault_point("before_commit", v);
  MESHRL_RETURN_IF_ERROR(store_->ledger().commit_round(v, b.hash, b.applied, close_reason_name(reason)));
  fault_point("after_commit", v);
  for (const auto& [k, w] : b.applied) {
    (void)store_->remove_spooled(k.str());
    NodeRecord& nr = members_->record(k.node);
    nr.name = k.node;
    ++nr.updates_applied;
  }
  VersionReport rep;
  rep.version = v;
  rep.hash = b.hash;
  rep.closed_by = close_reason_name(reason);
  rep.n_updates = b.stats.n_updates;
  rep.mean_staleness = b.stats.mean_staleness;
  rep.reward_mean = b.stats.reward_mean;
  rep.kl_mean = b.stats.kl_mean;
  rep.entropy_mean = b.stats.entropy_mean;
  rep.samples = b.stats.samples;
  rep.broadcast_bytes = b.broadcast.size();

  version_ = v;
  hash_ = b.hash;
  blobs_.published(v, std::move(b.broadcast), b.hash);
  round_->reopen(v, mono_seconds());
  if (version_ >= config_.mesh.rounds) {
    finished_ = true;
    // Acknowledged updates that no round will take are answered, not forgotten (held ones too).
    audits_->clear();
    for (const store::UpdateRow& row : store_->ledger().pending()) {
      (void)store_->ledger().mark_rejected(row.key, "the run finished at version " + std::to_string(version_));
      (void)store_->remove_spooled(row.key.str());
    }
  }
  rep.nodes_online = members_->n_online();
  rep.bytes_up = blobs_.bytes_up();
  rep.bytes_down = blobs_.bytes_down();
  rep.seconds = mono_seconds() - t0_;
  log("version " + std::to_string(v) + " " + rep.hash.substr(0, 12) + " closed by " + rep.closed_by + " with " +
      std::to_string(rep.n_updates) + " update(s)" +
      (round_->rules().mode == RoundMode::kAsync ? " (" + share_text(b.share) + " of a round)" : std::string()) + " in " +
      std::to_string(static_cast<int>(1000 * (mono_seconds() - t_start))) + " ms");
  version_cv_.notify_all();
  if (opts_.on_version) opts_.on_version(rep);
  return Status::ok();
}

void Coordinator::round_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    version_cv_.wait_for(lk, std::chrono::milliseconds(100));
    if (stopping_) break;
    const double now = mono_seconds();
    expire_leases(now);
    if (finished_ || fatal_) continue;
    expire_audits(now);
    const int64_t online = members_->quorum_nodes(now, [this](const std::string& name) { return audits_->excluded(name); });
    const CloseReason why = round_->should_close(online, now);
    if (why == CloseReason::kOpen) continue;
    fault_point("after_ack", version_ + 1);  // test-only: core/fault_point.h
    if (Status st = close_round(why, online); !st.is_ok()) {
      // theta, the outer state and the residual may be half-updated: stop, and let --resume redo
      // the round from the durable version and the spooled updates.
      fatal_ = st;
      log("FATAL: closing round " + std::to_string(version_ + 1) + " failed: " + st.message() + "; restart with --resume");
      version_cv_.notify_all();
    }
  }
}

std::optional<v1::VersionAnnouncement> Coordinator::wait_version(int64_t after, double timeout_s) {
  std::unique_lock<std::mutex> lk(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!stopping_ && !fatal_ && version_ <= after && !finished_) {
    if (version_cv_.wait_until(lk, deadline) == std::cv_status::timeout) break;
  }
  if (stopping_ || fatal_ || (version_ <= after && !finished_)) return std::nullopt;
  v1::VersionAnnouncement a;
  a.set_version(version_);
  a.set_hash(hash_);
  a.set_finished(finished_);
  return a;
}

// Read-only views, each under the lock.
bool Coordinator::finished() const { std::lock_guard<std::mutex> lk(mu_); return finished_; }
bool Coordinator::all_nodes_gone() const { std::lock_guard<std::mutex> lk(mu_); return members_->all_nodes_gone(); }
int64_t Coordinator::version() const { std::lock_guard<std::mutex> lk(mu_); return version_; }
std::string Coordinator::hash() const { std::lock_guard<std::mutex> lk(mu_); return hash_; }
std::map<std::string, NodeRecord> Coordinator::nodes() const { std::lock_guard<std::mutex> lk(mu_); return members_->records(); }
std::vector<Coordinator::LeaseView> Coordinator::leases() const { std::lock_guard<std::mutex> lk(mu_); return members_->leases(mono_seconds()); }
uint64_t Coordinator::bytes_up() const { std::lock_guard<std::mutex> lk(mu_); return blobs_.bytes_up(); }
uint64_t Coordinator::bytes_down() const { std::lock_guard<std::mutex> lk(mu_); return blobs_.bytes_down(); }
uint64_t Coordinator::bytes_down_full() const { std::lock_guard<std::mutex> lk(mu_); return blobs_.bytes_down_full(); }
std::optional<Status> Coordinator::fatal() const { std::lock_guard<std::mutex> lk(mu_); return fatal_; }

Result<double> Coordinator::evaluate_current(int64_t n_eval, std::function<void(int64_t, int64_t)> on_progress) {
  std::lock_guard<std::mutex> lk(mu_);
  return evaluate_run_model(model_, config_, n_eval, std::move(on_progress));
}

}  // namespace meshrl::mesh

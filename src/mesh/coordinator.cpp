// The coordinator's state machine. See coordinator.h.
#include "mesh/coordinator.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "core/check.h"
#include "core/fault_point.h"
#include "mesh/content_hash.h"
#include "mesh/policy_params.h"
#include "mesh/protocol.h"
#include "mesh/update_signature.h"
#include "model/config.h"
#include "model/device.h"
#include "rl/evaluate.h"
#include "rl/lora_setup.h"
#include "rl/warm_start.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {

namespace fs = std::filesystem;
using store::UpdateKey;

double mono_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

constexpr const char* kOuterPrefix = "outer/";
constexpr const char* kEfPrefix = "ef/";

store::TensorSet to_set(const NamedTensors& t) { return {t.names, t.tensors}; }
NamedTensors from_set(const store::TensorSet& t) { return {t.names, t.tensors}; }

// Outer optimizer state and the broadcast's error-feedback residual share one file, by prefix.
store::TensorSet pack_outer_state(const NamedTensors& outer, const NamedTensors& ef) {
  store::TensorSet s;
  for (size_t i = 0; i < outer.size(); ++i) {
    s.names.push_back(kOuterPrefix + outer.names[i]);
    s.tensors.push_back(outer.tensors[i]);
  }
  for (size_t i = 0; i < ef.size(); ++i) {
    s.names.push_back(kEfPrefix + ef.names[i]);
    s.tensors.push_back(ef.tensors[i]);
  }
  return s;
}

NamedTensors unpack_prefix(const store::TensorSet& s, const std::string& prefix) {
  NamedTensors out;
  for (size_t i = 0; i < s.names.size(); ++i)
    if (s.names[i].rfind(prefix, 0) == 0) {
      out.names.push_back(s.names[i].substr(prefix.size()));
      out.tensors.push_back(s.tensors[i]);
    }
  return out;
}

std::string random_hex16() {
  std::random_device rd;
  const uint64_t x = (uint64_t{rd()} << 32) ^ rd();
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(x));
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

// Everything both a new and a resumed run need once config_ is set; loads the policy from `spec`.
Status Coordinator::load_common(const std::string& spec) {
  const auto& m = config_.mesh;
  rules_.mode = m.mode == "async" ? RoundMode::kAsync : RoundMode::kSync;
  rules_.quorum = m.quorum;
  rules_.deadline_s = m.round_deadline_s;
  rules_.max_staleness = m.max_staleness;
  rules_.max_samples_per_update =
      samples_per_update_bound(m.inner_steps, config_.run.grpo.prompts_per_step, config_.run.grpo.group_size);
  MESHRL_ASSIGN_OR_RETURN(CodecConfig cc, codec_config(m));
  MESHRL_ASSIGN_OR_RETURN(codec_, make_codec(cc));
  MESHRL_ASSIGN_OR_RETURN(CodecConfig bc, broadcast_codec_config(m));
  MESHRL_ASSIGN_OR_RETURN(broadcast_codec_, make_codec(bc));
  CodecConfig wc;
  wc.id = CodecId::kFp32;
  wc.zstd_level = 0;
  MESHRL_ASSIGN_OR_RETURN(weights_codec_, make_codec(wc));
  OuterOptimizerConfig oc;
  oc.lr = m.outer_lr;
  oc.momentum = m.outer_momentum;
  oc.nesterov = m.outer_nesterov;
  outer_ = std::make_unique<OuterOptimizer>(oc);
  AggregatorConfig ac;
  ac.rule = m.aggregator;
  ac.trim_fraction = m.trim_fraction;
  ac.clip_tau = m.clip_tau;
  ac.clip_iters = m.clip_iters;
  MESHRL_ASSIGN_OR_RETURN(acc_, make_aggregator(ac));
  norm_bound_ = std::make_unique<NormBound>(m.norm_bound_factor, m.norm_window);
  rate_ = std::make_unique<RateLimiter>(m.max_updates_per_minute);
  join_rate_ = std::make_unique<RateLimiter>(kMaxJoinsPerMinute);
  audits_ = std::make_unique<AuditTally>(m.audit_exclude_after);
  audit_on_ = m.audit_rate > 0 && (task_is_shared(config_.run.task) || m.audit_private);
  if (m.audit_rate > 0 && !audit_on_)
    log("reward audits off: a " + config_.run.task.kind + " task is private to each node, the coordinator cannot re-score it "
        "(set [mesh] audit_private = true when every node holds the same task)");
  {
    std::random_device rd;
    audit_secret_ = (uint64_t{rd()} << 32) ^ rd();
  }

  model::set_threads(static_cast<int>(config_.run.model.threads));
  // On the CPU whatever [model] device says (that is for the nodes): theta_ is views into this model,
  // and merging, hashing and encoding work on CPU tensors; a GPU box can coordinate a CPU mesh and
  // the reverse.
  MESHRL_ASSIGN_OR_RETURN(policy_, rollout::load_policy(spec, "cpu", config_.run.model.weight_seed));
  // [lora]: the run's parameter set is then the adapters' B matrices (model/lora.h says why), on a
  // frozen base that nodes never download through the mesh, so they must prove they hold the same.
  if (config_.run.lora.rank > 0) {
    base_params_ = trainable_parameters(*policy_.model);  // views: setup_lora freezes them, nothing changes them
    base_weights_hash_ = content_hash(base_params_);
  }
  MESHRL_RETURN_IF_ERROR(rl::setup_lora(config_.run.lora, *policy_.model, "run config").status());
  theta_ = trainable_parameters(*policy_.model);
  param_count_ = theta_.numel();
  // An update is at most its fp32 encoding plus per-tensor headers; anything larger is refused
  // before it is read into memory.
  max_update_bytes_ = static_cast<uint64_t>(param_count_) * 4 + 4096 + 2048 * theta_.size();
  limits_.max_decoded_bytes = static_cast<uint64_t>(param_count_) * 4;
  // Room for other tensor counts, so a wrong parameter set (a full delta into an adapter run, or
  // the reverse) reaches the layout check and is refused as "shape"; max_decoded_bytes bounds memory.
  limits_.max_tensors = static_cast<uint32_t>(theta_.size()) + 1024;
  model_config_json_ = model::to_hf_config_json(policy_.model->config());
  model_config_hash_ = model_config_hash(policy_.model->config());
  tokenizer_hash_ = tokenizer_hash(*policy_.tokenizer);
  MESHRL_ASSIGN_OR_RETURN(std::unique_ptr<tasks::Task> task, tasks::make_task(config_.run.task));
  task_ = std::move(task);
  return Status::ok();
}

Status Coordinator::init_new(CoordinatorOptions& o) {
  config_ = o.config;
  MESHRL_ASSIGN_OR_RETURN(rl::WarmStart warm, rl::ensure_warm_start(config_.run, o.on_sft_step));
  log(warm.trained ? "sft: " + rl::summarize(warm.sft) + "; saved " + warm.policy_spec
                   : (warm.cached ? "sft: reusing cached warm start " + warm.policy_spec : "no warm start: " + warm.policy_spec));
  // Nodes build the architecture and tokenizer from a preset name where there is one (they then
  // download the warm-started weights, or with [lora] the frozen base once: base_weights.h); a
  // folder must exist on every node's machine.
  model_spec_ = model::is_preset_name(config_.run.model.init) ? config_.run.model.init : warm.policy_spec;
  const std::string warm_spec = warm.policy_spec;
  MESHRL_RETURN_IF_ERROR(load_common(warm_spec));
  nlohmann::json manifest = {
      {"run_config_toml", mesh_run_config_to_toml(config_)},
      {"model_spec", model_spec_},
      {"warm_start", warm_spec},
      {"model_config_hash", model_config_hash_},
      {"tokenizer_hash", tokenizer_hash_},
      {"param_count", param_count_},
      {"protocol_version", kProtocolVersion},
  };
  manifest["run_id"] = random_hex16();
  MESHRL_ASSIGN_OR_RETURN(store::RunStore st, store::RunStore::create(o.run_dir, manifest));
  store_ = std::make_unique<store::RunStore>(std::move(st));
  run_id_ = store_->manifest().at("run_id").get<std::string>();
  hash_ = content_hash(theta_);
  version_ = 0;
  MESHRL_RETURN_IF_ERROR(store_->write_version(0, hash_, "", to_set(theta_), pack_outer_state(outer_->state(), ef_.residual()), ""));
  MESHRL_RETURN_IF_ERROR(store_->ledger().commit_initial(hash_));
  round_ = {0, mono_seconds(), 0, 0};
  log("run " + run_id_ + " in " + o.run_dir.string() + ": version 0 " + hash_ + ", " + std::to_string(param_count_) +
      " parameters in " + std::to_string(theta_.size()) + " tensors");
  return Status::ok();
}

Status Coordinator::init_resume(CoordinatorOptions& o) {
  MESHRL_ASSIGN_OR_RETURN(store::RunStore st, store::RunStore::open(o.run_dir));
  store_ = std::make_unique<store::RunStore>(std::move(st));
  const auto& man = store_->manifest();
  if (!man.contains("run_config_toml") || !man.contains("model_spec") || !man.contains("warm_start"))
    return data_loss("[coordinator] " + (o.run_dir / "manifest.json").string() + " lacks run_config_toml/model_spec/warm_start");
  MESHRL_ASSIGN_OR_RETURN(config_, parse_mesh_run_config(man.at("run_config_toml").get<std::string>(), "manifest.json"));
  run_id_ = man.at("run_id").get<std::string>();
  model_spec_ = man.at("model_spec").get<std::string>();
  // Architecture and tokenizer from the warm start folder; the weights are then the version's.
  MESHRL_RETURN_IF_ERROR(load_common(man.at("warm_start").get<std::string>()));
  const int64_t v = store_->ledger().current_version();
  MESHRL_ASSIGN_OR_RETURN(store::VersionRecord rec, store_->load_version(v));
  NamedTensors w = from_set(rec.weights);
  MESHRL_RETURN_IF_ERROR(copy_parameters(w, theta_, "resumed weights"));
  hash_ = content_hash(theta_);
  if (hash_ != store_->ledger().current_hash())
    return data_loss("[coordinator] version " + std::to_string(v) + " weights hash " + hash_ + ", ledger says " +
                     store_->ledger().current_hash());
  MESHRL_RETURN_IF_ERROR(outer_->set_state(unpack_prefix(rec.outer_state, kOuterPrefix)));
  MESHRL_RETURN_IF_ERROR(ef_.set_residual(unpack_prefix(rec.outer_state, kEfPrefix)));
  version_ = v;
  finished_ = version_ >= config_.mesh.rounds;
  round_ = {v, mono_seconds(), 0, 0};
  // A run that finished (crashed right after its last commit) closes no more rounds: answer what
  // is still pending now, as close_round does when the run finishes, or it stays pending forever.
  if (finished_) {
    for (const store::UpdateRow& row : store_->ledger().pending()) {
      MESHRL_RETURN_IF_ERROR(store_->ledger().mark_rejected(row.key, "the run finished at version " + std::to_string(version_)));
      (void)store_->remove_spooled(row.key.str());
    }
  } else {
    MESHRL_RETURN_IF_ERROR(readmit_pending());
  }
  // A crash between commit_round and the spool cleanup leaves the applied updates' payloads behind.
  for (const store::UpdateRow& row : store_->ledger().updates())
    if (row.state != store::UpdateState::kReceived) (void)store_->remove_spooled(row.key.str());
  // Exclusions outlive a restart (failure counts start over: a flag is a warning, not a verdict).
  for (const store::NodeEvent& e : store_->ledger().node_events())
    if (e.event == "excluded") {
      audits_->restore_excluded(e.node);
      records_[e.node].name = e.node;
      records_[e.node].excluded = true;
    }
  for (const store::UpdateRow& row : store_->ledger().updates()) {
    if ((row.state == store::UpdateState::kApplied && row.applied_version == v) || row.state == store::UpdateState::kReceived)
      expected_.insert(row.key.node);
  }
  // A node that joined before the crash and never left may still come back for the final version
  // (a slow node kept away by our restarts): all_nodes_gone waits for it too.
  for (const store::NodeEvent& e : store_->ledger().node_events()) {
    if (e.event == "join" || e.event == "rejoin") not_left_.insert(e.node);
    if (e.event == "leave") not_left_.erase(e.node);
  }
  grace_until_ = mono_seconds() + config_.mesh.lease_s;
  log("resumed run " + run_id_ + " at version " + std::to_string(v) + " " + hash_ + " with " +
      std::to_string(book_.n_updates()) + " pending update(s)");
  return Status::ok();
}

// Re-aggregates what was acknowledged but not applied before a crash, under the same rules as
// submit (one vote per node: a pending update superseded by a fresher one of its node is rejected).
Status Coordinator::readmit_pending() {
  for (const store::UpdateRow& row : store_->ledger().updates())
    if (row.state == store::UpdateState::kApplied) book_.set_last_applied_base(row.key.node, row.key.base_version);
  for (const store::UpdateRow& row : store_->ledger().pending()) {
    const Admission a = admit_update(rules_, version_, row.key.base_version, row.n_samples);
    std::string why = a.accepted ? "" : std::string(reject_code_name(a.code)) + ": " + a.reason;
    const RoundEntry e = round_entry(row.key, a, row.n_samples, nullptr);
    BookDecision d;
    if (why.empty()) {
      d = book_.offer(e);
      if (!d.accepted) why = std::string(reject_code_name(d.code)) + ": " + d.reason;
    }
    auto bytes = why.empty() ? store_->read_spooled(row.key.str()) : Result<std::string>(invalid_argument("unread"));
    Result<NamedTensors> u = invalid_argument("unread");
    if (why.empty() && !bytes.is_ok()) why = "spooled payload lost: " + bytes.status().message();
    if (why.empty()) {
      u = codec_->decode(bytes.value(), limits_, row.key.str());
      if (!u.is_ok()) why = u.status().message();
      else if (auto st = check_same_layout(u.value(), theta_, "update"); !st.is_ok()) why = st.message();
    }
    if (!why.empty()) {
      MESHRL_RETURN_IF_ERROR(store_->ledger().mark_rejected(row.key, why));
      (void)store_->remove_spooled(row.key.str());
      continue;
    }
    MESHRL_RETURN_IF_ERROR(count_in_round(e, d, u.value(), update_norm(u.value())));
  }
  return Status::ok();
}

v1::Manifest Coordinator::manifest() const {
  v1::Manifest m;
  m.set_run_id(run_id_);
  m.set_model_config_json(model_config_json_);
  m.set_model_config_hash(model_config_hash_);
  m.set_model_spec(model_spec_);
  m.set_tokenizer_hash(tokenizer_hash_);
  m.set_base_weights_hash(base_weights_hash_);
  m.add_task_names(task_->name());
  m.set_run_config_toml(mesh_run_config_to_toml(config_));
  m.set_algorithm_json(mesh_section_to_json(config_.mesh).dump());
  m.set_current_version(version_);
  m.set_current_hash(hash_);
  m.set_lease_seconds(config_.mesh.lease_s);
  m.set_param_count(param_count_);
  m.set_finished(finished_);
  m.set_schedule_step(schedule_step());
  return m;
}

int64_t Coordinator::schedule_step() const {
  // In sync mode every version is one round of H inner steps on each node, which survives a
  // restart; in async mode a version is one node's update, so the furthest step a node reported
  // in its heartbeats says where the run is. Without this a restarted or late node would start its lr schedule at
  // step 0: at peak lr with fresh moments while the others are at the cosine floor (measured: it
  // pulled the test run's reward from 0.95 to 0.73 over 30 rounds of node kills).
  // Either way no node can be past version x H (each version took at least one update of H
  // steps), which also bounds what a node that misreports its progress can push on the others.
  const int64_t bound = version_ * config_.mesh.inner_steps;
  if (config_.mesh.mode == "sync") return bound;
  int64_t step = 0;
  for (const auto& [name, rec] : records_) step = std::max(step, rec.last_progress.schedule_step());
  return std::min(step, bound);
}

v1::JoinReply Coordinator::join(const v1::JoinRequest& req, const std::string& peer) {
  v1::JoinReply r;
  r.set_protocol_version(kProtocolVersion);
  std::lock_guard<std::mutex> lk(mu_);
  const double now = mono_seconds();
  expire_leases(now);
  const std::string node = req.name().empty() ? "?" : req.name().substr(0, 64);
  // Before anything is written: a node rejoining in a loop (or an impostor without TLS) cannot
  // grow the ledger faster than this.
  if (std::string busy = join_rate_->admit(node, now); !busy.empty()) {
    r.set_accepted(false);
    r.set_reason("rate_limited: more than " + std::to_string(kMaxJoinsPerMinute) + " joins per minute as '" + node + "'; wait a minute");
    return r;
  }
  std::string why;
  if (req.protocol_version() != kProtocolVersion)
    why = "protocol version " + std::to_string(req.protocol_version()) + " is not this coordinator's (" +
          std::to_string(kProtocolVersion) + "); run the same meshrl release on every machine";
  else if (std::string bad = check_node_name(req.name()); !bad.empty())
    why = bad;
  else if (!req.run_id().empty() && req.run_id() != run_id_)
    why = "node is configured for run " + req.run_id() + ", this coordinator runs " + run_id_;
  else if (!req.model_config_hash().empty() && req.model_config_hash() != model_config_hash_)
    why = "node's model (config hash " + req.model_config_hash() + ") is not this run's (" + model_config_hash_ + ")";
  else if (req.signing_key().size() != trust::kPublicKeyBytes)
    why = "join carries no Ed25519 signing key (" + std::to_string(trust::kPublicKeyBytes) + " bytes, got " +
          std::to_string(req.signing_key().size()) + ")";
  else if (auto it = members_.find(req.name()); it != members_.end()) {
    char b[160];
    std::snprintf(b, sizeof b, "a node named '%s' is already joined (its lease expires in %.1f s); use another --name",
                  req.name().c_str(), config_.mesh.lease_s - (now - it->second.last_seen));
    why = b;
  }
  if (!why.empty()) {
    r.set_accepted(false);
    r.set_reason(why);
    (void)store_->ledger().node_event(node, "join_refused", why + " (peer " + peer + ")");
    log("refused join of '" + node + "': " + why);
    return r;
  }
  std::random_device rd;
  Member m;
  m.session = ((uint64_t{rd()} << 32) ^ rd()) | 1;
  m.last_seen = m.joined_at = now;
  members_[req.name()] = m;
  const bool rejoin = !ever_joined_.insert(req.name()).second;
  // The key arrives over the connection that authenticated this name (mutual TLS), so it is bound
  // to the node's identity; a new key (the node lost its key file) replaces the old one, logged.
  std::string& key = signing_keys_[req.name()];
  if (!key.empty() && key != req.signing_key())
    (void)store_->ledger().node_event(req.name(), "signing_key_changed", trust::to_hex(key) + " -> " + trust::to_hex(req.signing_key()));
  key = req.signing_key();
  records_[req.name()].name = req.name();
  records_[req.name()].left = false;
  nlohmann::json detail = {{"device", req.device()}, {"threads", req.threads()}, {"tokens_per_s", req.tokens_per_s()},
                           {"peer", peer}, {"version", version_}, {"signing_key", trust::to_hex(req.signing_key())}};
  (void)store_->ledger().node_event(req.name(), rejoin ? "rejoin" : "join", detail.dump());
  log(std::string(rejoin ? "rejoined: " : "joined: ") + req.name() + " (" + req.device() + ", " +
      std::to_string(req.threads()) + " threads) at version " + std::to_string(version_) + "; " +
      std::to_string(members_.size()) + " online");
  r.set_accepted(true);
  r.set_session(m.session);
  *r.mutable_manifest() = manifest();
  return r;
}

bool Coordinator::session_ok(const std::string& name, uint64_t session) {
  auto it = members_.find(name);
  if (it == members_.end() || it->second.session != session) return false;
  it->second.last_seen = mono_seconds();
  return true;
}

bool Coordinator::session_valid(const std::string& name, uint64_t session) {
  std::lock_guard<std::mutex> lk(mu_);
  return session_ok(name, session);
}

v1::HeartbeatReply Coordinator::heartbeat(const v1::HeartbeatRequest& req) {
  v1::HeartbeatReply r;
  std::lock_guard<std::mutex> lk(mu_);
  r.set_current_version(version_);
  r.set_finished(finished_);
  if (!session_ok(req.name(), req.session())) {
    r.set_ok(false);
    r.set_reason("not joined (unknown session or lease expired); join again");
    return r;
  }
  records_[req.name()].last_progress = req.progress();
  r.set_ok(true);
  return r;
}

v1::LeaveReply Coordinator::leave(const v1::LeaveRequest& req) {
  v1::LeaveReply r;
  std::lock_guard<std::mutex> lk(mu_);
  if (!session_ok(req.name(), req.session())) {
    r.set_ok(false);
    return r;
  }
  members_.erase(req.name());
  NodeRecord& rec = records_[req.name()];
  rec.last_progress = req.progress();
  rec.left = true;
  (void)store_->ledger().node_event(req.name(), "leave",
                                    "version " + std::to_string(req.progress().version()) + " hash " + req.progress().hash());
  log("left: " + req.name() + " at version " + std::to_string(req.progress().version()) +
      (req.progress().hash() == hash_ ? " (hash ok)" : " (hash " + req.progress().hash() + " != " + hash_ + ")"));
  r.set_ok(true);
  version_cv_.notify_all();
  return r;
}

void Coordinator::expire_leases(double now) {
  for (auto it = members_.begin(); it != members_.end();) {
    if (now - it->second.last_seen > config_.mesh.lease_s) {
      (void)store_->ledger().node_event(it->first, "lease_expired", "silent for " + std::to_string(now - it->second.last_seen) + " s");
      log("dropped: " + it->first + " (lease expired)");
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<Coordinator::Blob> Coordinator::weights(const std::string& name, uint64_t session, int64_t version) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!session_ok(name, session)) return invalid_argument("not joined (unknown session or lease expired); join again");
  if (version == version_) {
    if (!weights_blob_) {
      MESHRL_ASSIGN_OR_RETURN(std::string b, weights_codec_->encode(theta_));
      weights_blob_ = std::make_shared<const std::string>(std::move(b));
    }
    return Blob{weights_blob_, version_, hash_};
  }
  if (version < 0 || version > version_)
    return invalid_argument("version " + std::to_string(version) + " does not exist (current is " + std::to_string(version_) + ")");
  lk.unlock();  // an old version comes from disk; the store is safe to read concurrently
  MESHRL_ASSIGN_OR_RETURN(store::VersionRecord rec, store_->load_version(version));
  MESHRL_ASSIGN_OR_RETURN(std::string b, weights_codec_->encode(from_set(rec.weights)));
  return Blob{std::make_shared<const std::string>(std::move(b)), version, rec.hash};
}

Result<Coordinator::Blob> Coordinator::base_weights(const std::string& name, uint64_t session) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!session_ok(name, session)) return invalid_argument("not joined (unknown session or lease expired); join again");
  if (base_weights_hash_.empty()) return invalid_argument("this run trains full weights: there is no separate frozen base to download");
  if (!base_blob_) {  // encoded once: the base never changes during a run
    MESHRL_ASSIGN_OR_RETURN(std::string b, weights_codec_->encode(base_params_));
    base_blob_ = std::make_shared<const std::string>(std::move(b));
  }
  return Blob{base_blob_, 0, base_weights_hash_};
}

Result<Coordinator::Blob> Coordinator::broadcast(const std::string& name, uint64_t session, int64_t version) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!session_ok(name, session)) return invalid_argument("not joined (unknown session or lease expired); join again");
  if (version < 1 || version > version_)
    return invalid_argument("no broadcast for version " + std::to_string(version) + " (current is " + std::to_string(version_) + ")");
  if (auto it = broadcasts_.find(version); it != broadcasts_.end()) return it->second;
  lk.unlock();
  MESHRL_ASSIGN_OR_RETURN(store::VersionRecord rec, store_->load_version(version));
  MESHRL_ASSIGN_OR_RETURN(std::string b, store_->load_broadcast(version));
  return Blob{std::make_shared<const std::string>(std::move(b)), version, rec.hash};
}

void Coordinator::count_bytes_down(const std::string& name, uint64_t n, bool full) {
  std::lock_guard<std::mutex> lk(mu_);
  bytes_down_ += n;
  if (full) bytes_down_full_ += n;
  records_[name].bytes_down += n;
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
  if (records_.count(key.node)) ++records_[key.node].updates_rejected;
  log("rejected update " + key.str() + ": " + reason);
  return r;
}

v1::SubmitReply Coordinator::submit(const v1::UpdateHeader& h, const std::string& payload) {
  const UpdateKey key{h.name().substr(0, 64), h.base_version(), h.seq()};
  // Decode outside the lock (the costly part); everything it checks is independent of state.
  Result<NamedTensors> decoded = invalid_argument("not decoded");
  const bool sizes_ok = payload.size() == h.declared_bytes() && h.declared_bytes() <= max_update_bytes_;
  const std::string digest = sizes_ok ? trust::blake2b_256(payload) : std::string();
  if (sizes_ok) decoded = codec_->decode(payload, limits_, "update " + key.str());
  const double norm = decoded.is_ok() ? update_norm(decoded.value()) : 0.0;

  std::lock_guard<std::mutex> lk(mu_);
  v1::SubmitReply r;
  r.set_current_version(version_);
  if (!session_ok(h.name(), h.session())) {
    r.set_accepted(false);
    r.set_reason("not joined (unknown session or lease expired); join again");
    return r;
  }
  // Every attempt counts, refusals included, and nothing is written for one over the rate: a
  // node flooding us with bad updates costs a map lookup each, not a ledger row.
  if (std::string why = rate_->admit(h.name(), mono_seconds()); !why.empty()) {
    ++records_[h.name()].updates_rejected;
    r.set_accepted(false);
    r.set_code(reject_code_name(RejectCode::kRateLimited));
    r.set_reason(std::string(reject_code_name(RejectCode::kRateLimited)) + ": " + why);
    return r;
  }
  if (h.protocol_version() != kProtocolVersion)
    return reject(key, RejectCode::kProtocol, "protocol version " + std::to_string(h.protocol_version()) + ", coordinator speaks " +
                           std::to_string(kProtocolVersion), false);
  bytes_up_ += payload.size();
  records_[h.name()].bytes_up += payload.size();
  // Transport-level faults are not recorded under the update's key: a retry of the same update
  // over a working connection must still be accepted.
  if (h.declared_bytes() > max_update_bytes_)
    return reject(key, RejectCode::kSize, "declared " + std::to_string(h.declared_bytes()) + " bytes, more than this run's maximum " +
                           std::to_string(max_update_bytes_) + " (it exchanges " + std::to_string(param_count_) + " values" +
                           (config_.run.lora.rank > 0 ? ", LoRA adapters only: is this a full-weight delta?)" : ")"), false);
  if (payload.size() > h.declared_bytes())
    return reject(key, RejectCode::kSize, "payload larger than declared (" + std::to_string(h.declared_bytes()) + " bytes)", false);
  if (payload.size() < h.declared_bytes())
    return reject(key, RejectCode::kTruncated, "truncated upload: " + std::to_string(payload.size()) + " of " + std::to_string(h.declared_bytes()) +
                           " declared bytes arrived", false);
  // Authenticity before anything is looked up under the key: a forged or foreign header must
  // neither learn nor touch the recorded outcome of a real update. These refusals are node events
  // in the ledger, not rows under the key, so an impostor cannot block a genuine key. The
  // signature covers every field used below (n_samples, the reward statistics, the commitment).
  if (h.signature().empty()) return reject(key, RejectCode::kBadSignature, "the update is not signed", false);
  if (h.run_id() != run_id_)
    return reject(key, RejectCode::kWrongRun, "update signed for run '" + h.run_id().substr(0, 64) + "', this coordinator runs " + run_id_, false);
  if (std::string why = check_update_signature(h, digest, signing_keys_[h.name()], run_id_); !why.empty())
    return reject(key, RejectCode::kBadSignature, why, false);
  // A retry (the ack was lost, or the coordinator restarted): answer what was decided then. An
  // exact replay of a signed update lands here too and changes nothing.
  auto found = store_->ledger().find(key);
  if (!found.is_ok()) return reject(key, RejectCode::kInternal, "ledger: " + found.status().message(), false);
  if (found.value()) {
    const store::UpdateRow& row = *found.value();
    r.set_duplicate(true);
    r.set_accepted(row.state != store::UpdateState::kRejected);
    r.set_reason(row.reason);
    return r;
  }
  // A new key must carry a seq above every one this node had accepted before (the ledger keeps
  // them across restarts): an old signed update replayed under its own, other key is refused
  // here. Refused updates do not count, and a seq is a clock reading that may not run ahead of
  // ours by more than the skew, so one wild seq (a clock jump, a bug) cannot lock a node out.
  const double now_us = 1e6 * std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (static_cast<double>(h.seq()) > now_us + 1e6 * kMaxSeqSkewS)
    return reject(key, RejectCode::kSeqAhead, "seq " + std::to_string(h.seq()) + " (microseconds since the epoch) is more than " +
                                                  std::to_string(static_cast<int>(kMaxSeqSkewS)) +
                                                  " s ahead of the coordinator's clock; check the node's clock", true);
  auto last = store_->ledger().last_accepted_seq(h.name());
  if (!last.is_ok()) return reject(key, RejectCode::kInternal, "ledger: " + last.status().message(), false);
  if (last.value() && h.seq() <= *last.value())
    return reject(key, RejectCode::kReplay, "seq " + std::to_string(h.seq()) + " is not above " + std::to_string(*last.value()) +
                                                ", the last accepted seq from '" + h.name() + "'", false);
  if (audits_->excluded(h.name()))
    return reject(key, RejectCode::kExcluded, "'" + h.name() + "' failed " + std::to_string(config_.mesh.audit_exclude_after) +
                                                  " reward audit(s) and is excluded from this run", true);
  if (finished_) return reject(key, RejectCode::kFinished, "the run has finished at version " + std::to_string(version_), true);
  const Admission a = admit_update(rules_, version_, h.base_version(), h.n_samples());
  if (!a.accepted) return reject(key, a.code, a.reason, true);
  // With audits on, the samples behind the update are the rollouts it commits to: an audit then
  // holds the node to the count that weighs its update.
  if (audit_on_ && h.n_samples() != h.stats().n_scored())
    return reject(key, RejectCode::kClaim, "n_samples " + std::to_string(h.n_samples()) + " differs from the " +
                                               std::to_string(h.stats().n_scored()) + " committed rollouts (n_scored)", true);
  const RoundEntry entry = round_entry(key, a, h.n_samples(), &h.stats());
  const BookDecision placed = book_.offer(entry);
  if (!placed.accepted) return reject(key, placed.code, placed.reason, true);
  if (!decoded.is_ok()) {
    // The decoder refuses NaN/Inf values and scales; name that case for what it is.
    const bool nonfinite = decoded.status().message().find("finite") != std::string::npos;
    return reject(key, nonfinite ? RejectCode::kNotFinite : RejectCode::kMalformed, decoded.status().message(), true);
  }
  if (auto st = check_same_layout(decoded.value(), theta_, "update " + key.str()); !st.is_ok())
    return reject(key, RejectCode::kShape, st.message(), true);
  if (std::string why = norm_bound_->check(norm); !why.empty()) return reject(key, RejectCode::kNorm, why, true);
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
  if (audit_on_ && audit_drawn(audit_secret_, key.str(), config_.mesh.audit_rate)) {
    HeldUpdate held{key, decoded.value(), norm, h.n_samples(), h.stats(), {}, mono_seconds() + config_.mesh.audit_deadline_s};
    held.claim = {h.stats().n_scored(), h.stats().scored_digest(), h.stats().reward_mean(),
                  audit_indices(audit_secret_, key.str(), h.stats().n_scored(), config_.mesh.audit_samples)};
    v1::AuditRequest* q = r.mutable_audit();
    q->set_base_version(key.base_version);
    q->set_seq(key.seq);
    for (int64_t i : held.claim.indices) q->add_indices(i);
    q->set_deadline_s(config_.mesh.audit_deadline_s);
    held_[key.str()] = std::move(held);
    log("auditing update " + key.str() + ": " + std::to_string(q->indices_size()) + " of " + std::to_string(h.stats().n_scored()) +
        " committed rollouts");
    r.set_accepted(true);
    return r;
  }
  // Only now, with the bytes and the row on disk, does the update count (and get acknowledged).
  if (auto st = count_in_round(entry, placed, decoded.value(), norm); !st.is_ok())
    return reject(key, RejectCode::kInternal, "aggregate: " + st.message(), true);
  r.set_accepted(true);
  return r;
}

RoundEntry Coordinator::round_entry(const UpdateKey& key, const Admission& a, int64_t n_samples, const v1::RewardStats* stats) {
  RoundEntry e;
  e.key = key;
  e.weight = a.weight;
  e.staleness = a.staleness;
  e.n_samples = n_samples;
  if (stats) {
    e.has_stats = true;
    e.reward_mean = stats->reward_mean();
    e.kl = stats->kl();
    e.entropy = stats->entropy();
  }
  return e;
}

Status Coordinator::count_in_round(const RoundEntry& e, const BookDecision& d, const NamedTensors& u, double norm) {
  // A fresh update is folded in now; a stale one waits in the book for the close (a fresher
  // update of its node may still take its place), and is read back from the spool then.
  if (d.count_now) {
    if (auto st = acc_->add(u, e.weight); !st.is_ok()) {
      fatal_ = st;
      return st;
    }
  }
  norm_bound_->accepted(norm);
  if (d.superseded) {
    (void)store_->ledger().mark_rejected(*d.superseded, std::string(reject_code_name(RejectCode::kSuperseded)) +
                                                            ": update " + e.key.str() + " of the same node is fresher");
    (void)store_->remove_spooled(d.superseded->str());
    ++records_[e.key.node].updates_rejected;
    log("superseded update " + d.superseded->str() + " by " + e.key.str());
  }
  book_.place(e, d);
  version_cv_.notify_all();  // wakes the round loop
  return Status::ok();
}

void Coordinator::record_audit(const std::string& node, bool passed, const std::string& detail) {
  const bool now_excluded = audits_->record(node, passed);
  NodeRecord& nr = records_[node];
  nr.name = node;
  ++(passed ? nr.audits_passed : nr.audits_failed);
  (void)store_->ledger().node_event(node, passed ? "audit_passed" : "audit_failed", detail);
  if (now_excluded) {
    nr.excluded = true;
    const std::string why = "failed " + std::to_string(audits_->failures(node)) + " reward audit(s); its updates are refused from now on";
    (void)store_->ledger().node_event(node, "excluded", why);
    log("excluded " + node + ": " + why);
  } else if (!passed) {
    log("flagged " + node + ": reward audit failed (" + std::to_string(audits_->failures(node)) + " of " +
        std::to_string(config_.mesh.audit_exclude_after) + " before exclusion): " + detail);
  }
}

void Coordinator::expire_audits(double now) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    const UpdateKey key = it->second.key;
    it = held_.erase(it);
    const std::string why = "no answer to the reward audit within " + std::to_string(static_cast<int>(config_.mesh.audit_deadline_s)) + " s";
    (void)reject(key, RejectCode::kAuditFailed, why, true);
    record_audit(key.node, false, key.str() + ": " + why);
  }
}

v1::AuditVerdict Coordinator::answer_audit(const v1::AuditAnswer& ans) {
  v1::AuditVerdict v;
  const UpdateKey key{ans.name().substr(0, 64), ans.base_version(), ans.seq()};
  AuditClaim claim;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!session_ok(ans.name(), ans.session())) {
      v.set_reason("not joined (unknown session or lease expired); join again");
      return v;
    }
    auto it = held_.find(key.str());
    if (it == held_.end()) {
      v.set_reason("no audit is open for update " + key.str() + " (answered already, past its deadline, or never asked)");
      return v;
    }
    claim = it->second.claim;
  }
  // Re-scoring runs outside the lock: a command task's verifier may take its time limit.
  const AuditOutcome out = check_audit_answer(*task_, claim, ans, config_.mesh.audit_tolerance);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = held_.find(key.str());
  if (it == held_.end()) {
    v.set_reason("the audit of " + key.str() + " closed while it was checked (deadline or end of run)");
    return v;
  }
  HeldUpdate held = std::move(it->second);
  held_.erase(it);
  if (!out.passed) {
    (void)reject(key, RejectCode::kAuditFailed, out.reason, true);
    record_audit(key.node, false, key.str() + ": " + out.reason);
    v.set_reason(out.reason);
    v.set_excluded(audits_->excluded(key.node));
    v.set_code(v.excluded() ? reject_code_name(RejectCode::kExcluded) : reject_code_name(RejectCode::kAuditFailed));
    return v;
  }
  record_audit(key.node, true, key.str() + ": " + std::to_string(claim.indices.size()) + " rollout(s) re-scored");
  v.set_passed(true);
  // The round may have moved on while the update was held: admit it as any late update.
  const Admission a = admit_update(rules_, version_, key.base_version, held.n_samples);
  const RoundEntry e = round_entry(key, a, held.n_samples, &held.stats);
  const BookDecision d = a.accepted ? book_.offer(e) : BookDecision{};
  if (finished_) (void)reject(key, RejectCode::kFinished, "the run has finished at version " + std::to_string(version_), true);
  else if (!a.accepted) (void)reject(key, a.code, a.reason, true);
  else if (!d.accepted) (void)reject(key, d.code, d.reason, true);
  else if (auto st = count_in_round(e, d, held.update, held.norm); !st.is_ok())
    (void)reject(key, RejectCode::kInternal, "aggregate: " + st.message(), true);
  return v;
}

namespace {
std::string share_text(double share) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", share);
  return b;
}
}  // namespace

Status Coordinator::close_round(CloseReason reason, int64_t nodes_online) {
  const double t_start = mono_seconds();
  // The held stale updates: no fresher update of their nodes came, so each counts now.
  for (const RoundEntry& e : book_.held()) {
    MESHRL_ASSIGN_OR_RETURN(std::string bytes, store_->read_spooled(e.key.str()));
    MESHRL_ASSIGN_OR_RETURN(NamedTensors u, codec_->decode(bytes, limits_, "update " + e.key.str()));
    MESHRL_RETURN_IF_ERROR(acc_->add(u, e.weight));
  }
  const std::vector<RoundEntry> entries = book_.entries();
  std::vector<std::pair<UpdateKey, double>> round_keys;
  for (const RoundEntry& e : entries) round_keys.emplace_back(e.key, e.weight);
  MESHRL_ASSIGN_OR_RETURN(NamedTensors pg, acc_->finish());
  double share = 1.0;  // of a full round: async versions move the weights by their updates' share (round.h)
  if (rules_.mode == RoundMode::kAsync) {
    share = async_round_share(acc_->total_weight(), book_.samples(), book_.n_updates(), nodes_online);
    torch::NoGradGuard no_grad;
    for (auto& t : pg.tensors) t.mul_(share);
  }
  MESHRL_ASSIGN_OR_RETURN(NamedTensors delta, outer_->step(pg));
  NamedTensors compensated = ef_.compensate(delta);
  const uint64_t seed = static_cast<uint64_t>(version_ + 1);
  MESHRL_ASSIGN_OR_RETURN(std::string bytes, broadcast_codec_->encode(compensated, seed));
  MESHRL_ASSIGN_OR_RETURN(NamedTensors sent, broadcast_codec_->decode(bytes, limits_, "broadcast"));
  MESHRL_RETURN_IF_ERROR(ef_.update(compensated, sent));
  {
    torch::NoGradGuard no_grad;
    MESHRL_RETURN_IF_ERROR(apply_delta(theta_, sent));
  }
  fault_point("mid_aggregate", version_ + 1);  // test-only crash points: core/fault_point.h
  const std::string parent = hash_;
  const std::string hash = content_hash(theta_);
  const int64_t v = version_ + 1;
  fault_point("before_persist", v);
  MESHRL_RETURN_IF_ERROR(store_->write_version(v, hash, parent, to_set(theta_), pack_outer_state(outer_->state(), ef_.residual()), bytes));
  fault_point("before_commit", v);
  MESHRL_RETURN_IF_ERROR(store_->ledger().commit_round(v, hash, round_keys, close_reason_name(reason)));
  fault_point("after_commit", v);
  for (const auto& [k, w] : round_keys) {
    (void)store_->remove_spooled(k.str());
    NodeRecord& nr = records_[k.node];
    nr.name = k.node;
    ++nr.updates_applied;
  }
  VersionReport rep;
  rep.version = v;
  rep.hash = hash;
  rep.closed_by = close_reason_name(reason);
  rep.n_updates = book_.n_updates();
  rep.mean_staleness = book_.mean_staleness();
  rep.reward_mean = book_.mean_reward();
  rep.kl_mean = book_.mean_kl();
  rep.entropy_mean = book_.mean_entropy();
  rep.samples = book_.samples();
  rep.broadcast_bytes = bytes.size();

  version_ = v;
  hash_ = hash;
  weights_blob_.reset();
  broadcasts_[v] = Blob{std::make_shared<const std::string>(std::move(bytes)), v, hash};
  while (broadcasts_.size() > 8) broadcasts_.erase(broadcasts_.begin());
  acc_->reset();
  book_.close();
  round_ = {v, mono_seconds(), 0, 0};
  if (version_ >= config_.mesh.rounds) {
    finished_ = true;
    // Acknowledged updates that no round will take are answered, not forgotten (held ones too).
    held_.clear();
    for (const store::UpdateRow& row : store_->ledger().pending()) {
      (void)store_->ledger().mark_rejected(row.key, "the run finished at version " + std::to_string(version_));
      (void)store_->remove_spooled(row.key.str());
    }
  }
  rep.nodes_online = static_cast<int64_t>(members_.size());
  rep.bytes_up = bytes_up_;
  rep.bytes_down = bytes_down_;
  rep.seconds = mono_seconds() - t0_;
  log("version " + std::to_string(v) + " " + hash.substr(0, 12) + " closed by " + rep.closed_by + " with " +
      std::to_string(rep.n_updates) + " update(s)" +
      (rules_.mode == RoundMode::kAsync ? " (" + share_text(share) + " of a round)" : std::string()) + " in " +
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
    int64_t online = static_cast<int64_t>(members_.size());
    if (now < grace_until_) {
      std::set<std::string> known = expected_;
      for (const auto& [name, m] : members_) known.insert(name);
      online = static_cast<int64_t>(known.size());
    }
    // Excluded nodes may still train and send, but none of their updates counts: the quorum is of the others.
    for (const auto& [name, m] : members_)
      if (audits_->excluded(name)) --online;
    round_.n_updates = book_.n_updates();
    round_.n_fresh_nodes = book_.n_fresh_nodes();
    const CloseReason why = should_close(rules_, round_, online, now);
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

bool Coordinator::finished() const {
  std::lock_guard<std::mutex> lk(mu_);
  return finished_;
}

bool Coordinator::all_nodes_gone() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!members_.empty()) return false;
  // Nodes of this run that have not said goodbye may be reconnecting (after our own restart).
  // (The caller gives up waiting after a linger time: a node may also be gone for good.)
  for (const auto* names : {&expected_, &ever_joined_, &not_left_})
    for (const std::string& name : *names)
      if (!records_.count(name) || !records_.at(name).left) return false;
  return true;
}

int64_t Coordinator::version() const {
  std::lock_guard<std::mutex> lk(mu_);
  return version_;
}

std::string Coordinator::hash() const {
  std::lock_guard<std::mutex> lk(mu_);
  return hash_;
}

std::map<std::string, NodeRecord> Coordinator::nodes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return records_;
}

std::vector<Coordinator::LeaseView> Coordinator::leases() const {
  std::lock_guard<std::mutex> lk(mu_);
  const double now = mono_seconds();
  std::vector<LeaseView> out;
  for (const auto& [name, m] : members_) out.push_back({name, now - m.last_seen, now - m.joined_at});
  return out;
}

uint64_t Coordinator::bytes_up() const {
  std::lock_guard<std::mutex> lk(mu_);
  return bytes_up_;
}

uint64_t Coordinator::bytes_down() const {
  std::lock_guard<std::mutex> lk(mu_);
  return bytes_down_;
}

uint64_t Coordinator::bytes_down_full() const {
  std::lock_guard<std::mutex> lk(mu_);
  return bytes_down_full_;
}

std::optional<Status> Coordinator::fatal() const {
  std::lock_guard<std::mutex> lk(mu_);
  return fatal_;
}

Result<double> Coordinator::evaluate_current(int64_t n_eval, std::function<void(int64_t, int64_t)> on_progress) {
  std::lock_guard<std::mutex> lk(mu_);
  rl::EvalOptions o;
  const auto& e = config_.run.eval;
  o.n_problems = n_eval > 0 ? n_eval : e.n_eval;
  o.pass_k = 1;
  o.max_new_tokens = e.max_new_tokens > 0 ? e.max_new_tokens : config_.run.grpo.max_new_tokens;
  o.batch_size = e.batch_size;
  o.seed = config_.run.grpo.seed;
  o.stop_ids = policy_.stop_ids;
  o.on_progress = std::move(on_progress);
  MESHRL_ASSIGN_OR_RETURN(rl::EvalResult r, rl::evaluate(*policy_.model, *policy_.tokenizer, *task_, o));
  return r.pass_at_1;
}

}  // namespace meshrl::mesh

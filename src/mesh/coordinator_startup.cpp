// Start-up of a coordinator: a new run, a resumed one. See coordinator_startup.h.
#include "mesh/coordinator_startup.h"

#include <cstdio>
#include <random>
#include <set>

#include "mesh/content_hash.h"
#include "mesh/coordinator.h"
#include "mesh/policy_params.h"
#include "mesh/protocol.h"
#include "mesh/robust_aggregate.h"
#include "model/config.h"
#include "rl/warm_start.h"

namespace meshrl::mesh {

uint64_t random_u64() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

std::string random_hex16() {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(random_u64()));
  return b;
}

IngestRules ingest_rules(const MeshRunConfig& config, const RunModel& model, const std::string& run_id, const RoundRules& round,
                         bool audit_on) {
  const MeshSection& m = config.mesh;
  IngestRules r;
  r.run_id = run_id;
  r.max_update_bytes = model.max_update_bytes;
  r.param_count = model.param_count;
  r.lora = config.run.lora.rank > 0;
  r.audit_on = audit_on;
  r.audit_exclude_after = m.audit_exclude_after;
  r.round = round;
  r.norm_bound_factor = m.norm_bound_factor;
  r.norm_window = m.norm_window;
  r.max_updates_per_minute = m.max_updates_per_minute;
  return r;
}

// The model and every room, for a new and a resumed run alike, once config_ and run_id_ are set.
Status Coordinator::load_common(const std::string& policy_spec) {
  const std::string spec = model_.spec;
  MESHRL_ASSIGN_OR_RETURN(model_, load_run_model(config_, policy_spec));
  model_.spec = spec;
  MESHRL_ASSIGN_OR_RETURN(round_, VersionBuilder::make(config_, model_.limits));
  members_ = std::make_unique<Membership>(config_.mesh.lease_s);
  audits_ = std::make_unique<AuditDesk>(config_.mesh, config_.run.task, random_u64());
  if (audits_->asked_but_off())
    log("reward audits off: a " + config_.run.task.kind + " task is private to each node, the coordinator cannot re-score it "
        "(set [mesh] audit_private = true when every node holds the same task)");
  ingest_ = std::make_unique<UpdateIngest>(ingest_rules(config_, model_, run_id_, round_->rules(), audits_->on()));
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
  model_.spec = model::is_preset_name(config_.run.model.init) ? config_.run.model.init : warm.policy_spec;
  // The run id goes into the manifest with the run directory; the rooms are built knowing it.
  run_id_ = random_hex16();
  MESHRL_RETURN_IF_ERROR(load_common(warm.policy_spec));
  nlohmann::json manifest = {
      {"run_config_toml", mesh_run_config_to_toml(config_)},
      {"model_spec", model_.spec},
      {"warm_start", warm.policy_spec},
      {"model_config_hash", model_.config_hash},
      {"tokenizer_hash", model_.tokenizer_hash},
      {"param_count", model_.param_count},
      {"protocol_version", kProtocolVersion},
  };
  manifest["run_id"] = run_id_;
  MESHRL_ASSIGN_OR_RETURN(store::RunStore st, store::RunStore::create(o.run_dir, manifest));
  store_ = std::make_unique<store::RunStore>(std::move(st));
  hash_ = content_hash(model_.theta);
  version_ = 0;
  MESHRL_RETURN_IF_ERROR(store_->write_version(0, hash_, "", {model_.theta.names, model_.theta.tensors}, round_->optimizer_state(), ""));
  MESHRL_RETURN_IF_ERROR(store_->ledger().commit_initial(hash_));
  round_->open(0, mono_seconds());
  log("run " + run_id_ + " in " + o.run_dir.string() + ": version 0 " + hash_ + ", " + std::to_string(model_.param_count) +
      " parameters in " + std::to_string(model_.theta.size()) + " tensors");
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
  model_.spec = man.at("model_spec").get<std::string>();
  // Architecture and tokenizer from the warm start folder; the weights are then the version's.
  MESHRL_RETURN_IF_ERROR(load_common(man.at("warm_start").get<std::string>()));
  const int64_t v = store_->ledger().current_version();
  MESHRL_ASSIGN_OR_RETURN(store::VersionRecord rec, store_->load_version(v));
  NamedTensors w{rec.weights.names, rec.weights.tensors};
  MESHRL_RETURN_IF_ERROR(copy_parameters(w, model_.theta, "resumed weights"));
  hash_ = content_hash(model_.theta);
  if (hash_ != store_->ledger().current_hash())
    return data_loss("[coordinator] version " + std::to_string(v) + " weights hash " + hash_ + ", ledger says " +
                     store_->ledger().current_hash());
  MESHRL_RETURN_IF_ERROR(round_->restore_optimizer_state(rec.outer_state));
  version_ = v;
  finished_ = version_ >= config_.mesh.rounds;
  round_->open(v, mono_seconds());
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
      members_->record(e.node).name = e.node;
      members_->record(e.node).excluded = true;
    }
  // The nodes of the last round count towards the quorum until they are back or a lease has
  // passed: otherwise the first node to reconnect would close rounds on its own. A node that
  // joined before the crash and never left may still come back for the final version (a slow
  // node kept away by our restarts): all_nodes_gone waits for it too.
  std::set<std::string> expected, not_left;
  for (const store::UpdateRow& row : store_->ledger().updates()) {
    if ((row.state == store::UpdateState::kApplied && row.applied_version == v) || row.state == store::UpdateState::kReceived)
      expected.insert(row.key.node);
  }
  for (const store::NodeEvent& e : store_->ledger().node_events()) {
    if (e.event == "join" || e.event == "rejoin") not_left.insert(e.node);
    if (e.event == "leave") not_left.erase(e.node);
  }
  members_->restore(std::move(expected), std::move(not_left), mono_seconds() + config_.mesh.lease_s);
  log("resumed run " + run_id_ + " at version " + std::to_string(v) + " " + hash_ + " with " +
      std::to_string(round_->book().n_updates()) + " pending update(s)");
  return Status::ok();
}

// Re-aggregates what was acknowledged but not applied before a crash, under the same rules as
// submit (one vote per node: a pending update superseded by a fresher one of its node is rejected).
Status Coordinator::readmit_pending() {
  for (const store::UpdateRow& row : store_->ledger().updates())
    if (row.state == store::UpdateState::kApplied) round_->set_last_applied_base(row.key.node, row.key.base_version);
  for (const store::UpdateRow& row : store_->ledger().pending()) {
    const Admission a = admit_update(round_->rules(), version_, row.key.base_version, row.n_samples);
    std::string why = a.accepted ? "" : std::string(reject_code_name(a.code)) + ": " + a.reason;
    const RoundEntry e = round_entry(row.key, a, row.n_samples, nullptr);
    BookDecision d;
    if (why.empty()) {
      d = round_->offer(e);
      if (!d.accepted) why = std::string(reject_code_name(d.code)) + ": " + d.reason;
    }
    auto bytes = why.empty() ? store_->read_spooled(row.key.str()) : Result<std::string>(invalid_argument("unread"));
    Result<NamedTensors> u = invalid_argument("unread");
    if (why.empty() && !bytes.is_ok()) why = "spooled payload lost: " + bytes.status().message();
    if (why.empty()) {
      u = round_->decode(bytes.value(), row.key.str());
      if (!u.is_ok()) why = u.status().message();
      else if (auto st = check_same_layout(u.value(), model_.theta, "update"); !st.is_ok()) why = st.message();
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

}  // namespace meshrl::mesh

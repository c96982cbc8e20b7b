// The node's loop. See node.h.
#include "mesh/node.h"

#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include <xxhash.h>
#include <zstd.h>

#include "mesh/codec.h"
#include "mesh/content_hash.h"
#include "mesh/error_feedback.h"
#include "mesh/mesh_config.h"
#include "mesh/named_tensors.h"
#include "mesh/node_local_config.h"
#include "mesh/node_state.h"
#include "mesh/policy_params.h"
#include "mesh/protocol.h"
#include "mesh/rollout_commitment.h"
#include "mesh/sharded_task.h"
#include "mesh/update_signature.h"
#include "model/device.h"
#include "rl/lora_setup.h"
#include "rl/trainer.h"
#include "mesh/base_weights.h"
#include "rollout/policy.h"

namespace meshrl::mesh {

nlohmann::json NodeReport::to_json() const {
  return {{"final_version", final_version},       {"final_hash", final_hash},
          {"inner_steps", inner_steps},           {"updates_sent", updates_sent},
          {"updates_accepted", updates_accepted}, {"full_downloads", full_downloads},
          {"broadcasts_applied", broadcasts_applied}, {"bytes_up", bytes_up},
          {"bytes_down", bytes_down},             {"compute_seconds", compute_seconds},
          {"wall_seconds", wall_seconds},         {"base_source", base_source},
          {"compute_share", wall_seconds > 0 ? compute_seconds / wall_seconds : 0.0}};
}

uint64_t max_encoded_bytes(const NamedTensors& like, const CodecConfig& codec) {
  auto add = [](uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  uint64_t total = kUpdateHeaderBytes;
  for (size_t i = 0; i < like.size(); ++i) {
    const torch::Tensor& t = like.tensors[i];
    const uint64_t raw = update_raw_payload_bytes(codec.id, static_cast<uint64_t>(t.numel()), codec.block_size);
    uint64_t stored = raw;
    if (codec.zstd_level != 0) {
      // zstd's single-frame worst case, plus room for the frame's checksum.
      const size_t bound = raw > SIZE_MAX ? 0 : ZSTD_compressBound(static_cast<size_t>(raw));
      stored = ZSTD_isError(bound) || bound == 0 ? UINT64_MAX : add(static_cast<uint64_t>(bound), 64);
    }
    total = add(total, add(update_record_bytes(like.names[i].size(), static_cast<size_t>(t.dim())), stored));
  }
  return total;
}

DownloadCaps download_caps(const NamedTensors& params, const CodecConfig& broadcast_codec) {
  CodecConfig fp32;  // full weights: fp32, with zstd or without (the bound covers both)
  fp32.id = CodecId::kFp32;
  fp32.zstd_level = 3;
  return {max_encoded_bytes(params, fp32), max_encoded_bytes(params, broadcast_codec)};
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A refusal that retrying cannot fix: stop the node with the coordinator's reason.
struct Fatal {
  std::string reason;
};

class NodeRunner {
 public:
  NodeRunner(CoordinatorClient& c, const NodeOptions& o, const std::atomic<bool>* stop)
      : c_(c), o_(o), stop_ext_(stop), key_(o.signing_key ? *o.signing_key : trust::SigningKey::generate()) {}

  Result<NodeReport> run() {
    t0_ = now_s();
    MESHRL_ASSIGN_OR_RETURN(v1::JoinReply j, join());
    if (Status st = setup(j.manifest()); !st.is_ok()) {
      // Refused (a run this node will not serve, or a model that is not the run's): leave at
      // once rather than hold a place in the quorum until the lease runs out.
      v1::LeaveRequest lr;
      lr.set_name(o_.name);
      lr.set_session(session_);
      (void)c_.leave(lr);
      return st;
    }
    {
      MESHRL_ASSIGN_OR_RETURN(Fetched f, full_download(j.manifest().current_version(), j.manifest().current_hash()));
      rebase(std::move(f), /*first=*/true);
    }
    restore_state();
    // Continue the run's lr schedule, not our own from step 0 (a saved state that is further on
    // keeps its own step).
    if (j.manifest().schedule_step() > trainer_->step_count()) {
      log("inner schedule at step " + std::to_string(j.manifest().schedule_step()) + ", where the run is");
      trainer_->set_step_count(j.manifest().schedule_step());
    }
    {
      std::lock_guard<std::mutex> lk(prog_mu_);
      schedule_step_ = trainer_->step_count();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      ann_version_ = j.manifest().current_version();
      ann_hash_ = j.manifest().current_hash();
      ann_finished_ = j.manifest().finished();
    }
    std::thread hb([this] { heartbeat_loop(); });
    std::thread watcher([this] { watch_loop(); });
    Status st = main_loop();
    quit_ = true;
    cv_.notify_all();
    hb.join();
    watcher.join();
    if (!st.is_ok()) return st;
    // Wall time from the first inner step to the end: what compute_share is measured against
    // (joining and the first download come before it).
    rep_.wall_seconds = now_s() - t_train0_;
    v1::LeaveRequest lr;
    lr.set_name(o_.name);
    lr.set_session(session_);
    *lr.mutable_progress() = progress();
    (void)c_.leave(lr);
    log("left at version " + std::to_string(held_) + " hash " + held_hash_);
    return rep_;
  }

 private:
  void log(const std::string& s) const {
    if (o_.log) o_.log(s);
  }
  bool stopping() const { return quit_ || (stop_ext_ && stop_ext_->load()); }
  // Updates the /metrics counters, when the caller keeps them.
  template <class F>
  void count(F&& f) {
    if (o_.metrics) o_.metrics->update(std::forward<F>(f));
  }

  // Backoff sleep that wakes early on stop; fails once give_up_s passed without contact.
  Status backoff(double& delay, const std::string& why) {
    if (now_s() - last_contact_ > o_.give_up_s)
      return io_error("[node " + o_.name + "] no contact with the coordinator for " + std::to_string(static_cast<int>(o_.give_up_s)) +
                      " s: " + why);
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::duration<double>(delay), [this] { return stopping(); });
    delay = std::min(delay * 2, o_.max_backoff_s);
    if (stopping()) return io_error("[node " + o_.name + "] stopped");
    return Status::ok();
  }

  Result<v1::JoinReply> join() {
    v1::JoinRequest req;
    req.set_protocol_version(kProtocolVersion);
    req.set_name(o_.name);
    req.set_device(o_.device);
    req.set_threads(o_.threads);
    req.set_tokens_per_s(tokens_per_s_);
    req.set_run_id(run_id_);
    req.set_model_config_hash(model_hash_);
    req.set_signing_key(key_.public_key());
    double delay = 0.2;
    last_contact_ = std::max(last_contact_.load(), now_s());
    while (true) {
      auto r = c_.join(req);
      if (r.is_ok()) {
        last_contact_ = now_s();
        if (r.value().accepted() && r.value().protocol_version() != kProtocolVersion)
          return invalid_argument("[node " + o_.name + "] the coordinator speaks protocol version " +
                                  std::to_string(r.value().protocol_version()) + ", this node " + std::to_string(kProtocolVersion) +
                                  "; run the same meshrl release on every machine");
        if (r.value().accepted()) {
          session_ = r.value().session();
          run_id_ = r.value().manifest().run_id();
          count([&](NodeCounters& c) {
            c.name = o_.name;
            c.run_id = run_id_;
          });
          log("joined run " + run_id_ + " at version " + std::to_string(r.value().manifest().current_version()));
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

  // Joins again unless another thread already did since `failed_session` was refused.
  Status rejoin(uint64_t failed_session) {
    std::lock_guard<std::mutex> lk(join_mu_);
    if (session_ != failed_session) return Status::ok();
    MESHRL_ASSIGN_OR_RETURN(v1::JoinReply j, join());
    (void)j;
    return Status::ok();
  }

  Status setup(const v1::Manifest& m) {
    // Before anything is loaded: a run that needs a program or a path the node's operator did not
    // give is refused here, having run and opened nothing.
    MESHRL_ASSIGN_OR_RETURN(cfg_, node_run_config(m.run_config_toml(), o_.overrides, o_.name));
    MESHRL_ASSIGN_OR_RETURN(const std::string spec, node_model_spec(m.model_spec(), o_.model, o_.name));
    model::set_threads(o_.threads);
    MESHRL_ASSIGN_OR_RETURN(std::string device, model::resolve_device(o_.device));
    MESHRL_ASSIGN_OR_RETURN(rollout::Policy policy, rollout::load_policy(spec, device, cfg_.run.model.weight_seed));
    if (!m.base_weights_hash().empty()) {
      // [lora]: only adapters cross the wire each round, so the frozen base must be the run's:
      // held already, cached from an earlier download, or downloaded once now (base_weights.h).
      // The base is this model's parameters before the adapters, so their shapes cap it.
      const uint64_t base_cap = download_caps(trainable_parameters(*policy.model), CodecConfig{}).weights;
      auto fetch = [&]() -> Result<std::string> {
        log("downloading the run's frozen base " + m.base_weights_hash());
        MESHRL_ASSIGN_OR_RETURN(Download d, with_retry("download base", [&] { return c_.download_base(o_.name, session_, base_cap); }));
        MESHRL_RETURN_IF_ERROR(check_download_size(d, base_cap, "the frozen base"));
        if (d.hash != m.base_weights_hash())
          return invalid_argument("[node " + o_.name + "] the coordinator sent a base with hash " + d.hash + ", the manifest names " + m.base_weights_hash());
        return std::move(d.bytes);
      };
      MESHRL_ASSIGN_OR_RETURN(BaseSource src, ensure_base_weights(*policy.model, m.base_weights_hash(), o_.cache_dir, fetch,
                                                                  [&](const std::string& s) { log(s); }));
      rep_.base_source = base_source_name(src);
      log(std::string("frozen base ") + m.base_weights_hash() + ": " + rep_.base_source);
    }
    // [lora]: the same adapters as the coordinator's (A from the run's seed), so params_ is the B's.
    MESHRL_RETURN_IF_ERROR(rl::setup_lora(cfg_.run.lora, *policy.model, "run config").status());
    model_hash_ = model_config_hash(policy.model->config());
    if (model_hash_ != m.model_config_hash())
      return invalid_argument("[node " + o_.name + "] model '" + spec + "' (config hash " + model_hash_ +
                              ") is not this run's (" + m.model_config_hash() + "); pass the run's model with --model");
    if (tokenizer_hash(*policy.tokenizer) != m.tokenizer_hash())
      return invalid_argument("[node " + o_.name + "] the tokenizer of '" + spec + "' is not this run's");
    MESHRL_ASSIGN_OR_RETURN(std::unique_ptr<tasks::Task> inner, tasks::make_task(cfg_.run.task));
    auto task = std::make_shared<ShardedTask>(std::shared_ptr<const tasks::Task>(std::move(inner)), o_.shard_index, o_.shard_count);
    rl::GrpoSection g = cfg_.run.grpo;
    // Distinct prompts and samples per node: the run seed mixed with the node's name.
    g.seed = XXH3_64bits_withSeed(o_.name.data(), o_.name.size(), g.seed ^ cfg_.mesh.seed);
    trainer_ = std::make_unique<rl::GrpoTrainer>(std::move(policy), task, g, cfg_.run.eval);
    const std::string& bad = o_.test_misbehave;
    if (!bad.empty() && bad != "inflate_rewards" && bad != "sign_flip_x10" && bad != "sign_flip_x10_repeat")
      return invalid_argument("[node " + o_.name + "] --test-misbehave must be inflate_rewards, sign_flip_x10 or sign_flip_x10_repeat, got '" +
                              bad + "'");
    if (!bad.empty()) log("TEST MISBEHAVIOUR: " + bad);
    // Every scored rollout goes into the book the next update commits to (reward audits); the
    // prompt id is the whole task's seed, which the coordinator can regenerate.
    trainer_->set_on_scored([this, task, inflate = bad == "inflate_rewards"](const rl::Rollouts& r) {
      if (r.problems.empty()) return;
      const size_t G = r.scored_texts.size() / r.problems.size();
      for (size_t row = 0; row < r.scored_texts.size(); ++row) {
        // A completion whose verifier failed has no reward and is masked from the loss: nothing to commit to.
        if (r.scores[row].failed()) continue;
        const double truth = r.scores[row].reward;
        book_.add({task->inner_seed(r.prompt_seeds[row / G]), r.scored_texts[row], inflate ? truth + 1.0 : truth});
      }
    });
    params_ = trainable_parameters(*trainer_->policy().model);
    if (params_.numel() != m.param_count())
      return invalid_argument("[node " + o_.name + "] the manifest says the run exchanges " + std::to_string(m.param_count()) +
                              " parameters, model '" + spec + "' (with the run's [lora] section) trains " + std::to_string(params_.numel()) +
                              "; pass the run's model with --model");
    MESHRL_ASSIGN_OR_RETURN(CodecConfig cc, codec_config(cfg_.mesh));
    MESHRL_ASSIGN_OR_RETURN(codec_, make_codec(cc));
    MESHRL_ASSIGN_OR_RETURN(CodecConfig bc, broadcast_codec_config(cfg_.mesh));
    MESHRL_ASSIGN_OR_RETURN(broadcast_codec_, make_codec(bc));
    caps_ = download_caps(params_, bc);
    limits_.max_decoded_bytes = static_cast<uint64_t>(params_.numel()) * 4;
    limits_.max_tensors = static_cast<uint32_t>(params_.size());
    overlap_ = cfg_.mesh.mode == "async" && cfg_.mesh.overlap;
    log("task " + task->name() + ", " + std::to_string(params_.numel()) + " parameters, mode " + cfg_.mesh.mode +
        (overlap_ ? " with overlap" : "") + ", H = " + std::to_string(cfg_.mesh.inner_steps));
    return Status::ok();
  }

  // Runs a network call, rejoining on "not joined" and backing off on transport errors. Safe from
  // several threads (the uploader and the fetcher run beside the trainer in overlap mode).
  template <typename Call>
  auto with_retry(const char* what, Call call) -> decltype(call()) {
    double delay = 0.2;
    while (true) {
      const uint64_t used = session_;
      auto r = call();
      if (r.is_ok()) {
        last_contact_ = now_s();
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

  // The transport refuses a stream declaring more than the cap before holding it; this catches a
  // transport that does not.
  Status check_download_size(const Download& d, uint64_t cap, const std::string& what) const {
    if (d.bytes.size() <= cap) return Status::ok();
    return data_loss("[node " + o_.name + "] the coordinator sent " + std::to_string(d.bytes.size()) + " bytes for the " + what +
                     ", more than the " + std::to_string(cap) + " its shapes can encode to; refused");
  }

  // A verified version, ready to rebase onto.
  struct Fetched {
    NamedTensors theta;
    int64_t version = -1;
    std::string hash;
  };

  Result<Fetched> full_download(int64_t version, const std::string& expect_hash) {
    MESHRL_ASSIGN_OR_RETURN(Download d, with_retry("download", [&] { return c_.download_weights(o_.name, session_, version, caps_.weights); }));
    MESHRL_RETURN_IF_ERROR(check_download_size(d, caps_.weights, "weights of version " + std::to_string(version)));
    {
      std::lock_guard<std::mutex> lk(prog_mu_);
      rep_.bytes_down += d.bytes.size();
      ++rep_.full_downloads;
    }
    count([&](NodeCounters& c) {
      c.bytes_downloaded_weights += static_cast<double>(d.bytes.size());
      ++c.full_downloads;
    });
    MESHRL_ASSIGN_OR_RETURN(NamedTensors w, decode_update(d.bytes, limits_, "weights v" + std::to_string(version)));
    MESHRL_RETURN_IF_ERROR(check_same_layout(w, clone_named_tensors(params_), "downloaded weights"));  // CPU copies
    const std::string h = content_hash(w);
    if (h != d.hash || (!expect_hash.empty() && h != expect_hash))
      return data_loss("[node " + o_.name + "] downloaded weights of version " + std::to_string(version) + " hash to " + h +
                       ", the coordinator announced " + (expect_hash.empty() ? d.hash : expect_hash));
    log("downloaded version " + std::to_string(version) + " (" + std::to_string(d.bytes.size() >> 10) + " KiB), hash ok");
    return Fetched{std::move(w), version, h};
  }

  // Applies broadcasts from+1 .. version to a copy of `base` (the weights of `from`), checking each
  // version's hash; falls back to a full download on any mismatch or failure. Touches no node
  // state but counters, so it runs beside the trainer in overlap mode.
  Result<Fetched> fetch(NamedTensors next, int64_t from, int64_t version, const std::string& hash) {
    bool ok = version - from <= 16;  // far behind: one full download beats many deltas
    std::string why = ok ? "" : "too far behind";
    for (int64_t v = from + 1; ok && v <= version; ++v) {
      auto d = with_retry("broadcast", [&]() -> Result<Download> {
        MESHRL_ASSIGN_OR_RETURN(Download x, c_.get_broadcast(o_.name, session_, v, caps_.broadcast));
        MESHRL_RETURN_IF_ERROR(check_download_size(x, caps_.broadcast, "broadcast " + std::to_string(v)));
        return x;
      });
      if (!d.is_ok()) {
        ok = false;
        why = d.status().message();
        break;
      }
      auto delta = broadcast_codec_->decode(d.value().bytes, limits_, "broadcast v" + std::to_string(v));
      if (!delta.is_ok() || !apply_delta(next, delta.value()).is_ok()) {
        ok = false;
        why = delta.is_ok() ? "layout mismatch" : delta.status().message();
        break;
      }
      const std::string h = content_hash(next);
      const std::string& want = v == version ? hash : d.value().hash;
      if (!want.empty() && h != want) {
        ok = false;
        why = "hash " + h + " after applying broadcast " + std::to_string(v) + ", expected " + want;
        break;
      }
      count([&](NodeCounters& c) {
        c.bytes_downloaded_broadcast += static_cast<double>(d.value().bytes.size());
        ++c.broadcasts_applied;
      });
      std::lock_guard<std::mutex> lk(prog_mu_);
      rep_.bytes_down += d.value().bytes.size();
      ++rep_.broadcasts_applied;
    }
    if (ok) return Fetched{std::move(next), version, hash};
    log("broadcast path failed (" + why + "); downloading full weights of version " + std::to_string(version));
    return full_download(version, hash);
  }

  // local <- theta + (local - cut); cut, base <- theta. Main thread only.
  void rebase(Fetched f, bool first) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (first) params_.tensors[i].copy_(f.theta.tensors[i]);
      else params_.tensors[i].copy_(f.theta.tensors[i] + (params_.tensors[i].to(torch::kCPU) - cut_.tensors[i]));  // model may be on a device
    }
    base_ = std::move(f.theta);
    cut_ = clone_named_tensors(base_);
    held_ = f.version;
    held_hash_ = f.hash;
    count([&](NodeCounters& c) { c.policy_version = held_; });
    // The fault-injection tests match every version a node held against the ledger's hash.
    log("holding version " + std::to_string(held_) + " hash " + held_hash_);
    std::lock_guard<std::mutex> lk(prog_mu_);
    rep_.final_version = held_;
    rep_.final_hash = held_hash_;
  }

  Status sync_to(int64_t version, const std::string& hash) {
    if (version <= held_) return Status::ok();
    MESHRL_ASSIGN_OR_RETURN(Fetched f, fetch(clone_named_tensors(base_), held_, version, hash));
    rebase(std::move(f), false);
    return Status::ok();
  }

  // H inner steps; returns samples and mean reward.
  Status train_inner(int64_t& samples, double& reward) {
    samples = 0;
    reward = 0;
    const int64_t H = cfg_.mesh.inner_steps;
    for (int64_t s = 0; s < H && !stopping(); ++s) {
      const double t = now_s();
      MESHRL_ASSIGN_OR_RETURN(rl::StepMetrics m, trainer_->step());
      record_step(m, now_s() - t);
      // The samples behind the update are the scored ones (a failed verifier call is masked), which
      // is also what the update's rollout commitment holds (audits require the two to agree).
      samples += m.scored;
      reward += m.reward_mean / static_cast<double>(H);
    }
    return Status::ok();
  }

  void record_step(const rl::StepMetrics& m, double dt) {
    count([&](NodeCounters& c) {
      ++c.inner_steps;
      c.rollouts += m.samples;
      c.reward_mean = m.reward_mean;
      c.kl = m.train.kl;
      c.entropy = m.train.entropy;
      c.tokens_per_s = m.tokens_per_s;
      c.compute_seconds += dt;
      c.add_step_seconds(dt);
    });
    std::lock_guard<std::mutex> lk(prog_mu_);
    rep_.compute_seconds += dt;
    ++rep_.inner_steps;
    schedule_step_ = trainer_->step_count();
    last_reward_ = m.reward_mean;
    tokens_per_s_ = m.tokens_per_s;
    kl_sum_ += m.train.kl;
    entropy_sum_ += m.train.entropy;
    failures_ += m.verifier_failures;
    ++stat_steps_;
  }

  void add_idle(double dt) {
    count([&](NodeCounters& c) { c.idle_seconds += dt; });
    std::lock_guard<std::mutex> lk(prog_mu_);
    idle_seconds_ += dt;
  }

  // An update cut from the local weights, encoded, with its header; sent by send().
  struct Outgoing {
    v1::UpdateHeader header;
    std::string bytes;
    double reward = 0;
    std::shared_ptr<const NodeState> state;  // saved once acknowledged (--state-dir), else null
  };

  // Cuts an update: cut - local plus the error-feedback residual, encoded with the run's codec;
  // cut <- local. Main thread only (it owns cut_ and the residual).
  Result<Outgoing> cut_update(int64_t samples, double reward) {
    NamedTensors local = clone_named_tensors(params_);
    MESHRL_ASSIGN_OR_RETURN(NamedTensors delta, subtract_named_tensors(cut_, local));
    if (o_.test_misbehave.rfind("sign_flip_x10", 0) == 0)
      for (auto& t : delta.tensors) t = t * -10.0;  // the attack the robust aggregators must absorb
    NamedTensors comp = ef_.compensate(delta);
    // seq: microseconds since the epoch, so a restarted node never reuses an earlier key.
    const int64_t seq = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    Outgoing out;
    MESHRL_ASSIGN_OR_RETURN(out.bytes, codec_->encode(comp, static_cast<uint64_t>(seq)));
    MESHRL_ASSIGN_OR_RETURN(NamedTensors sent, codec_->decode(out.bytes, limits_, "own update"));
    MESHRL_RETURN_IF_ERROR(ef_.update(comp, sent));
    cut_ = std::move(local);
    if (!o_.state_dir.empty()) out.state = snapshot_state();
    // The reported reward is the mean of the rollouts the update commits to, so an audit can hold
    // the node to it (equal to the steps' mean up to float rounding).
    const RolloutCommitment commit = book_.seal(held_, seq);
    if (commit.n > 0) reward = commit.claimed_mean;
    v1::UpdateHeader& h = out.header;
    h.set_protocol_version(kProtocolVersion);
    h.set_name(o_.name);
    h.set_base_version(held_);
    h.set_seq(seq);
    h.set_n_samples(samples);
    h.set_declared_bytes(out.bytes.size());
    h.mutable_stats()->set_reward_mean(reward);
    h.mutable_stats()->set_inner_steps(cfg_.mesh.inner_steps);
    h.mutable_stats()->set_n_scored(commit.n);
    h.mutable_stats()->set_scored_digest(commit.digest);
    {  // KL and entropy averaged over the steps since the last cut (dashboards, metrics.jsonl)
      std::lock_guard<std::mutex> lk(prog_mu_);
      const double n = static_cast<double>(std::max<int64_t>(1, stat_steps_));
      h.mutable_stats()->set_kl(kl_sum_ / n);
      h.mutable_stats()->set_entropy(entropy_sum_ / n);
      kl_sum_ = entropy_sum_ = 0;
      // Completions whose verifier failed (masked from the loss), by kind: signed with the rest.
      h.mutable_stats()->set_verifier_timeouts(failures_.timeout);
      h.mutable_stats()->set_verifier_crashes(failures_.crash);
      h.mutable_stats()->set_verifier_garbage(failures_.garbage);
      failures_ = {};
      stat_steps_ = 0;
    }
    // Last: the signature covers every field above; retries resend this header as it is.
    sign_update(h, run_id_, out.bytes, key_);
    out.reward = reward;
    return out;
  }

  // Test-only (sign_flip_x10_repeat): `copies` more submissions of the same payload, each under
  // a new seq and with n_samples x `inflate`, properly re-signed; what the coordinator answers is
  // only logged. The attack one vote per round and the bounded claims must absorb.
  void send_attack_copies(const v1::UpdateHeader& real, const std::string& bytes, int64_t inflate, int copies) {
    for (int k = 1; k <= copies; ++k) {
      v1::UpdateHeader h = real;
      h.set_seq(real.seq() + (inflate > 1 ? -k : k));
      h.set_n_samples(real.n_samples() * inflate);
      h.set_session(session_);
      sign_update(h, run_id_, bytes, key_);
      auto r = c_.submit(h, bytes);
      log("attack copy " + std::to_string(k) + " (n_samples " + std::to_string(h.n_samples()) + "): " +
          (r.is_ok() ? (r.value().accepted() ? std::string("accepted") : r.value().code()) : r.status().message()));
    }
  }

  // Submits until the coordinator answers (retries keep the key, so it applies the update once).
  Status send(Outgoing out) {
    v1::UpdateHeader& h = out.header;
    if (o_.test_misbehave == "sign_flip_x10_repeat") send_attack_copies(h, out.bytes, 1'000'000'000, 1);
    MESHRL_ASSIGN_OR_RETURN(v1::SubmitReply r, with_retry("submit", [&]() -> Result<v1::SubmitReply> {
      h.set_session(session_);
      auto x = c_.submit(h, out.bytes);
      if (x.is_ok() && !x.value().accepted() && is_not_joined(x.value().reason())) return invalid_argument(x.value().reason());
      return x;
    }));
    if (o_.test_misbehave == "sign_flip_x10_repeat") send_attack_copies(h, out.bytes, 1, 4);
    if (r.accepted()) last_accepted_base_ = std::max(last_accepted_base_.load(), h.base_version());
    {
      std::lock_guard<std::mutex> lk(prog_mu_);
      ++rep_.updates_sent;
      rep_.bytes_up += out.bytes.size();
      if (r.accepted()) ++rep_.updates_accepted;
    }
    count([&](NodeCounters& c) {
      ++c.rounds;
      c.bytes_uploaded += static_cast<double>(out.bytes.size());
      if (r.accepted()) ++c.updates_accepted;
      else ++c.updates_rejected[r.code().empty() ? "unknown" : r.code()];
    });
    // The integration tests match these lines against the ledger (exactly once).
    const std::string key = o_.name + ".v" + std::to_string(h.base_version()) + ".s" + std::to_string(h.seq());
    char tail[96];
    std::snprintf(tail, sizeof tail, ", %zu bytes, reward %.4f", out.bytes.size(), out.reward);
    log("update " + key + (r.accepted() ? " acknowledged" : " rejected: " + r.reason()) + (r.duplicate() ? " (duplicate)" : "") + tail);
    if (r.has_audit()) answer_audit(r.audit());
    if (r.accepted() && out.state) save_state(*out.state);
    return Status::ok();
  }

  // The model's parameters in the inner optimizer's order (it was built from parameters()).
  std::vector<std::pair<std::string, torch::Tensor>> model_params() const {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& item : trainer_->policy().model->named_parameters()) out.emplace_back(item.key(), item.value());
    return out;
  }

  // What --state-dir keeps, as of this cut: main thread only (the trainer and residual are its).
  std::shared_ptr<const NodeState> snapshot_state() const {
    auto s = std::make_shared<NodeState>();
    s->run_id = run_id_;
    s->node = o_.name;
    s->base_version = held_;
    s->base_hash = held_hash_;
    s->trainer_step = trainer_->step_count();
    s->layout = layout_;
    s->residual = ef_.residual();
    for (auto& [name, t] : model_params()) s->param_names.push_back(name);
    s->optimizer = trainer_->optimizer_state();
    return s;
  }

  // A failed save costs only the restart's warm state, never the run: logged, not returned.
  void save_state(const NodeState& s) {
    Status st = save_node_state(o_.state_dir, s);
    if (!st.is_ok()) log("WARNING: node state not saved: " + st.message());
  }

  // At start, before the first inner step. A state file that does not fit (another run, node or
  // layout, corrupt) is ignored with one line saying why; it never fails the node.
  void restore_state() {
    if (o_.state_dir.empty()) return;
    auto params = model_params();
    layout_ = param_layout_fingerprint(params);
    auto loaded = load_node_state(o_.state_dir, {run_id_, o_.name, layout_});
    if (!loaded.is_ok()) {
      log(std::string(loaded.status().code() == StatusCode::kNotFound ? "node state: " : "WARNING: node state ignored: ") +
          loaded.status().message());
      return;
    }
    const NodeState& s = loaded.value();
    auto opt = fit_node_state(s, params, params_, o_.state_dir);
    Status st = opt.is_ok() ? Status::ok() : opt.status();
    if (st.is_ok()) st = ef_.set_residual(s.residual);
    if (st.is_ok()) st = trainer_->set_optimizer_state(opt.value());
    if (!st.is_ok()) {
      // set_state changes nothing on failure; a residual without its moments would be a
      // half-restored state, so start both from zero.
      ef_.reset();
      log("WARNING: node state ignored: " + st.message());
      return;
    }
    trainer_->set_step_count(s.trainer_step);
    int64_t moments = 0, adam_step = 0;  // AdamW's own count (bias correction), the largest of any parameter
    for (const auto& m : opt.value().params)
      if (m) ++moments, adam_step = std::max(adam_step, m->step);
    char line[256];
    std::snprintf(line, sizeof line,
                  " (saved at version %lld, now at %lld): residual of %zu tensors (norm %.4g), "
                  "AdamW moments of %lld parameters (AdamW step %lld), trainer step %lld",
                  static_cast<long long>(s.base_version), static_cast<long long>(held_), s.residual.size(), ef_.residual_norm(),
                  static_cast<long long>(moments), static_cast<long long>(adam_step), static_cast<long long>(s.trainer_step));
    log("restored node state from " + node_state_path(o_.state_dir).string() + line);
  }

  // Sends the committed rollouts of the audited update, with the texts of the drawn ones. A
  // failed answer is the coordinator's call to make (the update is then rejected), not ours.
  void answer_audit(const v1::AuditRequest& q) {
    const std::string key = o_.name + ".v" + std::to_string(q.base_version()) + ".s" + std::to_string(q.seq());
    auto rollouts = book_.sealed(q.base_version(), q.seq());
    if (!rollouts) {
      log("audit of " + key + ": its rollouts are no longer kept; not answering");
      return;
    }
    v1::AuditAnswer a;
    a.set_name(o_.name);
    a.set_base_version(q.base_version());
    a.set_seq(q.seq());
    std::vector<bool> drawn(rollouts->size(), false);
    for (int64_t i : q.indices())
      if (i >= 0 && i < static_cast<int64_t>(drawn.size())) drawn[static_cast<size_t>(i)] = true;
    for (size_t i = 0; i < rollouts->size(); ++i) {
      const ScoredRollout& r = (*rollouts)[i];
      v1::ScoredRollout* m = a.add_rollouts();
      m->set_prompt_id(r.prompt_id);
      m->set_completion_hash(completion_hash(r.completion));
      m->set_claimed_reward(r.claimed_reward);
      if (drawn[i]) m->set_completion(r.completion);
    }
    auto v = with_retry("audit", [&]() -> Result<v1::AuditVerdict> {
      a.set_session(session_);
      auto x = c_.answer_audit(a);
      if (x.is_ok() && !x.value().passed() && is_not_joined(x.value().reason())) return invalid_argument(x.value().reason());
      return x;
    });
    if (!v.is_ok()) log("audit of " + key + ": " + v.status().message());
    else if (v.value().passed()) log("audit of " + key + " passed (" + std::to_string(q.indices_size()) + " rollouts re-scored)");
    else log("audit of " + key + " failed: " + v.value().code() + ": " + v.value().reason());
  }

  void announced(int64_t& v, std::string& h, bool& fin) {
    std::lock_guard<std::mutex> lk(mu_);
    v = ann_version_;
    h = ann_hash_;
    fin = ann_finished_;
  }

  // Blocks until the coordinator announces a version newer than `base` (or the end).
  Status wait_for_version(int64_t base) {
    std::unique_lock<std::mutex> lk(mu_);
    while (!(stopping() || ann_version_ > base || ann_finished_)) {
      cv_.wait_for(lk, std::chrono::seconds(1));
      if (now_s() - last_contact_ > o_.give_up_s)
        return io_error("[node " + o_.name + "] no contact with the coordinator for " +
                        std::to_string(static_cast<int>(o_.give_up_s)) + " s");
    }
    return Status::ok();
  }

  // Sync (and async without overlap): train H steps, send, wait for the next version, rebase.
  Status blocking_loop() {
    while (!stopping()) {
      int64_t av;
      std::string ah;
      bool fin;
      announced(av, ah, fin);
      if (av > held_) MESHRL_RETURN_IF_ERROR(sync_to(av, ah));
      if (fin && held_ >= av) return Status::ok();
      int64_t samples = 0;
      double reward = 0;
      MESHRL_RETURN_IF_ERROR(train_inner(samples, reward));
      if (stopping()) break;
      const int64_t base = held_;
      MESHRL_ASSIGN_OR_RETURN(Outgoing out, cut_update(samples, reward));
      const double t = now_s();
      MESHRL_RETURN_IF_ERROR(send(std::move(out)));
      MESHRL_RETURN_IF_ERROR(wait_for_version(base));
      add_idle(now_s() - t);
    }
    return io_error("[node " + o_.name + "] stopped");
  }

  // Async with overlap: the trainer never waits for the network. At most one upload and one
  // fetch run in the background; a fetched version is rebased onto between two inner steps.
  Status overlap_loop() {
    std::future<Status> upload;
    std::future<Result<Fetched>> fetching;
    int64_t fetching_version = -1;
    int64_t samples = 0, steps = 0;
    double reward = 0;
    auto finish_upload = [&]() -> Status {
      if (!upload.valid()) return Status::ok();
      const double t = now_s();
      Status st = upload.get();
      add_idle(now_s() - t);
      return st;
    };
    while (!stopping()) {
      int64_t av;
      std::string ah;
      bool fin;
      announced(av, ah, fin);
      if (fetching.valid() && fetching.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        MESHRL_ASSIGN_OR_RETURN(Fetched f, fetching.get());
        rebase(std::move(f), false);
      }
      if (fin && held_ >= av) {
        if (fetching.valid()) (void)fetching.get();
        return finish_upload();
      }
      if (!fetching.valid() && av > held_) {
        fetching_version = av;
        fetching = std::async(std::launch::async, [this, next = clone_named_tensors(base_), from = held_, av, ah]() mutable {
          return fetch(std::move(next), from, av, ah);
        });
      }
      if (fin) {  // the last version is announced: stop training, wait for it
        if (fetching.valid()) {
          const double t = now_s();
          fetching.wait();
          add_idle(now_s() - t);
        }
        continue;
      }
      if (steps < cfg_.mesh.inner_steps) {
        const double t = now_s();
        MESHRL_ASSIGN_OR_RETURN(rl::StepMetrics m, trainer_->step());
        record_step(m, now_s() - t);
        samples += m.scored;  // as in train_inner
        reward += m.reward_mean;
        if (++steps < cfg_.mesh.inner_steps) continue;
      }
      MESHRL_RETURN_IF_ERROR(finish_upload());  // one update in flight at a time
      // The coordinator takes one update per node per base version: when the last accepted one
      // sits on the version held now (the next has not arrived yet), wait for it instead of
      // cutting an update that would be refused.
      if (held_ <= last_accepted_base_.load()) {
        const double t = now_s();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        add_idle(now_s() - t);
        continue;
      }
      MESHRL_ASSIGN_OR_RETURN(Outgoing out, cut_update(samples, reward / static_cast<double>(steps)));
      upload = std::async(std::launch::async, [this, o = std::move(out)]() mutable { return send(std::move(o)); });
      samples = steps = 0;
      reward = 0;
    }
    (void)fetching_version;
    return io_error("[node " + o_.name + "] stopped");
  }

  Status main_loop() {
    t_train0_ = now_s();
    return overlap_ ? overlap_loop() : blocking_loop();
  }

  v1::NodeProgress progress() {
    std::lock_guard<std::mutex> lk(prog_mu_);
    v1::NodeProgress p;
    p.set_version(rep_.final_version);
    p.set_hash(rep_.final_hash);
    p.set_inner_steps(rep_.inner_steps);
    p.set_reward_mean(last_reward_);
    p.set_compute_seconds(rep_.compute_seconds);
    p.set_wall_seconds(now_s() - t0_);
    p.set_schedule_step(schedule_step_);
    return p;
  }

  void heartbeat_loop() {
    while (!stopping()) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait_for(lk, std::chrono::duration<double>(cfg_.mesh.heartbeat_s), [this] { return stopping(); });
      }
      if (stopping()) break;
      v1::HeartbeatRequest req;
      req.set_name(o_.name);
      req.set_session(session_);
      *req.mutable_progress() = progress();
      auto r = c_.heartbeat(req);
      if (r.is_ok() && r.value().ok()) last_contact_ = now_s();
      if (r.is_ok() && r.value().finished()) cv_.notify_all();
    }
  }

  void watch_loop() {
    while (!stopping()) {
      const uint64_t used = session_;
      Status s = c_.watch(o_.name, used, [this](const v1::VersionAnnouncement& a) {
        {
          std::lock_guard<std::mutex> lk(mu_);
          if (a.version() >= ann_version_) {
            ann_version_ = a.version();
            ann_hash_ = a.hash();
            ann_finished_ = a.finished();
          }
        }
        cv_.notify_all();
        return !stopping();
      });
      if (stopping()) break;
      // The coordinator answers a watch on a session it does not know (it restarted, or our lease
      // expired) with "not joined": join again, or no announcement ever reaches this node.
      if (!s.is_ok() && s.message().find("not joined") != std::string::npos) {
        log("watch: " + s.message());
        (void)rejoin(used);
      }
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(s.is_ok() ? 100 : 500), [this] { return stopping(); });
    }
  }

  CoordinatorClient& c_;
  NodeOptions o_;
  const std::atomic<bool>* stop_ext_;
  std::atomic<bool> quit_{false};
  std::atomic<uint64_t> session_{0};
  std::string run_id_, model_hash_;
  std::string layout_;  // param_layout_fingerprint of the model (--state-dir only)
  const trust::SigningKey key_;  // signs every update (registered at each join)
  double t0_ = 0, t_train0_ = 0, idle_seconds_ = 0;
  std::mutex join_mu_;
  std::atomic<double> last_contact_{0};
  double tokens_per_s_ = 0, last_reward_ = 0;
  double kl_sum_ = 0, entropy_sum_ = 0;  // since the last cut update (under prog_mu_)
  tasks::VerifierFailureCounts failures_;  // since the last cut update (under prog_mu_)
  int64_t stat_steps_ = 0;
  int64_t schedule_step_ = 0;  // the trainer's lr schedule step, for heartbeats (under prog_mu_)

  MeshRunConfig cfg_;
  std::unique_ptr<rl::GrpoTrainer> trainer_;
  NamedTensors params_;   // views into the trainer's model
  NamedTensors base_;     // the held version's weights, bit-exact
  NamedTensors cut_;      // local weights when the last update was cut (or base after a rebase)
  std::unique_ptr<UpdateCodec> codec_;            // our updates
  std::unique_ptr<UpdateCodec> broadcast_codec_;  // the coordinator's broadcasts
  UpdateDecodeLimits limits_;
  DownloadCaps caps_;     // what one download may take (download_caps)
  ErrorFeedback ef_;
  ScoredRolloutBook book_;  // the rollouts each update commits to (reward audits)
  bool overlap_ = false;
  int64_t held_ = -1;
  std::atomic<int64_t> last_accepted_base_{-1};  // base version of the last update the coordinator accepted
  std::string held_hash_;

  std::mutex mu_;                 // the announcement, and the condition the loops sleep on
  std::condition_variable cv_;
  int64_t ann_version_ = -1;
  std::string ann_hash_;
  bool ann_finished_ = false;

  std::mutex prog_mu_;
  NodeReport rep_;
};

}  // namespace

Result<NodeReport> run_node(CoordinatorClient& client, const NodeOptions& options, const std::atomic<bool>* stop) {
  NodeRunner r(client, options, stop);
  return r.run();
}

}  // namespace meshrl::mesh

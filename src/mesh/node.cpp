// The node: builds its rooms from the run's manifest and runs the sync or the overlap loop over
// them. See node.h.
#include "mesh/node.h"

#include <chrono>
#include <future>
#include <thread>

#include <xxhash.h>

#include "mesh/base_weights.h"
#include "mesh/codec.h"
#include "mesh/error_feedback.h"
#include "mesh/inner_loop.h"
#include "mesh/mesh_config.h"
#include "mesh/node_local_config.h"
#include "mesh/node_session.h"
#include "mesh/node_state_keeper.h"
#include "mesh/node_watch.h"
#include "mesh/policy_params.h"
#include "mesh/rollout_commitment.h"
#include "mesh/sharded_task.h"
#include "mesh/update_sender.h"
#include "mesh/version_follower.h"
#include "model/device.h"
#include "rl/lora_setup.h"
#include "rl/trainer.h"
#include "rollout/policy.h"

namespace meshrl::mesh {

namespace {

class NodeRunner {
 public:
  NodeRunner(CoordinatorClient& c, const NodeOptions& o, const std::atomic<bool>* stop)
      : o_(o),
        key_(o.signing_key ? *o.signing_key : trust::SigningKey::generate()),
        tally_(o.metrics),
        session_(c, o_, key_.public_key(), tally_, stop),
        watch_(session_, tally_) {}

  Result<NodeReport> run() {
    MESHRL_ASSIGN_OR_RETURN(v1::JoinReply j, session_.join());
    if (Status st = setup(j.manifest()); !st.is_ok()) {
      // Refused (a run this node will not serve, or a model that is not the run's): leave at
      // once rather than hold a place in the quorum until the lease runs out.
      session_.leave(/*report_progress=*/false);
      return st;
    }
    {
      MESHRL_ASSIGN_OR_RETURN(FetchedVersion f, follower_->full_download(j.manifest().current_version(), j.manifest().current_hash()));
      follower_->rebase(std::move(f), /*first=*/true);
    }
    keeper_->restore();
    // Continue the run's lr schedule, not our own from step 0 (a saved state that is further on
    // keeps its own step).
    if (j.manifest().schedule_step() > trainer_->step_count()) {
      log("inner schedule at step " + std::to_string(j.manifest().schedule_step()) + ", where the run is");
      trainer_->set_step_count(j.manifest().schedule_step());
    }
    tally_.set_schedule_step(trainer_->step_count());
    watch_.start(j.manifest(), cfg_.mesh.heartbeat_s);
    // Wall time from the first inner step to the end: what compute_share is measured against
    // (joining and the first download come before it).
    const double t_train0 = steady_now_s();
    Status st = overlap_ ? overlap_loop() : blocking_loop();
    watch_.stop();
    if (!st.is_ok()) return st;
    NodeReport rep = tally_.report();
    rep.wall_seconds = steady_now_s() - t_train0;
    session_.leave(/*report_progress=*/true);
    log("left at version " + std::to_string(follower_->held()) + " hash " + follower_->held_hash());
    return rep;
  }

 private:
  void log(const std::string& s) const { session_.log(s); }

  // [lora]: only adapters cross the wire each round, so the frozen base must be the run's: held
  // already, cached from an earlier download, or downloaded once now (base_weights.h). The base
  // is this model's parameters before the adapters, so their shapes cap it.
  Status take_frozen_base(const v1::Manifest& m, model::TransformerImpl& model) {
    const uint64_t base_cap = download_caps(trainable_parameters(model), CodecConfig{}).weights;
    auto fetch = [&]() -> Result<std::string> {
      log("downloading the run's frozen base " + m.base_weights_hash());
      MESHRL_ASSIGN_OR_RETURN(Download d, session_.with_retry("download base", [&] {
        return session_.client().download_base(o_.name, session_.session(), base_cap);
      }));
      MESHRL_RETURN_IF_ERROR(check_download_size(o_.name, d.bytes.size(), base_cap, "the frozen base"));
      if (d.hash != m.base_weights_hash())
        return invalid_argument("[node " + o_.name + "] the coordinator sent a base with hash " + d.hash + ", the manifest names " +
                                m.base_weights_hash());
      return std::move(d.bytes);
    };
    MESHRL_ASSIGN_OR_RETURN(BaseSource src, ensure_base_weights(model, m.base_weights_hash(), o_.cache_dir, fetch,
                                                                [&](const std::string& s) { log(s); }));
    tally_.set_base_source(base_source_name(src));
    log(std::string("frozen base ") + m.base_weights_hash() + ": " + base_source_name(src));
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
    if (!m.base_weights_hash().empty()) MESHRL_RETURN_IF_ERROR(take_frozen_base(m, *policy.model));
    // [lora]: the same adapters as the coordinator's (A from the run's seed), so the exchanged set is the B's.
    MESHRL_RETURN_IF_ERROR(rl::setup_lora(cfg_.run.lora, *policy.model, "run config").status());
    const std::string model_hash = model_config_hash(policy.model->config());
    session_.set_model_hash(model_hash);
    if (model_hash != m.model_config_hash())
      return invalid_argument("[node " + o_.name + "] model '" + spec + "' (config hash " + model_hash + ") is not this run's (" +
                              m.model_config_hash() + "); pass the run's model with --model");
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
    NamedTensors params = trainable_parameters(*trainer_->policy().model);
    if (params.numel() != m.param_count())
      return invalid_argument("[node " + o_.name + "] the manifest says the run exchanges " + std::to_string(m.param_count()) +
                              " parameters, model '" + spec + "' (with the run's [lora] section) trains " + std::to_string(params.numel()) +
                              "; pass the run's model with --model");
    MESHRL_ASSIGN_OR_RETURN(CodecConfig cc, codec_config(cfg_.mesh));
    MESHRL_ASSIGN_OR_RETURN(std::unique_ptr<UpdateCodec> codec, make_codec(cc));
    MESHRL_ASSIGN_OR_RETURN(CodecConfig bc, broadcast_codec_config(cfg_.mesh));
    MESHRL_ASSIGN_OR_RETURN(std::unique_ptr<UpdateCodec> broadcast_codec, make_codec(bc));
    const DownloadCaps caps = download_caps(params, bc);
    UpdateDecodeLimits limits;
    limits.max_decoded_bytes = static_cast<uint64_t>(params.numel()) * 4;
    limits.max_tensors = static_cast<uint32_t>(params.size());
    const int64_t n_params = params.numel();
    follower_ = std::make_unique<VersionFollower>(session_, tally_, std::move(params), std::move(broadcast_codec), limits, caps);
    keeper_ = std::make_unique<NodeStateKeeper>(o_, session_, *trainer_, *follower_, ef_);
    sender_ = std::make_unique<UpdateSender>(session_, *follower_, tally_, book_, ef_, keeper_.get(), key_, std::move(codec), limits,
                                             cfg_.mesh.inner_steps, o_.test_misbehave);
    inner_ = std::make_unique<InnerLoop>(*trainer_, tally_, cfg_.mesh.inner_steps, [this] { return session_.stopping(); });
    overlap_ = cfg_.mesh.mode == "async" && cfg_.mesh.overlap;
    log("task " + task->name() + ", " + std::to_string(n_params) + " parameters, mode " + cfg_.mesh.mode +
        (overlap_ ? " with overlap" : "") + ", H = " + std::to_string(cfg_.mesh.inner_steps));
    return Status::ok();
  }

  // Sync (and async without overlap): train H steps, send, wait for the next version, rebase.
  Status blocking_loop() {
    while (!session_.stopping()) {
      const Announcement a = watch_.announced();
      if (a.version > follower_->held()) MESHRL_RETURN_IF_ERROR(follower_->sync_to(a.version, a.hash));
      if (a.finished && follower_->held() >= a.version) return Status::ok();
      InnerWindow w;
      MESHRL_RETURN_IF_ERROR(inner_->run(w));
      if (session_.stopping()) break;
      const int64_t base = follower_->held();
      MESHRL_ASSIGN_OR_RETURN(OutgoingUpdate out, sender_->cut_update(w.samples, w.reward_mean()));
      const double t = steady_now_s();
      MESHRL_RETURN_IF_ERROR(sender_->send(std::move(out)));
      MESHRL_RETURN_IF_ERROR(watch_.wait_for_version(base));
      tally_.add_idle(steady_now_s() - t);
    }
    return io_error("[node " + o_.name + "] stopped");
  }

  // Async with overlap: the trainer never waits for the network. At most one upload and one
  // fetch run in the background; a fetched version is rebased onto between two inner steps.
  Status overlap_loop() {
    std::future<Status> upload;
    std::future<Result<FetchedVersion>> fetching;
    auto finish_upload = [&]() -> Status {
      if (!upload.valid()) return Status::ok();
      const double t = steady_now_s();
      Status st = upload.get();
      tally_.add_idle(steady_now_s() - t);
      return st;
    };
    bool ended = false;  // the run's last version is announced and held
    // Between two inner steps: rebase onto a fetched version and start fetching a newer one. Once
    // the last version is announced, training stops: this waits for it, then ends the window.
    auto between_steps = [&]() -> Result<bool> {
      while (!session_.stopping()) {
        const Announcement a = watch_.announced();
        if (fetching.valid() && fetching.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
          MESHRL_ASSIGN_OR_RETURN(FetchedVersion f, fetching.get());
          follower_->rebase(std::move(f), false);
        }
        if (a.finished && follower_->held() >= a.version) {
          ended = true;
          return false;
        }
        if (!fetching.valid() && a.version > follower_->held()) {
          fetching = std::async(std::launch::async, [this, next = follower_->held_weights(), from = follower_->held(), a]() mutable {
            return follower_->fetch(std::move(next), from, a.version, a.hash);
          });
        }
        if (!a.finished) return true;
        if (fetching.valid()) {
          const double t = steady_now_s();
          fetching.wait();
          tally_.add_idle(steady_now_s() - t);
        }
      }
      return false;
    };
    InnerWindow w;
    while (!session_.stopping()) {
      MESHRL_RETURN_IF_ERROR(inner_->run(w, between_steps));
      if (ended || session_.stopping()) break;
      MESHRL_RETURN_IF_ERROR(finish_upload());  // one update in flight at a time
      // The coordinator takes one update per node per base version: when the last accepted one
      // sits on the version held now (the next has not arrived yet), wait for it instead of
      // cutting an update that would be refused.
      if (follower_->held() <= sender_->last_accepted_base()) {
        const double t = steady_now_s();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        tally_.add_idle(steady_now_s() - t);
        MESHRL_ASSIGN_OR_RETURN(const bool go_on, between_steps());
        (void)go_on;  // the loop's checks see the end or the stop
        continue;
      }
      MESHRL_ASSIGN_OR_RETURN(OutgoingUpdate out, sender_->cut_update(w.samples, w.reward_mean()));
      upload = std::async(std::launch::async, [this, o = std::move(out)]() mutable { return sender_->send(std::move(o)); });
      w = InnerWindow{};
    }
    if (!ended) return io_error("[node " + o_.name + "] stopped");
    if (fetching.valid()) (void)fetching.get();
    return finish_upload();
  }

  const NodeOptions o_;
  const trust::SigningKey key_;  // signs every update (registered at each join)
  NodeTally tally_;
  NodeSession session_;
  NodeWatch watch_;  // heartbeats and version announcements, while the loops run
  MeshRunConfig cfg_;
  std::unique_ptr<rl::GrpoTrainer> trainer_;
  ScoredRolloutBook book_;  // the rollouts each update commits to (reward audits)
  ErrorFeedback ef_;
  std::unique_ptr<VersionFollower> follower_;
  std::unique_ptr<NodeStateKeeper> keeper_;
  std::unique_ptr<UpdateSender> sender_;
  std::unique_ptr<InnerLoop> inner_;
  bool overlap_ = false;
};

}  // namespace

Result<NodeReport> run_node(CoordinatorClient& client, const NodeOptions& options, const std::atomic<bool>* stop) {
  NodeRunner r(client, options, stop);
  return r.run();
}

}  // namespace meshrl::mesh

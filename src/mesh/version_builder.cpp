// The open round and its close. See version_builder.h.
#include "mesh/version_builder.h"

#include <torch/torch.h>

#include "core/fault_point.h"
#include "mesh/content_hash.h"
#include "mesh/robust_aggregate.h"

namespace meshrl::mesh {

namespace {

constexpr const char* kOuterPrefix = "outer/";
constexpr const char* kEfPrefix = "ef/";

NamedTensors unpack_prefix(const store::TensorSet& s, const std::string& prefix) {
  NamedTensors out;
  for (size_t i = 0; i < s.names.size(); ++i)
    if (s.names[i].rfind(prefix, 0) == 0) {
      out.names.push_back(s.names[i].substr(prefix.size()));
      out.tensors.push_back(s.tensors[i]);
    }
  return out;
}

}  // namespace

RoundStats round_stats(const RoundBook& book) {
  RoundStats s;
  s.n_updates = book.n_updates();
  s.mean_staleness = book.mean_staleness();
  s.reward_mean = book.mean_reward();
  s.kl_mean = book.mean_kl();
  s.entropy_mean = book.mean_entropy();
  s.samples = book.samples();
  return s;
}

Result<std::unique_ptr<VersionBuilder>> VersionBuilder::make(const MeshRunConfig& config, const UpdateDecodeLimits& limits) {
  const MeshSection& m = config.mesh;
  std::unique_ptr<VersionBuilder> b(new VersionBuilder());
  b->rules_.mode = m.mode == "async" ? RoundMode::kAsync : RoundMode::kSync;
  b->rules_.quorum = m.quorum;
  b->rules_.deadline_s = m.round_deadline_s;
  b->rules_.max_staleness = m.max_staleness;
  b->rules_.max_samples_per_update =
      samples_per_update_bound(m.inner_steps, config.run.grpo.prompts_per_step, config.run.grpo.group_size);
  b->limits_ = limits;
  MESHRL_ASSIGN_OR_RETURN(CodecConfig cc, codec_config(m));
  MESHRL_ASSIGN_OR_RETURN(b->codec_, make_codec(cc));
  MESHRL_ASSIGN_OR_RETURN(CodecConfig bc, broadcast_codec_config(m));
  MESHRL_ASSIGN_OR_RETURN(b->broadcast_codec_, make_codec(bc));
  OuterOptimizerConfig oc;
  oc.lr = m.outer_lr;
  oc.momentum = m.outer_momentum;
  oc.nesterov = m.outer_nesterov;
  b->outer_ = std::make_unique<OuterOptimizer>(oc);
  AggregatorConfig ac;
  ac.rule = m.aggregator;
  ac.trim_fraction = m.trim_fraction;
  ac.clip_tau = m.clip_tau;
  ac.clip_iters = m.clip_iters;
  MESHRL_ASSIGN_OR_RETURN(b->acc_, make_aggregator(ac));
  return b;
}

void VersionBuilder::open(int64_t version, double now_s) { open_ = {version, now_s, 0, 0}; }

Result<NamedTensors> VersionBuilder::decode(const std::string& bytes, const std::string& what) const {
  return codec_->decode(bytes, limits_, what);
}

Status VersionBuilder::count(const RoundEntry& e, const BookDecision& d, const NamedTensors& update) {
  if (d.count_now) MESHRL_RETURN_IF_ERROR(acc_->add(update, e.weight));
  book_.place(e, d);
  return Status::ok();
}

CloseReason VersionBuilder::should_close(int64_t nodes_online, double now_s) {
  open_.n_updates = book_.n_updates();
  open_.n_fresh_nodes = book_.n_fresh_nodes();
  return ::meshrl::mesh::should_close(rules_, open_, nodes_online, now_s);
}

Result<BuiltVersion> VersionBuilder::build(NamedTensors& theta, int64_t nodes_online, const SpoolReader& read_spooled) {
  BuiltVersion out;
  // The held stale updates: no fresher update of their nodes came, so each counts now.
  for (const RoundEntry& e : book_.held()) {
    MESHRL_ASSIGN_OR_RETURN(std::string bytes, read_spooled(e.key.str()));
    MESHRL_ASSIGN_OR_RETURN(NamedTensors u, codec_->decode(bytes, limits_, "update " + e.key.str()));
    MESHRL_RETURN_IF_ERROR(acc_->add(u, e.weight));
  }
  for (const RoundEntry& e : book_.entries()) out.applied.emplace_back(e.key, e.weight);
  MESHRL_ASSIGN_OR_RETURN(NamedTensors pg, acc_->finish());
  if (rules_.mode == RoundMode::kAsync) {
    // An async version moves the weights by its updates' share of a full round (round.h).
    out.share = async_round_share(acc_->total_weight(), book_.samples(), book_.n_updates(), nodes_online);
    torch::NoGradGuard no_grad;
    for (auto& t : pg.tensors) t.mul_(out.share);
  }
  MESHRL_ASSIGN_OR_RETURN(NamedTensors delta, outer_->step(pg));
  NamedTensors compensated = ef_.compensate(delta);
  out.version = open_.version + 1;
  MESHRL_ASSIGN_OR_RETURN(out.broadcast, broadcast_codec_->encode(compensated, static_cast<uint64_t>(out.version)));
  MESHRL_ASSIGN_OR_RETURN(NamedTensors sent, broadcast_codec_->decode(out.broadcast, limits_, "broadcast"));
  MESHRL_RETURN_IF_ERROR(ef_.update(compensated, sent));
  {
    torch::NoGradGuard no_grad;
    MESHRL_RETURN_IF_ERROR(apply_delta(theta, sent));
  }
  fault_point("mid_aggregate", out.version);  // test-only crash points: core/fault_point.h
  out.hash = content_hash(theta);
  out.stats = round_stats(book_);
  return out;
}

void VersionBuilder::reopen(int64_t version, double now_s) {
  acc_->reset();
  book_.close();
  open(version, now_s);
}

store::TensorSet VersionBuilder::optimizer_state() const {
  const NamedTensors outer = outer_->state(), ef = ef_.residual();
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

Status VersionBuilder::restore_optimizer_state(const store::TensorSet& s) {
  MESHRL_RETURN_IF_ERROR(outer_->set_state(unpack_prefix(s, kOuterPrefix)));
  return ef_.set_residual(unpack_prefix(s, kEfPrefix));
}

}  // namespace meshrl::mesh

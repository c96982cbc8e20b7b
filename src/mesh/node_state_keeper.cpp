// A node's local training state across restarts. See node_state_keeper.h.
#include "mesh/node_state_keeper.h"

#include <algorithm>
#include <cstdio>

namespace meshrl::mesh {

NodeStateKeeper::NodeStateKeeper(const NodeOptions& options, NodeSession& session, rl::GrpoTrainer& trainer,
                                 const VersionFollower& follower, ErrorFeedback& ef)
    : o_(options), session_(session), trainer_(trainer), follower_(follower), ef_(ef) {
  if (enabled()) layout_ = param_layout_fingerprint(model_params());
}

std::vector<std::pair<std::string, torch::Tensor>> NodeStateKeeper::model_params() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : trainer_.policy().model->named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

std::shared_ptr<const NodeState> NodeStateKeeper::snapshot() const {
  if (!enabled()) return nullptr;
  auto s = std::make_shared<NodeState>();
  s->run_id = session_.run_id();
  s->node = o_.name;
  s->base_version = follower_.held();
  s->base_hash = follower_.held_hash();
  s->trainer_step = trainer_.step_count();
  s->layout = layout_;
  s->residual = ef_.residual();
  for (auto& [name, t] : model_params()) s->param_names.push_back(name);
  s->optimizer = trainer_.optimizer_state();
  return s;
}

void NodeStateKeeper::save(const NodeState& state) {
  Status st = save_node_state(o_.state_dir, state);
  if (!st.is_ok()) session_.log("WARNING: node state not saved: " + st.message());
}

void NodeStateKeeper::restore() {
  if (!enabled()) return;
  auto params = model_params();
  auto loaded = load_node_state(o_.state_dir, {session_.run_id(), o_.name, layout_});
  if (!loaded.is_ok()) {
    session_.log(std::string(loaded.status().code() == StatusCode::kNotFound ? "node state: " : "WARNING: node state ignored: ") +
                 loaded.status().message());
    return;
  }
  const NodeState& s = loaded.value();
  auto opt = fit_node_state(s, params, follower_.params(), o_.state_dir);
  Status st = opt.is_ok() ? Status::ok() : opt.status();
  if (st.is_ok()) st = ef_.set_residual(s.residual);
  if (st.is_ok()) st = trainer_.set_optimizer_state(opt.value());
  if (!st.is_ok()) {
    // set_state changes nothing on failure; a residual without its moments would be a
    // half-restored state, so start both from zero.
    ef_.reset();
    session_.log("WARNING: node state ignored: " + st.message());
    return;
  }
  trainer_.set_step_count(s.trainer_step);
  int64_t moments = 0, adam_step = 0;  // AdamW's own count (bias correction), the largest of any parameter
  for (const auto& m : opt.value().params)
    if (m) ++moments, adam_step = std::max(adam_step, m->step);
  char line[256];
  std::snprintf(line, sizeof line,
                " (saved at version %lld, now at %lld): residual of %zu tensors (norm %.4g), "
                "AdamW moments of %lld parameters (AdamW step %lld), trainer step %lld",
                static_cast<long long>(s.base_version), static_cast<long long>(follower_.held()), s.residual.size(),
                ef_.residual_norm(), static_cast<long long>(moments), static_cast<long long>(adam_step),
                static_cast<long long>(s.trainer_step));
  session_.log("restored node state from " + node_state_path(o_.state_dir).string() + line);
}

}  // namespace meshrl::mesh

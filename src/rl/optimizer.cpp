// AdamW, the warm-up + cosine schedule and global-norm clipping. See optimizer.h.
#include "rl/optimizer.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>

#include "core/check.h"

namespace meshrl::rl {

double scheduled_lr(const ScheduleConfig& c, int64_t step) {
  MESHRL_CHECK(step >= 0, "[optimizer] step must be >= 0, got " << step);
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  const double lr_min = c.lr * c.min_lr_ratio;
  const int64_t span = std::max<int64_t>(1, c.total_steps - c.warmup_steps - 1);
  const double p = std::clamp(static_cast<double>(step - c.warmup_steps) / static_cast<double>(span), 0.0, 1.0);
  return lr_min + (c.lr - lr_min) * 0.5 * (1.0 + std::cos(M_PI * p));
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  // Sum of squares in float64 so that many small gradients do not lose precision.
  torch::Tensor sq = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(grads[0].device()));
  for (const auto& g : grads) sq += g.to(torch::kFloat64).pow(2).sum();
  const double norm = std::sqrt(sq.item<double>());
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (auto& g : grads) g.mul_(scale);
  }
  return norm;
}

Optimizer::Optimizer(std::vector<torch::Tensor> params, const OptimizerConfig& config)
    : config_(config), params_(std::move(params)) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : params_) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto opts = torch::optim::AdamWOptions(config.schedule.lr)
                  .betas({config.beta1, config.beta2})
                  .eps(config.eps)
                  .weight_decay(config.weight_decay);
  auto opts_no_decay = opts;
  opts_no_decay.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!decay.empty()) groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(opts));
  if (!no_decay.empty()) groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(opts_no_decay));
  adam_ = std::make_unique<torch::optim::AdamW>(groups, opts);
}

void Optimizer::zero_grad() {
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad().zero_();
}

OptimizerStepInfo Optimizer::step() { return step({}); }

OptimizerStepInfo Optimizer::step(const std::vector<torch::Tensor>& half_spread) {
  const bool pooled = pools_second_moment();
  MESHRL_CHECK(!pooled || half_spread.size() == params_.size(),
               "[optimizer] the pooled second moment needs one half-batch spread per parameter, got " << half_spread.size()
                                                                                                   << " for " << params_.size());
  OptimizerStepInfo info;
  info.lr = scheduled_lr(config_.schedule, step_);
  const bool clip_pooled = pooled && config_.pooled_clip;
  info.grad_norm = clip_pooled ? pooled_grad_norm(half_spread) : clip_grad_norm(params_, config_.grad_clip);
  if (!std::isfinite(info.grad_norm)) {
    // A NaN/inf gradient would poison Adam's moments for good; drop this update instead.
    info.skipped = true;
    zero_grad();
    return info;
  }
  if (pooled) {
    // d is scaled as the gradient was, so that d^2 stays the gradient's noise.
    const double scale = (config_.grad_clip > 0 && info.grad_norm > config_.grad_clip) ? config_.grad_clip / (info.grad_norm + 1e-6) : 1.0;
    torch::NoGradGuard no_grad;
    for (const auto& d : half_spread)
      if (d.defined() && scale != 1.0) d.mul_(scale);
    if (clip_pooled && scale != 1.0)
      for (auto& p : params_)
        if (p.grad().defined()) p.mutable_grad().mul_(scale);
    pooled_adamw_update(info.lr, half_spread);
  } else {
    for (auto& group : adam_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(info.lr);
    adam_->step();
  }
  zero_grad();
  ++step_;
  return info;
}

// The norm the K pooled batches' gradient would have: E|g|^2 = |mu|^2 + S^2 for this batch and
// |mu|^2 + S^2 / K pooled, with E|d|^2 = S^2; floored at the pure-noise |g|^2 / K as v is.
double Optimizer::pooled_grad_norm(const std::vector<torch::Tensor>& half_spread) const {
  torch::NoGradGuard no_grad;
  double g2 = 0, d2 = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    g2 += params_[i].grad().to(torch::kFloat64).pow(2).sum().item<double>();
    if (half_spread[i].defined()) d2 += half_spread[i].to(torch::kFloat64).pow(2).sum().item<double>();
  }
  const double K = config_.pooled_batches;
  return std::sqrt(std::max(g2 - (1 - 1 / K) * d2, g2 / K));
}

namespace {
// libtorch keys an optimizer's per-parameter state by the address of the parameter's TensorImpl:
// 1.13 as the text c10::guts::to_string makes of it (ostream << pointer), recent 2.x releases as
// the pointer itself (c10::guts::to_string is gone there). The state map's key type says which.
template <class StateMap>
typename StateMap::key_type state_key(const StateMap&, const torch::Tensor& p) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << static_cast<const void*>(p.unsafeGetTensorImpl());
    return s.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}
}  // namespace

// AdamW as torch::optim::AdamW computes it (decoupled decay, bias corrections, eps outside the
// root), with the pooled second moment in the denominator; m and EMA(g^2) live in adam_'s state so
// that state() and set_state() save them as for plain AdamW.
void Optimizer::pooled_adamw_update(double lr, const std::vector<torch::Tensor>& half_spread) {
  torch::NoGradGuard no_grad;
  const double K = config_.pooled_batches, b1 = config_.beta1, b2 = config_.beta2;
  if (noise_sq_.size() != params_.size()) noise_sq_.resize(params_.size());
  auto& st = adam_->state();
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    if (!p.grad().defined()) continue;
    const auto& g = p.grad();
    auto key = state_key(st, p);
    if (st.find(key) == st.end()) {
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(0);
      s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      st[key] = std::move(s);
    }
    auto& s = static_cast<torch::optim::AdamWParamState&>(*st[key]);
    if (!noise_sq_[i].defined()) noise_sq_[i] = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    s.step(s.step() + 1);
    const double t = static_cast<double>(s.step());
    auto m = s.exp_avg(), a = s.exp_avg_sq();
    m.mul_(b1).add_(g, 1 - b1);
    a.mul_(b2).addcmul_(g, g, 1 - b2);
    const auto& d = half_spread[i];
    if (d.defined()) noise_sq_[i].mul_(b2).addcmul_(d, d, 1 - b2);
    const auto v = torch::max(a - noise_sq_[i] * (1 - 1 / K), a / K);
    const auto denom = (v / (1 - std::pow(b2, t))).sqrt_().add_(config_.eps);
    if (config_.weight_decay > 0 && p.dim() >= 2) p.mul_(1 - lr * config_.weight_decay);
    p.addcdiv_(m, denom, -lr / (1 - std::pow(b1, t)));
  }
}

OptimizerState Optimizer::state() const {
  OptimizerState out;
  out.step = step_;
  const auto& st = adam_->state();
  for (const auto& p : params_) {
    auto it = st.find(state_key(st, p));
    if (it == st.end()) {
      out.params.emplace_back(std::nullopt);
      continue;
    }
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    // CPU copies whatever the device, so that a node on CUDA can save them like one on the CPU.
    auto cpu = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true); };
    AdamMoments m{s.step(), cpu(s.exp_avg()), cpu(s.exp_avg_sq()), {}};
    const size_t i = out.params.size();
    if (i < noise_sq_.size() && noise_sq_[i].defined()) m.noise_sq = cpu(noise_sq_[i]);
    out.params.emplace_back(std::move(m));
  }
  return out;
}

Status Optimizer::set_state(const OptimizerState& state) {
  if (state.params.size() != params_.size())
    return invalid_argument("[optimizer] state for " + std::to_string(state.params.size()) + " parameters, the model has " +
                            std::to_string(params_.size()));
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& m = state.params[i];
    if (!m) continue;
    std::vector<const torch::Tensor*> moments = {&m->exp_avg, &m->exp_avg_sq};
    if (m->noise_sq.defined()) moments.push_back(&m->noise_sq);  // only the pooled second moment keeps it
    for (const torch::Tensor* t : moments)
      if (!t->defined() || t->sizes() != params_[i].sizes() || t->scalar_type() != params_[i].scalar_type())
        return invalid_argument("[optimizer] moment of parameter " + std::to_string(i) + " is " +
                                (t->defined() ? c10::str(t->sizes(), " ", t->scalar_type()) : std::string("undefined")) +
                                ", the parameter " + c10::str(params_[i].sizes(), " ", params_[i].scalar_type()));
  }
  auto& st = adam_->state();
  noise_sq_.assign(params_.size(), torch::Tensor());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& m = state.params[i];
    if (!m) {
      st.erase(state_key(st, params_[i]));
      continue;
    }
    if (m->noise_sq.defined()) noise_sq_[i] = m->noise_sq.detach().clone().to(params_[i].device());
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(m->step);
    s->exp_avg(m->exp_avg.detach().clone().to(params_[i].device()));
    s->exp_avg_sq(m->exp_avg_sq.detach().clone().to(params_[i].device()));
    st[state_key(st, params_[i])] = std::move(s);
  }
  step_ = state.step;
  return Status::ok();
}

}  // namespace meshrl::rl

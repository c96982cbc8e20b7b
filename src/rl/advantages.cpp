#include "rl/advantages.h"

#include <limits>

#include "core/check.h"

namespace meshrl::rl {
namespace {

// rewards [N*G] -> [N, G] float64, after checking the contract.
torch::Tensor grouped(const torch::Tensor& rewards, int64_t group_size, const char* where) {
  MESHRL_CHECK(rewards.defined() && rewards.dim() == 1,
               "[" << where << "] rewards must be [N*G], got " << (rewards.defined() ? rewards.sizes() : c10::IntArrayRef{}));
  MESHRL_CHECK(rewards.is_floating_point(), "[" << where << "] rewards must be floating point, got " << rewards.scalar_type());
  MESHRL_CHECK(group_size >= 1, "[" << where << "] group_size must be >= 1, got " << group_size);
  MESHRL_CHECK(rewards.size(0) % group_size == 0,
               "[" << where << "] rewards has " << rewards.size(0) << " rows, not a multiple of group_size " << group_size);
  return rewards.to(torch::kFloat64).view({-1, group_size});  // [N, G]
}

// scored [N*G] bool (or undefined: every row) -> [N, G] bool, checked against rewards [N*G].
torch::Tensor grouped_mask(const torch::Tensor& scored, const torch::Tensor& rewards, int64_t group_size, const char* where) {
  if (!scored.defined()) return torch::ones({rewards.size(0) / group_size, group_size}, rewards.options().dtype(torch::kBool));
  MESHRL_CHECK(scored.dim() == 1 && scored.scalar_type() == torch::kBool && scored.size(0) == rewards.size(0),
               "[" << where << "] scored must be [N*G] bool like rewards " << rewards.sizes() << ", got " << scored.sizes() << " "
                   << scored.scalar_type());
  return scored.to(rewards.device()).view({-1, group_size});  // [N, G]
}

// [N, G] rewards and mask -> [N, 1] bool: at least two scored rows and not all of them equal.
torch::Tensor signal_of(const torch::Tensor& r, const torch::Tensor& m) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto hi = torch::where(m, r, torch::full_like(r, -inf)).amax(1, true);  // [N, 1]
  const auto lo = torch::where(m, r, torch::full_like(r, inf)).amin(1, true);   // [N, 1]
  return (hi != lo).logical_and(m.sum(1, true) >= 2);
}

}  // namespace

torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, const AdvantageConfig& config,
                               const torch::Tensor& scored) {
  torch::NoGradGuard no_grad;
  auto r = grouped(rewards, group_size, "group_advantages");                           // [N, G]
  const auto m = grouped_mask(scored, rewards, group_size, "group_advantages");        // [N, G] bool
  MESHRL_CHECK(torch::isfinite(r).logical_or(m.logical_not()).all().item<bool>(), "[group_advantages] rewards contain NaN or inf");
  r = torch::where(m, r, torch::zeros_like(r));  // an unscored row's value must not reach any sum
  const auto w = m.to(torch::kFloat64);          // [N, G]
  const auto n = w.sum(1, true);                 // [N, 1] scored rows per group
  const auto mean = r.sum(1, true) / n.clamp_min(1.0);
  auto adv = (r - mean) * w;  // [N, G]
  if (config.normalize_std && group_size > 1) {
    // Sample std over the scored rows (divide by G' - 1), as torch.std(unbiased) for a full group.
    const auto std = (adv.square().sum(1, true) / (n - 1).clamp_min(1.0)).sqrt();
    adv = adv / (std + config.eps);
  }
  // r - mean of equal floats can be a rounding error away from 0; a group without signal must
  // contribute exactly nothing, so zero it explicitly.
  adv = adv.masked_fill(signal_of(r, m).logical_not(), 0.0);
  if (config.negative_scale != 1.0) adv = torch::where(adv < 0, adv * config.negative_scale, adv);
  return adv.view({-1}).to(rewards.scalar_type());  // [N*G]
}

torch::Tensor groups_with_signal(const torch::Tensor& rewards, int64_t group_size, const torch::Tensor& scored) {
  torch::NoGradGuard no_grad;
  const auto r = grouped(rewards, group_size, "groups_with_signal");              // [N, G]
  const auto m = grouped_mask(scored, rewards, group_size, "groups_with_signal");  // [N, G] bool
  return signal_of(r, m).view({-1});                                              // [N] bool
}

}  // namespace meshrl::rl

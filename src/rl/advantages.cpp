#include "rl/advantages.h"

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
  MESHRL_CHECK(torch::isfinite(rewards).all().item<bool>(), "[" << where << "] rewards contain NaN or inf");
  return rewards.to(torch::kFloat64).view({-1, group_size});  // [N, G]
}

}  // namespace

torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, const AdvantageConfig& config) {
  torch::NoGradGuard no_grad;
  auto r = grouped(rewards, group_size, "group_advantages");  // [N, G]
  auto adv = r - r.mean(1, /*keepdim=*/true);                 // [N, G]
  if (config.normalize_std && group_size > 1) adv = adv / (r.std(1, /*unbiased=*/true, /*keepdim=*/true) + config.eps);
  // r - mean of equal floats can be a rounding error away from 0; a group without signal must
  // contribute exactly nothing, so zero it explicitly.
  auto signal = (r.amax(1, true) != r.amin(1, true));  // [N, 1]
  adv = adv.masked_fill(signal.logical_not(), 0.0);
  if (config.negative_scale != 1.0) adv = torch::where(adv < 0, adv * config.negative_scale, adv);
  return adv.view({-1}).to(rewards.scalar_type());  // [N*G]
}

torch::Tensor groups_with_signal(const torch::Tensor& rewards, int64_t group_size) {
  torch::NoGradGuard no_grad;
  auto r = grouped(rewards, group_size, "groups_with_signal");  // [N, G]
  return r.amax(1) != r.amin(1);                                // [N] bool
}

}  // namespace meshrl::rl

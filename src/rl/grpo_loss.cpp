#include "rl/grpo_loss.h"

#include <sstream>
#include <string>

#include "core/check.h"
#include "model/shape_str.h"

namespace meshrl::rl {
namespace {

using model::shape_str;

void check_bt(const torch::Tensor& t, const char* name, int64_t B, int64_t T) {
  MESHRL_CHECK(t.defined() && t.dim() == 2 && t.size(0) == B && t.size(1) == T,
               "[grpo_loss] " << name << " must be [B, T] = [" << B << ", " << T << "] like logp_new, got " << shape_str(t));
  MESHRL_CHECK(t.is_floating_point(), "[grpo_loss] " << name << " must be floating point, got " << t.scalar_type());
}

}  // namespace

GrpoLossOutput grpo_loss(const torch::Tensor& logp_new, const torch::Tensor& logp_old,
                         const torch::Tensor& advantages, const torch::Tensor& mask,
                         const GrpoLossConfig& config, const torch::Tensor& logp_ref) {
  MESHRL_CHECK(logp_new.defined() && logp_new.dim() == 2, "[grpo_loss] logp_new must be [B, T], got " << shape_str(logp_new));
  const int64_t B = logp_new.size(0), T = logp_new.size(1);
  check_bt(logp_new, "logp_new", B, T);
  check_bt(logp_old, "logp_old", B, T);
  check_bt(mask, "mask", B, T);
  if (logp_ref.defined()) check_bt(logp_ref, "logp_ref", B, T);
  MESHRL_CHECK(advantages.defined() && advantages.dim() == 1 && advantages.size(0) == B,
               "[grpo_loss] advantages must be [B] = [" << B << "], got " << shape_str(advantages));
  MESHRL_CHECK(config.clip_low >= 0 && config.clip_low < 1 && config.clip_high >= 0,
               "[grpo_loss] clip_low must be in [0, 1) and clip_high >= 0, got " << config.clip_low << ", " << config.clip_high);
  MESHRL_CHECK(config.normalization != LossNormalization::kConstant || config.max_len > 0,
               "[grpo_loss] LossNormalization::kConstant needs max_len > 0, got " << config.max_len);

  const auto dtype = logp_new.scalar_type();
  auto m = mask.to(dtype);                                            // [B, T]
  auto keep = m != 0;                                                 // [B, T] bool
  auto a = advantages.detach().to(dtype).unsqueeze(1);                // [B, 1]
  // Masked positions may hold garbage (padding after an early stop): zero their log-ratio so
  // exp() cannot make inf * 0 = NaN, in the forward or the backward.
  auto log_ratio = (logp_new - logp_old.detach().to(dtype)).masked_fill(keep.logical_not(), 0.0);  // [B, T]
  auto ratio = log_ratio.exp();                                       // [B, T]

  // min(ratio*A, clip(ratio)*A) picks the clipped, constant term exactly where the ratio has left
  // the trust region in the direction the advantage pushes it; elsewhere it is ratio*A. Writing it
  // as a where() gives the same value and gradient as min() with fewer kernels.
  const double lo = 1.0 - config.clip_low, hi = 1.0 + config.clip_high;
  torch::Tensor clipped, per_token;
  {
    torch::NoGradGuard no_grad;
    clipped = ((a > 0) & (ratio > hi)) | ((a < 0) & (ratio < lo));  // [B, T] bool
  }
  per_token = -torch::where(clipped, ratio.detach().clamp(lo, hi), ratio) * a;  // [B, T]

  torch::Tensor k3;
  if (logp_ref.defined()) {
    auto d = (logp_ref.detach().to(dtype) - logp_new).masked_fill(keep.logical_not(), 0.0);  // [B, T]
    k3 = d.exp() - d - 1.0;                                                                    // [B, T]
    if (config.kl_coef != 0) per_token = per_token + config.kl_coef * k3;
  }

  auto weighted = per_token * m;  // [B, T]
  const auto n_tokens = m.sum();  // []
  GrpoLossOutput out;
  switch (config.normalization) {
    case LossNormalization::kToken:
      out.loss = weighted.sum() / n_tokens.clamp_min(1.0);
      break;
    case LossNormalization::kSequence: {
      auto per_seq_tokens = m.sum(1);                                              // [B]
      auto per_seq = weighted.sum(1) / per_seq_tokens.clamp_min(1.0);             // [B]
      auto n_seqs = (per_seq_tokens > 0).sum().to(dtype).clamp_min(1.0);          // []
      out.loss = per_seq.sum() / n_seqs;
      break;
    }
    case LossNormalization::kConstant:
      out.loss = weighted.sum() / static_cast<double>(B * config.max_len);
      break;
  }

  {
    torch::NoGradGuard no_grad;
    const double n = std::max(1.0, n_tokens.item<double>());
    out.clip_fraction = (clipped.to(dtype) * m).sum().item<double>() / n;
    out.ratio_mean = (ratio * m).sum().item<double>() / n;
    out.kl = k3.defined() ? (k3 * m).sum().item<double>() / n : 0.0;
  }
  return out;
}

}  // namespace meshrl::rl

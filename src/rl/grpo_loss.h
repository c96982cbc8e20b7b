// The GRPO policy loss: PPO's clipped surrogate on per-token log-probs with one advantage per
// sequence, DAPO's asymmetric clip ("clip-higher"), an optional k3 KL penalty to a frozen
// reference, and the three normalisations in use (token-level, per-sequence, constant).
// Owns nothing; knows nothing about models, tokenizers, tasks or the network.
//
// Per token (ratio = exp(logp_new - logp_old), A the sequence's advantage):
//   loss_t = -min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A) + kl_coef * k3_t
//   k3_t   = exp(logp_ref - logp_new) - (logp_ref - logp_new) - 1      (>= 0; Schulman's k3)
// and the batch loss is sum(loss_t * mask) divided as LossNormalization says.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace meshrl::rl {

enum class LossNormalization {
  kToken,     // sum over all masked tokens of the batch / number of masked tokens (DAPO token-level)
  kSequence,  // per sequence: sum / its masked tokens; then mean over sequences with >= 1 token (GRPO)
  kConstant,  // sum / (B * max_len) (Dr. GRPO): no length bias; needs max_len > 0
};

struct GrpoLossConfig {
  double clip_low = 0.2;    // ratio floor 1 - clip_low (applies where A < 0)
  double clip_high = 0.28;  // ratio ceiling 1 + clip_high (applies where A > 0); DAPO clip-higher
  double kl_coef = 0.0;     // weight of the k3 term; only used when logp_ref is given
  LossNormalization normalization = LossNormalization::kToken;
  int64_t max_len = 0;      // for kConstant: the completion length budget
};

struct GrpoLossOutput {
  torch::Tensor loss;       // [] scalar, differentiable w.r.t. logp_new
  double clip_fraction = 0; // share of masked tokens where the clip was active (zero gradient there)
  double kl = 0;            // mean k3 over masked tokens; 0 without a reference
  double ratio_mean = 0;    // mean ratio over masked tokens
};

// logp_new [B, T] floating, with grad: log-probs of the completion tokens under the current policy.
// logp_old [B, T]: behaviour log-probs recorded at sampling time (treated as constants).
// advantages [B]: one per sequence (constants).
// mask [B, T] float: 1 on completion tokens that count, 0 on prompt and padding. Positions with
//   mask 0 contribute nothing, even when their log-probs are garbage (inf/NaN are masked out too).
// logp_ref [B, T] optional: a frozen reference policy's log-probs for the KL term and metric.
// Shapes and config are checked with MESHRL_CHECK ("[grpo_loss] advantages must be [B], got ...").
// An all-zero mask gives loss 0 (with a zero gradient), not NaN.
GrpoLossOutput grpo_loss(const torch::Tensor& logp_new, const torch::Tensor& logp_old,
                         const torch::Tensor& advantages, const torch::Tensor& mask,
                         const GrpoLossConfig& config, const torch::Tensor& logp_ref = {});

}  // namespace meshrl::rl

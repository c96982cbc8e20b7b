// Group-relative advantages for GRPO: each completion's reward compared with the other samples of
// the same prompt. Owns nothing; knows nothing about models, tokens, tasks or the network.
//
// Layout: rewards [N*G] for N prompts with G samples each, groups contiguous — rows g*G .. g*G+G-1
// share prompt g. A group whose rewards are all equal carries no learning signal: its advantages
// are exactly 0 (never NaN), and groups_with_signal() lets the trainer drop it altogether.
//
// scored [N*G] bool (optional): false marks a completion the verifier gave no reward (it hung,
// crashed or printed garbage). Such a row is left out of its group's mean and standard deviation
// and gets advantage 0; its reward value is ignored. A group then has G' <= G scored rows and is
// treated as a group of G'; with G' < 2 it has no signal.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace meshrl::rl {

struct AdvantageConfig {
  // true: (r - mean) / (std + eps), as DeepSeek's GRPO. false: r - mean only (Dr. GRPO), which
  // avoids up-weighting groups that are nearly all right or nearly all wrong.
  bool normalize_std = true;
  double eps = 1e-6;
  // Negative advantages are multiplied by this (1 = plain GRPO, 0 = positives only). Applied last.
  double negative_scale = 1.0;
};

// rewards [N*G] floating, finite -> advantages [N*G], same dtype. std is the sample standard
// deviation (unbiased, divide by G'-1 over the G' scored rows), as DeepSeek GRPO and TRL compute
// it; G' == 1 gives all zeros. Computed in float64 so that small differences between large
// rewards survive.
// Broken invariants (not 1-D, N*G not a multiple of G, G < 1, a non-finite reward, `scored` not
// [N*G] bool) stop with MESHRL_CHECK: rewards are produced inside the process by verifiers, never
// parsed from outside.
torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, const AdvantageConfig& config,
                               const torch::Tensor& scored = {});

// rewards [N*G] -> [N] bool: true for groups whose scored rewards are not all equal (and so at
// least two rows are scored).
torch::Tensor groups_with_signal(const torch::Tensor& rewards, int64_t group_size, const torch::Tensor& scored = {});

}  // namespace meshrl::rl

// Per-token log-probabilities of a sequence under the model: log p(tokens[t+1] | tokens[..t]),
// with autograd, for the GRPO loss; optionally each position's entropy for metrics.
// Owns nothing; knows nothing about tokenizers, tasks, sampling or the network.
//
// Memory: the lm_head's logits [B, n, V] are the largest activation of a step. We never build
// log_softmax [B, n, V] on top of them: a fused autograd function gathers the target logit,
// subtracts logsumexp, keeps only the logits for backward and writes the logits' gradient in one
// buffer (see token_logprobs.cpp for the measurements behind this choice).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "model/transformer.h"

namespace meshrl::rl {

struct TokenLogprobs {
  torch::Tensor logprobs;  // [B, n] float32, with grad when the model's parameters require it
  torch::Tensor entropy;   // [B, n] float32, no grad, nats; undefined unless with_entropy
};

// tokens [B, T] int64, T >= 2 -> logprobs [B, T-1]: column t is log p(tokens[:, t+1] | tokens[:, :t+1]).
// key_mask [B, T] bool (optional, false = padding never attended to) is passed to the model;
// positions whose target is padding get a number that the caller's loss mask must drop.
// The last token is never fed to the model: no position is scored by it.
TokenLogprobs token_logprobs(model::TransformerImpl& model, const torch::Tensor& tokens,
                             const torch::Tensor& key_mask = {}, bool with_entropy = false);

// The same restricted to the last n targets (1 <= n <= T-1): [B, n], equal to the last n columns
// of token_logprobs. Prompt tokens are never scored, so this skips the lm_head on them.
TokenLogprobs token_logprobs_tail(model::TransformerImpl& model, const torch::Tensor& tokens, int64_t n,
                                  const torch::Tensor& key_mask = {}, bool with_entropy = false);

// The head alone, for callers that already hold hidden states (and for timing the phases):
// hidden [B, n, E] (the positions that predict `targets`), targets [B, n] int64 -> [B, n].
TokenLogprobs logprobs_from_hidden(model::TransformerImpl& model, const torch::Tensor& hidden,
                                   const torch::Tensor& targets, bool with_entropy = false);

// The fused head on logits: logits [..., V] float, targets [...] int64 ->
// logits.log_softmax(-1).gather(-1, targets) [...], differentiable w.r.t. logits.
torch::Tensor target_logprobs(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace meshrl::rl

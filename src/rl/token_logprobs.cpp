#include "rl/token_logprobs.h"

#include <sstream>
#include <string>

#include "core/check.h"
#include "model/shape_str.h"

namespace meshrl::rl {
namespace {

using model::shape_str;

// log p(target) = logit[target] - logsumexp(logits), as one autograd node.
//
// Measured with libtorch 1.13 on CPU, one thread, [6144, V] logits (64 x 96 completion tokens),
// forward + backward of this head alone, best of 21 (the machine is shared, so medians wander):
//   V = 512:   log_softmax + gather 19-23 ms, 348 MB peak RSS; gather - logsumexp (autograd) 27 ms,
//              338 MB; this function 18-22 ms, 301 MB.
//   V = 8192:  log_softmax + gather 690-1010 ms, 1328 MB; gather - logsumexp 1270-1620 ms, 1522 MB;
//              this function 700-770 ms, 1137 MB.
// log_softmax + gather keeps its [N, V] output for backward and then builds two more [N, V]
// tensors there (the scattered gradient and log_softmax's own); plain autograd on gather -
// logsumexp is worse (sub, exp, mul, add all materialise [N, V]). Here backward allocates one
// [N, V] buffer, computes -g * softmax in place and scatters +g onto the targets.
struct TargetLogprob : torch::autograd::Function<TargetLogprob> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets) {
    auto lse = torch::logsumexp(logits, -1);                                          // [...]
    auto picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1);               // [...]
    ctx->save_for_backward({logits, lse, targets});
    return picked - lse;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto& logits = saved[0];
    auto g = grads[0].unsqueeze(-1);                                   // [..., 1]
    auto grad = (logits - saved[1].unsqueeze(-1)).exp_();              // [..., V] softmax
    grad.mul_(-g);
    grad.scatter_add_(-1, saved[2].unsqueeze(-1), g);
    return {grad, torch::Tensor()};
  }
};

void check_tokens(const torch::Tensor& tokens, const torch::Tensor& key_mask, const char* where) {
  MESHRL_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.size(1) >= 2,
               "[" << where << "] tokens must be [B, T] with T >= 2, got " << shape_str(tokens));
  MESHRL_CHECK(tokens.scalar_type() == torch::kInt64, "[" << where << "] tokens must be int64, got " << tokens.scalar_type());
  if (key_mask.defined())
    MESHRL_CHECK(key_mask.sizes() == tokens.sizes(),
                 "[" << where << "] key_mask must be [B, T] like tokens " << shape_str(tokens) << ", got " << shape_str(key_mask));
}

}  // namespace

torch::Tensor target_logprobs(const torch::Tensor& logits, const torch::Tensor& targets) {
  MESHRL_CHECK(logits.defined() && targets.defined() && logits.dim() == targets.dim() + 1 &&
                   logits.sizes().slice(0, targets.dim()) == targets.sizes(),
               "[target_logprobs] logits must be [..., V] over targets [...], got " << shape_str(logits) << " and "
                                                                                    << shape_str(targets));
  MESHRL_CHECK(targets.scalar_type() == torch::kInt64, "[target_logprobs] targets must be int64, got " << targets.scalar_type());
  return TargetLogprob::apply(logits, targets);
}

TokenLogprobs logprobs_from_hidden(model::TransformerImpl& model, const torch::Tensor& hidden,
                                   const torch::Tensor& targets, bool with_entropy) {
  MESHRL_CHECK(hidden.defined() && hidden.dim() == 3 && hidden.size(2) == model.config().n_embd,
               "[logprobs_from_hidden] hidden must be [B, n, E = " << model.config().n_embd << "], got " << shape_str(hidden));
  MESHRL_CHECK(targets.defined() && targets.dim() == 2 && targets.size(0) == hidden.size(0) &&
                   targets.size(1) == hidden.size(1),
               "[logprobs_from_hidden] targets must be [B, n] like hidden " << shape_str(hidden) << ", got "
                                                                             << shape_str(targets));
  auto logits = model.logits_from_hidden(hidden);  // [B, n, V]
  TokenLogprobs out;
  out.logprobs = target_logprobs(logits, targets);  // [B, n]
  if (with_entropy) {
    torch::NoGradGuard no_grad;
    // H = -sum p log p = lse - sum p * logits, with p = exp(logits - lse)
    auto lse = torch::logsumexp(logits, -1, /*keepdim=*/true);  // [B, n, 1]
    auto p = (logits - lse).exp_();                              // [B, n, V]
    out.entropy = lse.squeeze(-1) - (p * logits).sum(-1);       // [B, n]
  }
  return out;
}

TokenLogprobs token_logprobs_tail(model::TransformerImpl& model, const torch::Tensor& tokens, int64_t n,
                                  const torch::Tensor& key_mask, bool with_entropy) {
  check_tokens(tokens, key_mask, "token_logprobs_tail");
  const int64_t T = tokens.size(1);
  MESHRL_CHECK(n >= 1 && n <= T - 1, "[token_logprobs_tail] n must be in 1..T-1 = " << T - 1 << ", got " << n);
  // The last token predicts nothing we score, and causal attention means no earlier position
  // depends on it: run the model on T-1 tokens.
  auto inputs = tokens.narrow(1, 0, T - 1);                                        // [B, T-1]
  auto mask = key_mask.defined() ? key_mask.narrow(1, 0, T - 1) : torch::Tensor();  // [B, T-1]
  auto hidden = model.forward_hidden(inputs, nullptr, mask);                      // [B, T-1, E]
  // position t predicts token t+1: targets T-n .. T-1 are scored by positions T-1-n .. T-2
  return logprobs_from_hidden(model, hidden.narrow(1, T - 1 - n, n), tokens.narrow(1, T - n, n), with_entropy);
}

TokenLogprobs token_logprobs(model::TransformerImpl& model, const torch::Tensor& tokens, const torch::Tensor& key_mask,
                             bool with_entropy) {
  check_tokens(tokens, key_mask, "token_logprobs");
  return token_logprobs_tail(model, tokens, tokens.size(1) - 1, key_mask, with_entropy);
}

}  // namespace meshrl::rl

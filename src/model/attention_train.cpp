#include "model/attention_train.h"

#include <limits>

#include "core/check.h"
#include "model/fused_cpu.h"

namespace meshrl::model {

namespace {

struct Dims {
  int64_t B, T, H, Hkv, G, D;
};

Dims dims_of(const torch::Tensor& qkv, int64_t H, int64_t Hkv) {
  return {qkv.size(0), qkv.size(1), H, Hkv, H / Hkv, qkv.size(3)};
}

// Views into a rotated [B, T, H + 2 Hkv, D] buffer: one head as [B, T, D] (row stride (H+2Hkv) D).
torch::Tensor q_head(const torch::Tensor& qkv, const Dims&, int64_t h) { return qkv.select(2, h); }
torch::Tensor k_head(const torch::Tensor& qkv, const Dims& d, int64_t h) { return qkv.select(2, d.H + h / d.G); }
torch::Tensor v_head(const torch::Tensor& qkv, const Dims& d, int64_t h) { return qkv.select(2, d.H + d.Hkv + h / d.G); }

struct CausalAttentionFunction : torch::autograd::Function<CausalAttentionFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& qkv_raw, int64_t H,
                               int64_t Hkv, const torch::Tensor& cos, const torch::Tensor& sin, double q_scale) {
    auto qkv = qkv_raw.clone(torch::MemoryFormat::Contiguous);
    rope_qk_inplace_cpu(qkv, H, Hkv, cos, sin, 0, static_cast<float>(q_scale));
    const Dims d = dims_of(qkv, H, Hkv);
    // probs [H, B, T, T]: each head's slice contiguous, so the score products write it directly.
    auto probs = torch::empty({d.H, d.B, d.T, d.T}, qkv.options());
    for (int64_t h = 0; h < d.H; ++h) {
      auto scores = probs[h];
      at::bmm_out(scores, q_head(qkv, d, h), k_head(qkv, d, h).transpose(1, 2));
    }
    auto above_diagonal = torch::ones({d.T, d.T}, qkv.options().dtype(torch::kBool)).triu(1);
    probs.masked_fill_(above_diagonal, -std::numeric_limits<float>::infinity());
    probs = torch::softmax(probs, -1);
    auto out = torch::empty({d.B, d.T, d.H, d.D}, qkv.options());
    for (int64_t h = 0; h < d.H; ++h) {
      auto out_h = out.select(2, h);  // [B, T, D], row stride H*D: written in place
      at::bmm_out(out_h, probs[h], v_head(qkv, d, h));
    }
    ctx->save_for_backward({qkv, probs, cos, sin});
    ctx->saved_data["H"] = H;
    ctx->saved_data["Hkv"] = Hkv;
    ctx->saved_data["q_scale"] = q_scale;
    return out.view({d.B * d.T, d.H * d.D});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &qkv = saved[0], &probs = saved[1], &cos = saved[2], &sin = saved[3];
    const int64_t H = ctx->saved_data["H"].toInt(), Hkv = ctx->saved_data["Hkv"].toInt();
    const double q_scale = ctx->saved_data["q_scale"].toDouble();
    const Dims d = dims_of(qkv, H, Hkv);
    auto grad_out = grads[0].contiguous().view({d.B, d.T, d.H, d.D});
    auto dqkv = torch::zeros_like(qkv);  // k and v gradients accumulate over the G heads sharing them
    auto dprobs = torch::empty({d.B, d.T, d.T}, qkv.options());
    for (int64_t h = 0; h < d.H; ++h) {
      const auto go = grad_out.select(2, h), p = probs[h];                  // [B, T, D], [B, T, T]
      const auto q = q_head(qkv, d, h), k = k_head(qkv, d, h), v = v_head(qkv, d, h);
      at::bmm_out(dprobs, go, v.transpose(1, 2));                             // dP = dO V^T
      auto dscores = torch::_softmax_backward_data(dprobs, p, -1, torch::kFloat32);  // P (dP - rowsum(dP P))
      auto dq = q_head(dqkv, d, h);
      at::bmm_out(dq, dscores, k);                                            // dQ = dS K
      k_head(dqkv, d, h).baddbmm_(dscores.transpose(1, 2), q);                // dK += dS^T Q
      v_head(dqkv, d, h).baddbmm_(p.transpose(1, 2), go);                     // dV += P^T dO
    }
    // Back through the rotation (its adjoint is the rotation by -angle) and q's scale.
    rope_qk_inplace_cpu(dqkv, H, Hkv, cos, -sin, 0, static_cast<float>(q_scale));
    return {dqkv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool causal_attention_train_cpu_supported(const torch::Tensor& qkv) {
  return qkv.dim() == 4 && qkv.device().is_cpu() && qkv.scalar_type() == torch::kFloat32 && qkv.size(1) >= 2;
}

torch::Tensor causal_attention_train_cpu(const torch::Tensor& qkv, int64_t n_heads, int64_t n_kv_heads,
                                         const torch::Tensor& cos, const torch::Tensor& sin, double q_scale) {
  MESHRL_CHECK(causal_attention_train_cpu_supported(qkv) && qkv.size(2) == n_heads + 2 * n_kv_heads &&
                   n_heads % n_kv_heads == 0,
               "[attention] training attention needs float32 CPU qkv [B, T, H + 2 Hkv, D] with T >= 2");
  MESHRL_CHECK(qkv.size(1) <= cos.size(0), "[rope] positions up to " << qkv.size(1) << " exceed the table of " << cos.size(0));
  return CausalAttentionFunction::apply(qkv, n_heads, n_kv_heads, cos.contiguous(), sin.contiguous(), q_scale);
}

}  // namespace meshrl::model

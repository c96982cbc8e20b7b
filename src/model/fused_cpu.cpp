#include "model/fused_cpu.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "core/check.h"

namespace meshrl::model {

torch::Tensor rms_norm_cpu(const torch::Tensor& x_in, const torch::Tensor& weight, double eps) {
  auto x = x_in.contiguous();
  const int64_t E = x.size(-1), N = x.numel() / E;
  MESHRL_CHECK(weight.numel() == E, "[rms_norm_cpu] weight has " << weight.numel() << " entries, rows have " << E);
  auto out = torch::empty_like(x);
  auto w = weight.contiguous();
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* r = xp + n * E;
      float* o = op + n * E;
      float ss = 0;
      for (int64_t e = 0; e < E; ++e) ss += r[e] * r[e];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(E) + static_cast<float>(eps));
      for (int64_t e = 0; e < E; ++e) o[e] = r[e] * inv * wp[e];
    }
  });
  return out;
}

void rope_qk_inplace_cpu(torch::Tensor& qkv, int64_t n_heads, int64_t n_kv_heads, const torch::Tensor& cos,
                         const torch::Tensor& sin, int64_t start, float q_scale) {
  MESHRL_CHECK(qkv.dim() == 4 && qkv.is_contiguous() && qkv.size(2) == n_heads + 2 * n_kv_heads,
               "[rope_qk_inplace_cpu] qkv must be contiguous [B, T, H + 2 Hkv, D]");
  const int64_t B = qkv.size(0), T = qkv.size(1), n_all = qkv.size(2), D = qkv.size(3), half = D / 2;
  MESHRL_CHECK(start + T <= cos.size(0), "[rope] positions up to " << start + T << " exceed the table of " << cos.size(0));
  float* p = qkv.data_ptr<float>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  at::parallel_for(0, B * T, 4, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const int64_t t = bt % T;
      const float* c = cp + (start + t) * half;
      const float* s = sp + (start + t) * half;
      float* row = p + bt * n_all * D;
      for (int64_t h = 0; h < n_heads + n_kv_heads; ++h) {
        float* x = row + h * D;
        const float scale = h < n_heads ? q_scale : 1.0f;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = x[i], x2 = x[i + half];
          x[i] = (x1 * c[i] - x2 * s[i]) * scale;
          x[i + half] = (x2 * c[i] + x1 * s[i]) * scale;
        }
      }
    }
  });
}

torch::Tensor silu_mul_cpu(const torch::Tensor& gate_up_in) {
  auto gu = gate_up_in.contiguous();
  const int64_t N = gu.size(0), F = gu.size(1) / 2;
  auto out = torch::empty({N, F}, gu.options());
  const float* gp = gu.data_ptr<float>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* g = gp + n * 2 * F;
      const float* u = g + F;
      float* o = op + n * F;
      for (int64_t f = 0; f < F; ++f) o[f] = g[f] / (1.0f + std::exp(-g[f])) * u[f];
    }
  });
  return out;
}

namespace {

// RMSNorm as one autograd node (values as the plain formula): backward is
//   gx = r * (g*w - xhat * mean(g*w*xhat)),  gw = sum over rows of g*xhat,
// five passes over [N, E] instead of autograd's chain through pow, mean, rsqrt and two products.
struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               double eps) {
    auto r = (x * x).mean(-1, /*keepdim=*/true).add_(eps).rsqrt_();  // [..., 1]
    auto xhat = x * r;                                                // [..., E]
    ctx->save_for_backward({xhat, r, w});
    return xhat * w;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &xhat = saved[0], &r = saved[1], &w = saved[2];
    const auto& g = grads[0];
    torch::Tensor gx, gw;
    if (ctx->needs_input_grad(0)) {
      auto gxw = g * w;
      auto dot = (gxw * xhat).mean(-1, /*keepdim=*/true);
      gx = gxw.sub_(xhat * dot).mul_(r);
    }
    if (ctx->needs_input_grad(1)) gw = (g * xhat).reshape({-1, w.size(0)}).sum(0);
    return {gx, gw, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rms_norm_autograd(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  return RmsNormFunction::apply(x, weight, eps);
}

}  // namespace meshrl::model

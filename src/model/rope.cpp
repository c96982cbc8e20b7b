#include "model/rope.h"

#include "core/check.h"

namespace meshrl::model {

RopeTable rope_table_make(int64_t max_len, int64_t head_dim, double theta, torch::Device device) {
  MESHRL_CHECK(head_dim % 2 == 0, "[rope] head_dim must be even, got " << head_dim);
  // Same arithmetic as HF: inv_freq in float32 from a float64 power, positions as float32.
  auto idx = torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32);
  auto inv_freq = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32), idx / static_cast<double>(head_dim));
  auto pos = torch::arange(max_len, torch::kFloat32);
  auto freqs = torch::outer(pos, inv_freq);  // [T_max, D/2]
  return {freqs.cos().to(device), freqs.sin().to(device)};
}

namespace {

// out = (x*cos + rotate_half(x)*sin) * scale with rotate_half(x) = cat(-x2, x1); c, s [T, 1, D/2].
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& c, const torch::Tensor& s, double scale) {
  const int64_t half = x.size(3) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto out = torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
  return scale == 1.0 ? out : out.mul_(scale);
}

// The rotation as one autograd node: its adjoint is the rotation by -angle, so backward is one more
// rotate() instead of autograd's chain over narrow (each zero-filling a whole gradient), mul and cat.
struct RopeFunction : torch::autograd::Function<RopeFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& c,
                               const torch::Tensor& s, double scale) {
    ctx->save_for_backward({c, s});
    ctx->saved_data["scale"] = scale;
    return rotate(x, c, s, scale);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    return {rotate(grads[0], saved[0], -saved[1], ctx->saved_data["scale"].toDouble()), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rope_apply(const torch::Tensor& x, const RopeTable& table, int64_t start, double scale) {
  const int64_t T = x.size(1);
  MESHRL_CHECK(start + T <= table.cos.size(0),
               "[rope] positions up to " << start + T << " exceed the table of " << table.cos.size(0));
  auto c = table.cos.narrow(0, start, T).unsqueeze(1);  // [T, 1, D/2], broadcasts over heads
  auto s = table.sin.narrow(0, start, T).unsqueeze(1);
  if (x.requires_grad() && torch::GradMode::is_enabled()) return RopeFunction::apply(x, c, s, scale);
  return rotate(x, c, s, scale);
}

}  // namespace meshrl::model

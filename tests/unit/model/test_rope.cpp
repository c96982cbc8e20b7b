// rope_apply's and rms_norm_autograd's hand-written backward (the inverse rotation) against autograd through the plain
// formula, with and without the folded scale.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/rope.h"

namespace meshrl::model {
namespace {

torch::Tensor rope_reference(const torch::Tensor& x, const RopeTable& table, int64_t start, double scale) {
  const int64_t T = x.size(1), half = x.size(3) / 2;
  auto c = table.cos.narrow(0, start, T).unsqueeze(1);
  auto s = table.sin.narrow(0, start, T).unsqueeze(1);
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1) * scale;
}

TEST(Rope, BackwardMatchesAutogradOfPlainFormula) {
  torch::manual_seed(3);
  auto table = rope_table_make(64, 8, 10000.0, torch::kCPU);
  for (double scale : {1.0, 0.35}) {
    auto x = torch::randn({2, 5, 3, 8}, torch::requires_grad());
    auto g = torch::randn({2, 5, 3, 8});
    auto y = rope_apply(x, table, 7, scale);
    auto gx = torch::autograd::grad({y}, {x}, {g})[0];
    auto x_ref = x.detach().clone().requires_grad_(true);
    auto y_ref = rope_reference(x_ref, table, 7, scale);
    auto gx_ref = torch::autograd::grad({y_ref}, {x_ref}, {g})[0];
    EXPECT_TRUE(torch::allclose(y, y_ref, 1e-6, 1e-6));
    EXPECT_TRUE(torch::allclose(gx, gx_ref, 1e-6, 1e-6));
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(rope_apply(x, table, 7, scale), y_ref, 1e-6, 1e-6));
  }
}

}  // namespace
}  // namespace meshrl::model

#include "model/fused_cpu.h"

namespace meshrl::model {
namespace {

TEST(RmsNormAutograd, BackwardMatchesAutogradOfPlainFormula) {
  torch::manual_seed(5);
  auto x = torch::randn({3, 4, 16}, torch::requires_grad());
  auto w = (1.0 + 0.1 * torch::randn({16})).requires_grad_(true);
  auto g = torch::randn({3, 4, 16});
  auto y = rms_norm_autograd(x, w, 1e-5);
  auto grads = torch::autograd::grad({y}, {x, w}, {g});
  auto x_ref = x.detach().clone().requires_grad_(true);
  auto w_ref = w.detach().clone().requires_grad_(true);
  auto y_ref = x_ref * torch::rsqrt(x_ref.pow(2).mean(-1, true) + 1e-5) * w_ref;
  auto grads_ref = torch::autograd::grad({y_ref}, {x_ref, w_ref}, {g});
  EXPECT_TRUE(torch::allclose(y, y_ref, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(grads[0], grads_ref[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(grads[1], grads_ref[1], 1e-5, 1e-5));
  // frozen weight (LoRA): only the input's gradient
  auto gx = torch::autograd::grad({rms_norm_autograd(x, w.detach(), 1e-5)}, {x}, {g})[0];
  EXPECT_TRUE(torch::allclose(gx, grads_ref[0], 1e-5, 1e-5));
}

}  // namespace
}  // namespace meshrl::model

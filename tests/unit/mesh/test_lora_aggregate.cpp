// Adapters on the mesh are aggregated exactly: with A frozen from the run's seed and only B trained
// and sent, the coordinator's mean of the nodes' pseudo-gradients (MeanAccumulator, the real one)
// moves the weights by the mean of the nodes' own B A updates. Averaging A and B separately, both
// trained, does not: it leaves the cross term mean_i (B_i - mean B)(A_i - mean A).
//   OMP_NUM_THREADS=1 ./build/tests/test_mesh --gtest_filter='LoraAggregate*'
#include <gtest/gtest.h>

#include "mesh/aggregate.h"
#include "mesh/codec.h"
#include "mesh/policy_params.h"
#include "model/transformer.h"

namespace meshrl::mesh {
namespace {

using model::LoraTarget;

model::ModelConfig config() {
  model::ModelConfig c;
  c.n_vocab = 40, c.n_embd = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.n_ff = 48, c.max_positions = 32;
  return c;
}

// A node: the shared base (same init seed) with adapters from the shared LoRA seed.
model::Transformer make_node(const model::LoraConfig& lora) {
  model::Transformer m(config());
  m->init_weights(9, 0.1);
  EXPECT_TRUE(m->attach_lora(lora).is_ok());
  return m;
}

double rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  return ((got.to(torch::kFloat64) - want).norm() / want.norm()).item<double>();
}

TEST(LoraAggregate, MeanOfBIsTheMeanOfTheProducts) {
  model::LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 8;
  lora.seed = 1234;
  auto global = make_node(lora);
  {
    // Version v's B: non-zero, as after some rounds.
    torch::NoGradGuard no_grad;
    for (auto& t : trainable_parameters(*global).tensors) t.normal_(0.0, 0.1, at::detail::createCPUGenerator(3));
  }
  const auto theta_v = clone_named_tensors(trainable_parameters(*global));
  // The mesh exchanges exactly the B matrices.
  ASSERT_EQ(theta_v.size(), static_cast<size_t>(config().n_layers * 7));
  for (const auto& n : theta_v.names) EXPECT_EQ(n.substr(n.size() - 2), "_B") << n;

  // Three nodes start from theta_v and train B to different places.
  std::vector<model::Transformer> nodes;
  MeanAccumulator acc;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(make_node(lora));
    auto local = trainable_parameters(*nodes.back());
    ASSERT_TRUE(copy_parameters(theta_v, local, "theta_v").is_ok());
    {
      torch::NoGradGuard no_grad;
      auto gen = at::detail::createCPUGenerator(100 + i);
      for (auto& t : local.tensors) t.add_(torch::randn(t.sizes(), gen) * 0.05);
    }
    auto pseudo_gradient = subtract_named_tensors(theta_v, local).value();  // theta_v - theta_local
    ASSERT_TRUE(acc.add(pseudo_gradient, 1.0).is_ok());
  }
  // Outer step with learning rate 1: theta_{v+1} = theta_v - mean pseudo-gradient.
  auto g = acc.finish().value();
  NamedTensors step = g;
  for (auto& t : step.tensors) t = -t;
  auto global_params = trainable_parameters(*global);
  ASSERT_TRUE(apply_delta(global_params, step).is_ok());

  // Every adapted linear moved by the mean of the nodes' own weight updates s (B_i - B_v) A.
  const double s = lora.scale();
  for (int64_t l = 0; l < config().n_layers; ++l)
    for (LoraTarget t : lora.targets) {
      const auto a = global->lora()->a(l, t).to(torch::kFloat64);
      const auto b_v = theta_v.tensors[static_cast<size_t>(l * 7 + static_cast<int>(t))].to(torch::kFloat64);
      auto want = torch::zeros({b_v.size(0), a.size(1)}, torch::kFloat64);
      for (auto& n : nodes) {
        // Every node drew the same A from the seed.
        ASSERT_TRUE(torch::equal(n->lora()->a(l, t), global->lora()->a(l, t)));
        want += s * torch::mm(n->lora()->b(l, t).detach().to(torch::kFloat64) - b_v, a) / 3.0;
      }
      const auto got = global->lora()->merged_delta(l, t).detach() - s * torch::mm(b_v, a).to(torch::kFloat32);
      const auto got_exact = s * torch::mm(global->lora()->b(l, t).detach().to(torch::kFloat64) - b_v, a);
      EXPECT_LT(rel_err(got_exact, want), 1e-6) << "layer " << l << " " << model::lora_target_name(t);
      EXPECT_LT(rel_err(got, want), 1e-4) << "layer " << l << " " << model::lora_target_name(t);  // fp32 round trip
    }
}

TEST(LoraAggregate, SeparateAveragingOfTrainedAAndBLeavesACrossTerm) {
  // Three nodes that trained both factors of one linear: B_i [out, r], A_i [r, in].
  auto gen = at::detail::createCPUGenerator(77);
  std::vector<torch::Tensor> a, b;
  for (int i = 0; i < 3; ++i) {
    a.push_back(torch::randn({4, 16}, gen, torch::kFloat64));
    b.push_back(torch::randn({24, 4}, gen, torch::kFloat64));
  }
  const auto mean_a = (a[0] + a[1] + a[2]) / 3, mean_b = (b[0] + b[1] + b[2]) / 3;
  const auto mean_of_products = (torch::mm(b[0], a[0]) + torch::mm(b[1], a[1]) + torch::mm(b[2], a[2])) / 3;
  const auto product_of_means = torch::mm(mean_b, mean_a);
  // The gap is exactly the cross term mean_i (B_i - mean B)(A_i - mean A), and it is not small.
  torch::Tensor cross = torch::zeros_like(mean_of_products);
  for (int i = 0; i < 3; ++i) cross += torch::mm(b[i] - mean_b, a[i] - mean_a) / 3;
  EXPECT_LT(rel_err(mean_of_products - product_of_means, cross), 1e-12);
  EXPECT_GT(rel_err(product_of_means, mean_of_products), 0.1);
  // With A shared (the scheme used), the same B's average exactly.
  const auto mean_shared = (torch::mm(b[0], a[0]) + torch::mm(b[1], a[0]) + torch::mm(b[2], a[0])) / 3;
  EXPECT_LT(rel_err(torch::mm(mean_b, a[0]), mean_shared), 1e-12);
}

}  // namespace
}  // namespace meshrl::mesh

// LoRA adapters on the Transformer: the adapted forward equals the forward of merged weights
// W + (alpha / r) B A, only B is trained, A is reproducible from the seed, and the config-only
// parameter specs (param_specs.h, used by `meshrl plan`) name the real module's parameters.
//   ctest --test-dir build -R Lora
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/param_specs.h"
#include "model/transformer.h"
#include "support/small_model.h"

using namespace meshrl::model;

namespace {
using meshrl::test_support::small_model_config;

// The weight name of a target in layer l, as hf_tensors() names it.
std::string hf_weight(int64_t l, LoraTarget t) {
  const std::string n(lora_target_name(t));
  const bool attn = t == LoraTarget::kQ || t == LoraTarget::kK || t == LoraTarget::kV || t == LoraTarget::kO;
  return "model.layers." + std::to_string(l) + (attn ? ".self_attn." : ".mlp.") + n + ".weight";
}

// A model with adapters whose B are random (as after training), and a plain model holding
// W + (alpha / r) B A computed here from the tensors, independently of the adapter code.
struct Pair {
  Transformer adapted{nullptr}, merged{nullptr};
};
Pair make_pair(const ModelConfig& c, const LoraConfig& lora) {
  Pair p{Transformer(c), Transformer(c)};
  p.adapted->init_weights(3, 0.2);
  EXPECT_TRUE(p.adapted->attach_lora(lora).is_ok());
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(11);
  auto ad = p.adapted->lora();
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (LoraTarget t : lora.targets) ad->b(l, t).normal_(0.0, 0.3, gen);
  std::map<std::string, torch::Tensor> w;
  for (auto& [n, t] : p.adapted->hf_tensors()) w[n] = t.clone();
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (LoraTarget t : lora.targets)
      w[hf_weight(l, t)] += lora.alpha / static_cast<double>(lora.rank) * torch::matmul(ad->b(l, t), ad->a(l, t));
  EXPECT_TRUE(p.merged->load_hf_tensors(w).is_ok());
  return p;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(Lora, ForwardEqualsMergedWeights) {
  for (bool bias : {false, true}) {
    const auto c = small_model_config(bias, /*tied=*/!bias);
    LoraConfig lora;
    lora.rank = 4;
    lora.alpha = 8;
    auto p = make_pair(c, lora);
    auto tokens = torch::randint(0, c.n_vocab, {3, 9}, at::detail::createCPUGenerator(5), torch::kInt64);
    auto expected = p.merged->forward(tokens).detach();
    EXPECT_LT(max_diff(p.adapted->forward(tokens).detach(), expected), 1e-5);  // autograd path
    {
      torch::NoGradGuard no_grad;  // the fused inference path, and the KV-cached decode
      EXPECT_LT(max_diff(p.adapted->forward(tokens), expected), 1e-5);
      auto cache = p.adapted->make_cache(3, 16);
      auto prefix = p.adapted->forward(tokens.narrow(1, 0, 8), &cache);
      auto last = p.adapted->forward(tokens.narrow(1, 8, 1), &cache);
      EXPECT_LT(max_diff(last.select(1, 0), expected.select(1, 8)), 1e-5);
    }
    // merge_lora folds the same product into the base and removes the adapters.
    ASSERT_TRUE(p.adapted->merge_lora().is_ok());
    EXPECT_FALSE(p.adapted->lora());
    EXPECT_LT(max_diff(p.adapted->forward(tokens).detach(), expected), 1e-5);
  }
}

TEST(Lora, SomeTargetsOnly) {
  const auto c = small_model_config(true, true);
  LoraConfig lora;
  lora.rank = 2;
  lora.targets = parse_lora_targets({"v_proj", "q", "down"}, "test").value();
  auto p = make_pair(c, lora);
  auto tokens = torch::randint(0, c.n_vocab, {2, 7}, at::detail::createCPUGenerator(6), torch::kInt64);
  EXPECT_LT(max_diff(p.adapted->forward(tokens).detach(), p.merged->forward(tokens).detach()), 1e-5);
  // q, v and down only: k_proj has no adapter.
  EXPECT_THROW(p.adapted->lora()->a(0, LoraTarget::kK), std::exception);
}

TEST(Lora, FreshAdapterChangesNothingAndOnlyBLearns) {
  const auto c = small_model_config(false, true);
  Transformer m(c);
  m->init_weights(1, 0.2);
  auto tokens = torch::randint(0, c.n_vocab, {2, 6}, at::detail::createCPUGenerator(7), torch::kInt64);
  auto before = m->forward(tokens).detach();
  ASSERT_TRUE(m->attach_lora(LoraConfig{}).is_ok());
  EXPECT_EQ(max_diff(m->forward(tokens).detach(), before), 0.0);  // B = 0: exactly the base
  EXPECT_FALSE(m->attach_lora(LoraConfig{}).is_ok());             // once only

  m->forward(tokens).pow(2).sum().backward();
  int64_t n_b = 0;
  for (const auto& item : m->named_parameters()) {
    const bool is_b = item.key().size() > 2 && item.key().substr(item.key().size() - 2) == "_B";
    EXPECT_EQ(item.value().requires_grad(), is_b) << item.key();
    if (is_b) {
      ++n_b;
      ASSERT_TRUE(item.value().grad().defined()) << item.key();
      EXPECT_GT(item.value().grad().abs().sum().item<double>(), 0.0) << item.key();
    } else {
      EXPECT_FALSE(item.value().grad().defined()) << item.key();
    }
  }
  EXPECT_EQ(n_b, c.n_layers * 7);
}

TEST(Lora, AIsDrawnFromTheSeed) {
  const auto c = small_model_config(false, true);
  LoraConfig lora;
  lora.seed = 42;
  auto a1 = lora_a_init(c, lora, 1, LoraTarget::kUp);
  EXPECT_TRUE(torch::equal(a1, lora_a_init(c, lora, 1, LoraTarget::kUp)));
  EXPECT_FALSE(torch::equal(a1, lora_a_init(c, lora, 0, LoraTarget::kUp)));    // another layer
  EXPECT_FALSE(torch::equal(a1, lora_a_init(c, lora, 1, LoraTarget::kGate)));  // another target
  lora.seed = 43;
  EXPECT_FALSE(torch::equal(a1, lora_a_init(c, lora, 1, LoraTarget::kUp)));
  // PEFT's kaiming-uniform bound 1 / sqrt(in), and a spread that fills it.
  const double bound = 1.0 / std::sqrt(static_cast<double>(c.n_embd));
  EXPECT_LE(a1.abs().max().item<double>(), bound);
  EXPECT_GT(a1.abs().max().item<double>(), 0.9 * bound);
}

TEST(Lora, InvalidConfigsAreRefused) {
  Transformer m(small_model_config(false, true));
  LoraConfig lora;
  lora.rank = 0;
  EXPECT_FALSE(m->attach_lora(lora).is_ok());
  lora.rank = 4;
  lora.alpha = -1;
  EXPECT_FALSE(m->attach_lora(lora).is_ok());
  EXPECT_FALSE(m->merge_lora().is_ok());  // nothing attached
}

// transformer_param_specs / lora_param_specs name exactly what the module registers, in order.
TEST(ParamSpecs, MatchTheModule) {
  for (bool bias : {false, true}) {
    const auto c = small_model_config(bias, !bias);
    Transformer m(c);
    LoraConfig lora;
    lora.rank = 3;
    lora.targets = parse_lora_targets({"k", "o", "up"}, "test").value();
    ASSERT_TRUE(m->attach_lora(lora).is_ok());
    auto specs = transformer_param_specs(c);
    const auto adapter = lora_param_specs(c, lora);
    specs.insert(specs.end(), adapter.begin(), adapter.end());
    const auto params = m->named_parameters();
    ASSERT_EQ(params.size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(params[i].key(), specs[i].name);
      EXPECT_EQ(params[i].value().sizes().vec(), specs[i].shape) << specs[i].name;
      EXPECT_EQ(params[i].value().requires_grad(), specs[i].kind == ParamKind::kLoraB) << specs[i].name;
    }
    EXPECT_EQ(m->n_params(), total_numel(specs));
  }
}

}  // namespace

// Transformer checks against plain reference math:
//   ctest --test-dir build -R Transformer
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/transformer.h"
#include "support/small_model.h"

using namespace meshrl::model;

namespace {
using meshrl::test_support::small_model_config;

// Naive HF-style forward: separate projections, repeat_kv, full causal attention.
torch::Tensor naive_forward(TransformerImpl& m, const torch::Tensor& tokens) {
  const auto& c = m.config();
  std::map<std::string, torch::Tensor> w;
  for (auto& [n, t] : m.hf_tensors()) w[n] = t;
  const int64_t B = tokens.size(0), T = tokens.size(1), H = c.n_heads, Hkv = c.n_kv_heads, D = c.head_dim();
  auto rms = [&](torch::Tensor x, torch::Tensor g) {
    return x * torch::rsqrt(x.pow(2).mean(-1, true) + c.rms_norm_eps) * g;
  };
  auto inv = 1.0 / torch::pow(c.rope_theta, torch::arange(0, D, 2).to(torch::kFloat32) / D);
  auto freqs = torch::outer(torch::arange(T).to(torch::kFloat32), inv);
  auto emb = torch::cat({freqs, freqs}, -1);
  auto cos = emb.cos(), sin = emb.sin();
  auto rot = [&](torch::Tensor x) {  // [B, h, T, D]
    auto x1 = x.narrow(-1, 0, D / 2), x2 = x.narrow(-1, D / 2, D / 2);
    return x * cos + torch::cat({-x2, x1}, -1) * sin;
  };
  auto h = w["model.embed_tokens.weight"].index_select(0, tokens.flatten()).view({B, T, -1});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    auto x = rms(h, w[p + "input_layernorm.weight"]);
    auto lin = [&](torch::Tensor in, const std::string& n) {
      auto y = torch::matmul(in, w[p + n + ".weight"].t());
      if (w.count(p + n + ".bias")) y = y + w[p + n + ".bias"];
      return y;
    };
    auto q = rot(lin(x, "self_attn.q_proj").view({B, T, H, D}).transpose(1, 2));
    auto k = rot(lin(x, "self_attn.k_proj").view({B, T, Hkv, D}).transpose(1, 2));
    auto v = lin(x, "self_attn.v_proj").view({B, T, Hkv, D}).transpose(1, 2);
    k = k.repeat_interleave(H / Hkv, 1);
    v = v.repeat_interleave(H / Hkv, 1);
    auto s = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(D));
    s = s.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY);
    auto o = torch::matmul(torch::softmax(s, -1), v).transpose(1, 2).reshape({B, T, H * D});
    h = h + torch::matmul(o, w[p + "self_attn.o_proj.weight"].t());
    x = rms(h, w[p + "post_attention_layernorm.weight"]);
    auto g = torch::matmul(x, w[p + "mlp.gate_proj.weight"].t());
    auto u = torch::matmul(x, w[p + "mlp.up_proj.weight"].t());
    h = h + torch::matmul(torch::silu(g) * u, w[p + "mlp.down_proj.weight"].t());
  }
  h = rms(h, w["model.norm.weight"]);
  auto head = w.count("lm_head.weight") ? w["lm_head.weight"] : w["model.embed_tokens.weight"];
  return torch::matmul(h, head.t());
}
}  // namespace

class TransformerParity : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(TransformerParity, FusedForwardMatchesNaiveHfMath) {
  torch::NoGradGuard ng;
  auto [bias, tied] = GetParam();
  Transformer m(small_model_config(bias, tied));
  m->init_weights(7, 0.2);
  if (bias)
    for (auto& [n, t] : m->hf_tensors())
      if (n.find("bias") != std::string::npos) t.normal_(0, 0.2);
  auto tokens = torch::randint(61, {3, 11}, torch::kInt64);
  auto got = m->forward(tokens);
  auto want = naive_forward(*m, tokens);
  EXPECT_LT((got - want).abs().max().item<float>(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(BiasTied, TransformerParity,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(Transformer, CachedDecodeMatchesFullForwardTokenByToken) {
  torch::NoGradGuard ng;
  Transformer m(small_model_config(true, false));
  m->init_weights(3, 0.2);
  auto tokens = torch::randint(61, {2, 12}, torch::kInt64);
  auto full = m->forward(tokens);  // [2, 12, V]
  auto cache = m->make_cache(2, 16);
  auto pre = m->forward(tokens.narrow(1, 0, 5), &cache);  // prefill 5, then one at a time
  EXPECT_LT((pre - full.narrow(1, 0, 5)).abs().max().item<float>(), 1e-5);
  for (int64_t t = 5; t < 12; ++t) {
    auto step = m->forward(tokens.narrow(1, t, 1), &cache);
    EXPECT_LT((step.squeeze(1) - full.select(1, t)).abs().max().item<float>(), 1e-4) << "position " << t;
  }
  EXPECT_EQ(cache.length, 12);
}

TEST(Transformer, LeftPaddedRowMatchesUnpaddedRow) {
  torch::NoGradGuard ng;
  Transformer m(small_model_config());
  m->init_weights(5, 0.2);
  auto row = torch::randint(1, 61, {1, 6}, torch::kInt64);
  auto alone = m->forward(row).select(1, 5);
  auto padded = torch::cat({torch::zeros({1, 3}, torch::kInt64), row}, 1);
  auto cache = m->make_cache(1, 12);
  cache.key_mask.narrow(1, 0, 3).fill_(false);
  cache.padded = true;
  auto got = m->forward(padded, &cache).select(1, 8);
  EXPECT_LT((got - alone).abs().max().item<float>(), 1e-4);
}

TEST(Transformer, HfTensorsAreViewsAndRoundTripThroughLoad) {
  Transformer a(small_model_config(true, false)), b(small_model_config(true, false));
  a->init_weights(1);
  b->init_weights(2);
  std::map<std::string, torch::Tensor> named;
  for (auto& [n, t] : a->hf_tensors()) named[n] = t.clone();
  ASSERT_TRUE(b->load_hf_tensors(named).is_ok());
  for (auto& [n, t] : b->hf_tensors()) EXPECT_TRUE(torch::equal(t, named[n])) << n;
  // A missing and a misshapen tensor are both refused by name.
  auto missing = named;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  auto st = b->load_hf_tensors(missing);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("model.layers.1.mlp.up_proj.weight"), std::string::npos);
  auto bad = named;
  bad["model.norm.weight"] = torch::ones({7});
  EXPECT_NE(b->load_hf_tensors(bad).message().find("model.norm.weight"), std::string::npos);
}

TEST(Transformer, SeededInitIsReproducible) {
  Transformer a(small_model_config()), b(small_model_config());
  a->init_weights(42);
  b->init_weights(42);
  for (size_t i = 0; i < a->parameters().size(); ++i) EXPECT_TRUE(torch::equal(a->parameters()[i], b->parameters()[i]));
  b->init_weights(43);
  EXPECT_FALSE(torch::equal(a->parameters()[0], b->parameters()[0]));
}

// The training attention node (attention_train.h) against the plain autograd chain and the naive HF
// math: same logits, same gradient for every parameter, for grouped (G = 2) and plain (G = 1) heads.
TEST(TrainAttention, ValuesAndGradientsMatchThePlainPath) {
  for (const int64_t kv_heads : {2, 4}) {
    auto c = small_model_config(/*bias=*/true);
    c.n_kv_heads = kv_heads;
    Transformer m(c);
    m->init_weights(7, 0.2);
    {
      torch::NoGradGuard ng;
      for (auto& [n, t] : m->hf_tensors())
        if (n.find("bias") != std::string::npos) t.normal_(0, 0.2);
    }
    torch::manual_seed(11);
    auto tokens = torch::randint(61, {3, 11}, torch::kInt64);
    auto weights = torch::randn({3, 11, 61});
    auto run = [&](bool fused) {
      m->set_fused_train_attention(fused);
      for (auto& p : m->parameters()) p.mutable_grad() = torch::Tensor();
      auto logits = m->forward(tokens);
      (logits * weights).sum().backward();
      std::vector<torch::Tensor> grads;
      for (auto& p : m->parameters()) grads.push_back(p.grad().clone());
      return std::make_pair(logits.detach(), grads);
    };
    auto [fused_logits, fused_grads] = run(true);
    auto [plain_logits, plain_grads] = run(false);
    EXPECT_LT((fused_logits - plain_logits).abs().max().item<float>(), 1e-5) << "kv heads " << kv_heads;
    {
      torch::NoGradGuard ng;
      EXPECT_LT((fused_logits - naive_forward(*m, tokens)).abs().max().item<float>(), 1e-4);
    }
    auto names = m->named_parameters();
    for (size_t i = 0; i < fused_grads.size(); ++i) {
      const float scale = plain_grads[i].abs().max().item<float>();
      EXPECT_GT(scale, 0.0f) << names[i].key();
      EXPECT_LT((fused_grads[i] - plain_grads[i]).abs().max().item<float>(), 1e-5f * std::max(1.0f, scale))
          << names[i].key() << " kv heads " << kv_heads;
    }
  }
}

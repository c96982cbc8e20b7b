#include "model/transformer.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "core/check.h"
#include "model/attention_decode.h"
#include "model/attention_train.h"
#include "model/fused_cpu.h"
#include "model/shape_str.h"

namespace meshrl::model {

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c) {
  const int64_t D = c.head_dim(), qkv_rows = (c.n_heads + 2 * c.n_kv_heads) * D;
  attn_norm = register_parameter("attn_norm", torch::ones({c.n_embd}));
  w_qkv = register_parameter("w_qkv", torch::empty({qkv_rows, c.n_embd}));
  if (c.attention_bias) b_qkv = register_parameter("b_qkv", torch::zeros({qkv_rows}));
  w_o = register_parameter("w_o", torch::empty({c.n_embd, c.n_heads * D}));
  mlp_norm = register_parameter("mlp_norm", torch::ones({c.n_embd}));
  w_gate_up = register_parameter("w_gate_up", torch::empty({2 * c.n_ff, c.n_embd}));
  w_down = register_parameter("w_down", torch::empty({c.n_embd, c.n_ff}));
}

TransformerImpl::TransformerImpl(const ModelConfig& config) : config_(config) {
  MESHRL_CHECK(config.n_embd % config.n_heads == 0 && config.n_heads % config.n_kv_heads == 0,
               "[transformer] bad head counts: hidden " << config.n_embd << ", heads " << config.n_heads
                                                        << ", kv heads " << config.n_kv_heads);
  embed_ = register_parameter("embed", torch::empty({config.n_vocab, config.n_embd}));
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < config.n_layers; ++l) layers_->push_back(DecoderLayer(config));
  norm_ = register_parameter("norm", torch::ones({config.n_embd}));
  if (!config.tie_word_embeddings) lm_head_ = register_parameter("lm_head", torch::empty({config.n_vocab, config.n_embd}));
  auto table = rope_table_make(config.max_positions, config.head_dim(), config.rope_theta, torch::kCPU);
  // Buffers follow the module across .to(device); the RopeTable handles see the moved data.
  rope_.cos = register_buffer("rope_cos", table.cos);
  rope_.sin = register_buffer("rope_sin", table.sin);
  init_weights(0);
  if (const char* a = std::getenv("MESHRL_TRAIN_ATTENTION")) use_train_attention_ = std::string(a) != "plain";
}

void TransformerImpl::init_weights(uint64_t seed, double std) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(seed);
  auto fill = [&](torch::Tensor& t) {
    auto cpu = torch::empty(t.sizes(), torch::kFloat32);
    cpu.normal_(0.0, std, gen);
    t.copy_(cpu);
  };
  fill(embed_);
  norm_.fill_(1.0);
  if (lm_head_.defined()) fill(lm_head_);
  for (auto& m : *layers_) {
    auto& layer = *m->as<DecoderLayerImpl>();
    layer.attn_norm.fill_(1.0);
    layer.mlp_norm.fill_(1.0);
    fill(layer.w_qkv);
    if (layer.b_qkv.defined()) layer.b_qkv.zero_();
    fill(layer.w_o);
    fill(layer.w_gate_up);
    fill(layer.w_down);
  }
}

int64_t TransformerImpl::n_params() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

KVCache TransformerImpl::make_cache(int64_t batch, int64_t max_len) const {
  MESHRL_CHECK(max_len <= config_.max_positions,
               "[transformer] cache of " << max_len << " slots exceeds max_position_embeddings " << config_.max_positions);
  return kv_cache_make(config_.n_layers, batch, config_.n_kv_heads, max_len, config_.head_dim(), embed_.device());
}

torch::Tensor TransformerImpl::rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
  // HF LlamaRMSNorm: x * rsqrt(mean(x^2) + eps), then * weight (all float32 here).
  if (torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()))
    return rms_norm_autograd(x, weight, config_.rms_norm_eps);
  auto var = x.pow(2).mean(-1, /*keepdim=*/true);
  return x * torch::rsqrt(var + config_.rms_norm_eps) * weight;
}

torch::Tensor TransformerImpl::attention(DecoderLayerImpl& layer, const torch::Tensor& x, int64_t B, int64_t T,
                                         int64_t layer_index, KVCache* cache, const torch::Tensor& key_mask, bool fused) {
  const int64_t H = config_.n_heads, Hkv = config_.n_kv_heads, G = H / Hkv, D = config_.head_dim();
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto qkv = layer.b_qkv.defined() ? torch::addmm(layer.b_qkv, x, layer.w_qkv.t()) : torch::mm(x, layer.w_qkv.t());
  if (lora_) {
    // Each adapter adds into its slice of the fused output (the product's output is not saved by
    // autograd, so adding in place is safe under training too).
    const int64_t rows[3] = {H * D, Hkv * D, Hkv * D}, offsets[3] = {0, H * D, (H + Hkv) * D};
    const LoraTarget parts[3] = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kV};
    for (int i = 0; i < 3; ++i)
      if (lora_->has(parts[i])) qkv.narrow(1, offsets[i], rows[i]).add_(lora_->apply(layer_index, parts[i], x));
  }
  qkv = qkv.view({B, T, H + 2 * Hkv, D});
  if (!fused && !cache && !key_mask.defined() && torch::GradMode::is_enabled() && use_train_attention_ &&
      causal_attention_train_cpu_supported(qkv))
    return causal_attention_train_cpu(qkv, H, Hkv, rope_.cos, rope_.sin, q_scale);
  const int64_t start = cache ? cache->length : 0;
  torch::Tensor q, k;  // q [B, T, H, D] already scaled by 1/sqrt(D); k [B, T, Hkv, D]
  torch::Tensor v;  // [B, T, Hkv, D]
  if (fused) {
    rope_qk_inplace_cpu(qkv, H, Hkv, rope_.cos, rope_.sin, start, static_cast<float>(q_scale));
    q = qkv.narrow(2, 0, H);
    k = qkv.narrow(2, H, Hkv);
    v = qkv.narrow(2, H + Hkv, Hkv);
  } else {
    // split, not three narrows: under autograd each narrow's backward zero-fills a whole
    // [B, T, H + 2 Hkv, D] gradient and the three are summed; split's backward is one cat.
    auto parts = qkv.split_with_sizes({H, Hkv, Hkv}, 2);
    q = rope_apply(parts[0], rope_, start, q_scale);
    k = rope_apply(parts[1], rope_, start);
    v = parts[2];
  }

  torch::Tensor k_all, v_all;  // [B, Hkv, t, D]
  int64_t t_total = T;
  if (cache) {
    t_total = start + T;
    MESHRL_CHECK(t_total <= cache->capacity(), "[attention] KV cache full: " << t_total << " > " << cache->capacity());
    cache->k[layer_index].narrow(2, start, T).copy_(k.permute({0, 2, 1, 3}));
    cache->v[layer_index].narrow(2, start, T).copy_(v.permute({0, 2, 1, 3}));
    if (T == 1 && attention_decode_cpu_supported(q, cache->k[layer_index])) {
      return attention_decode_cpu(q.reshape({B, H, D}), cache->k[layer_index], cache->v[layer_index], t_total,
                                  cache->padded ? cache->key_mask : torch::Tensor())
          .view({B, H * D});
    }
    k_all = cache->k[layer_index].narrow(2, 0, t_total);
    v_all = cache->v[layer_index].narrow(2, 0, t_total);
  } else {
    k_all = k.permute({0, 2, 1, 3});
    v_all = v.permute({0, 2, 1, 3});
  }

  // Stack the G query heads of each kv head along the query axis: [B, Hkv, G*T, D].
  auto q_grouped = q.reshape({B, T, Hkv, G, D}).permute({0, 2, 3, 1, 4}).reshape({B, Hkv, G * T, D});
  auto scores = torch::matmul(q_grouped, k_all.transpose(-1, -2));  // [B, Hkv, G*T, t]

  // Additive mask: causal among the T new tokens, and padded key slots hidden.
  torch::Tensor mask;  // broadcastable to [B, 1, 1, T, t], true = hidden
  torch::Tensor diag;  // [1, 1, 1, T, t], true where key slot == query slot
  if (T > 1) {
    auto qpos = torch::arange(start, start + T, torch::TensorOptions().dtype(torch::kInt64).device(x.device()));
    auto kpos = torch::arange(t_total, torch::TensorOptions().dtype(torch::kInt64).device(x.device()));
    mask = (kpos.unsqueeze(0) > qpos.unsqueeze(1)).view({1, 1, 1, T, t_total});
    diag = (kpos.unsqueeze(0) == qpos.unsqueeze(1)).view({1, 1, 1, T, t_total});
  }
  torch::Tensor pad;  // [B, t] bool, true = padding
  if (cache && cache->padded) pad = cache->key_mask.narrow(1, 0, t_total).logical_not();
  if (!cache && key_mask.defined()) pad = key_mask.logical_not();
  if (pad.defined()) {
    auto p = pad.view({B, 1, 1, 1, t_total});
    // A padding query still sees itself: a row of all -inf would softmax to NaN, and NaN values
    // in padded slots poison real rows through 0 * NaN in the next product.
    if (diag.defined()) p = p.logical_and(diag.logical_not());
    mask = mask.defined() ? mask.logical_or(p) : p;
  }
  if (mask.defined()) {
    scores = scores.view({B, Hkv, G, T, t_total})
                 .masked_fill(mask, -std::numeric_limits<float>::infinity())
                 .view({B, Hkv, G * T, t_total});
  }
  auto probs = torch::softmax(scores, -1);
  auto out = torch::matmul(probs, v_all);  // [B, Hkv, G*T, D]
  return out.view({B, Hkv, G, T, D}).permute({0, 3, 1, 2, 4}).reshape({B * T, H * D});
}

torch::Tensor TransformerImpl::forward_hidden(const torch::Tensor& tokens, KVCache* cache,
                                              const torch::Tensor& key_mask) {
  MESHRL_CHECK(tokens.dim() == 2 && tokens.scalar_type() == torch::kInt64,
               "[transformer] tokens must be [B, T] int64, got " << shape_str(tokens.sizes()) << " " << tokens.scalar_type());
  const int64_t B = tokens.size(0), T = tokens.size(1), E = config_.n_embd, F = config_.n_ff;
  if (cache) MESHRL_CHECK(cache->batch() == B, "[transformer] cache batch " << cache->batch() << " != tokens batch " << B);
  if (key_mask.defined())
    MESHRL_CHECK(key_mask.sizes() == tokens.sizes(), "[transformer] key_mask must be [B, T] like tokens, got "
                                                         << shape_str(key_mask.sizes()));
  // Inference on float32 CPU tensors takes the fused kernels (fused_cpu.h); autograd the plain ops.
  const bool fused = !torch::GradMode::is_enabled() && embed_.device().is_cpu() && embed_.scalar_type() == torch::kFloat32;
  auto norm = [&](const torch::Tensor& x, const torch::Tensor& w) {
    return fused ? rms_norm_cpu(x, w, config_.rms_norm_eps) : rms_norm(x, w);
  };
  auto h = torch::embedding(embed_, tokens).view({B * T, E});  // [B*T, E]
  for (size_t l = 0; l < layers_->size(); ++l) {
    auto& layer = *layers_[l]->as<DecoderLayerImpl>();
    auto att = attention(layer, norm(h, layer.attn_norm), B, T, static_cast<int64_t>(l), cache, key_mask, fused);
    const auto li = static_cast<int64_t>(l);
    h = torch::addmm(h, att, layer.w_o.t());                                 // residual folded into the product
    if (lora_ && lora_->has(LoraTarget::kO)) h = h + lora_->apply(li, LoraTarget::kO, att);
    auto xn = norm(h, layer.mlp_norm);
    auto gu = torch::mm(xn, layer.w_gate_up.t());                            // [B*T, 2F]
    if (lora_ && lora_->has(LoraTarget::kGate)) gu.narrow(1, 0, F).add_(lora_->apply(li, LoraTarget::kGate, xn));
    if (lora_ && lora_->has(LoraTarget::kUp)) gu.narrow(1, F, F).add_(lora_->apply(li, LoraTarget::kUp, xn));
    torch::Tensor act;  // [B*T, F]
    if (fused) {
      act = silu_mul_cpu(gu);
    } else {
      auto gate_up = gu.split(F, 1);  // one cat in backward instead of two zero-filled [B*T, 2F] sums
      act = torch::silu(gate_up[0]) * gate_up[1];
    }
    h = torch::addmm(h, act, layer.w_down.t());
    if (lora_ && lora_->has(LoraTarget::kDown)) h = h + lora_->apply(li, LoraTarget::kDown, act);
  }
  if (cache) cache->length += T;
  return h.view({B, T, E});
}

torch::Tensor TransformerImpl::logits_from_hidden(const torch::Tensor& hidden) {
  auto w = lm_head_.defined() ? lm_head_ : embed_;
  const bool fused = !torch::GradMode::is_enabled() && hidden.is_cpu() && hidden.scalar_type() == torch::kFloat32;
  return torch::matmul(fused ? rms_norm_cpu(hidden, norm_, config_.rms_norm_eps) : rms_norm(hidden, norm_), w.t());
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& tokens, KVCache* cache, const torch::Tensor& key_mask) {
  return logits_from_hidden(forward_hidden(tokens, cache, key_mask));
}

Status TransformerImpl::attach_lora(const LoraConfig& lora) {
  if (lora_) return invalid_argument("[lora] this model already has adapters attached");
  MESHRL_RETURN_IF_ERROR(check_lora_config(lora, "lora"));
  for (auto& p : parameters()) p.set_requires_grad(false);  // the base is frozen from here on
  lora_ = register_module("lora", LoraAdapters(config_, lora));
  lora_->to(embed_.device());
  return Status::ok();
}

Status TransformerImpl::merge_lora() {
  if (!lora_) return invalid_argument("[lora] no adapters to merge");
  {
    torch::NoGradGuard no_grad;
    const int64_t H = config_.n_heads, Hkv = config_.n_kv_heads, D = config_.head_dim(), F = config_.n_ff;
    for (int64_t l = 0; l < config_.n_layers; ++l) {
      auto& layer = *layers_[static_cast<size_t>(l)]->as<DecoderLayerImpl>();
      auto fold = [&](LoraTarget t, torch::Tensor w) {  // w: a view into the fused weight
        if (lora_->has(t)) w.add_(lora_->merged_delta(l, t));
      };
      fold(LoraTarget::kQ, layer.w_qkv.narrow(0, 0, H * D));
      fold(LoraTarget::kK, layer.w_qkv.narrow(0, H * D, Hkv * D));
      fold(LoraTarget::kV, layer.w_qkv.narrow(0, (H + Hkv) * D, Hkv * D));
      fold(LoraTarget::kO, layer.w_o);
      fold(LoraTarget::kGate, layer.w_gate_up.narrow(0, 0, F));
      fold(LoraTarget::kUp, layer.w_gate_up.narrow(0, F, F));
      fold(LoraTarget::kDown, layer.w_down);
    }
  }
  unregister_module("lora");
  lora_ = LoraAdapters(nullptr);
  for (auto& p : parameters()) p.set_requires_grad(true);
  return Status::ok();
}

std::vector<std::pair<std::string, torch::Tensor>> TransformerImpl::hf_tensors() const {
  const int64_t H = config_.n_heads, Hkv = config_.n_kv_heads, D = config_.head_dim(), F = config_.n_ff;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", embed_);
  for (size_t l = 0; l < layers_->size(); ++l) {
    const auto& layer = *layers_->ptr(l)->as<DecoderLayerImpl>();
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.emplace_back(p + "input_layernorm.weight", layer.attn_norm);
    out.emplace_back(p + "self_attn.q_proj.weight", layer.w_qkv.narrow(0, 0, H * D));
    out.emplace_back(p + "self_attn.k_proj.weight", layer.w_qkv.narrow(0, H * D, Hkv * D));
    out.emplace_back(p + "self_attn.v_proj.weight", layer.w_qkv.narrow(0, (H + Hkv) * D, Hkv * D));
    if (layer.b_qkv.defined()) {
      out.emplace_back(p + "self_attn.q_proj.bias", layer.b_qkv.narrow(0, 0, H * D));
      out.emplace_back(p + "self_attn.k_proj.bias", layer.b_qkv.narrow(0, H * D, Hkv * D));
      out.emplace_back(p + "self_attn.v_proj.bias", layer.b_qkv.narrow(0, (H + Hkv) * D, Hkv * D));
    }
    out.emplace_back(p + "self_attn.o_proj.weight", layer.w_o);
    out.emplace_back(p + "post_attention_layernorm.weight", layer.mlp_norm);
    out.emplace_back(p + "mlp.gate_proj.weight", layer.w_gate_up.narrow(0, 0, F));
    out.emplace_back(p + "mlp.up_proj.weight", layer.w_gate_up.narrow(0, F, F));
    out.emplace_back(p + "mlp.down_proj.weight", layer.w_down);
  }
  out.emplace_back("model.norm.weight", norm_);
  if (lm_head_.defined()) out.emplace_back("lm_head.weight", lm_head_);
  return out;
}

Status TransformerImpl::load_hf_tensors(const std::map<std::string, torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::set<std::string> expected;
  for (auto& [name, dst] : hf_tensors()) {
    expected.insert(name);
    auto it = tensors.find(name);
    if (it == tensors.end()) return not_found("[checkpoint] missing tensor " + name);
    if (it->second.sizes() != dst.sizes())
      return invalid_argument("[checkpoint] shape of " + name + " is " + shape_str(it->second.sizes()) +
                              ", config.json implies " + shape_str(dst.sizes()));
    if (!it->second.is_floating_point()) return invalid_argument("[checkpoint] " + name + " is not a float tensor");
    auto src = it->second.to(dst.device(), torch::kFloat32);
    auto dst_view = dst;  // a view into the fused parameter: copy_ writes through
    dst_view.copy_(src);
  }
  for (auto& [name, t] : tensors) {
    // HF folders of tied models sometimes still carry lm_head.weight; it must then equal embed.
    if (expected.count(name)) continue;
    if (name == "lm_head.weight" && config_.tie_word_embeddings) continue;
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // old HF exports; recomputed
    return invalid_argument("[checkpoint] unexpected tensor " + name + " for this config");
  }
  return Status::ok();
}

}  // namespace meshrl::model

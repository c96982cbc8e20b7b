// `meshrl bench compress --model tiny|small`: BENCH.md's compress workload. One pseudo-gradient of
// the preset's size, encoded and decoded by every codec (fp32 / int8 / int4 / int2, without and with
// zstd); per codec one JSON line: encode and decode MB/s of fp32 input, bytes on the wire, ratio
// to raw fp32, and relative error ||decoded - x|| / ||x||.
//
// The pseudo-gradient is realistic, not synthetic: the preset's seeded weights minus the same
// weights after 3 AdamW steps (lr 1e-4) of next-token loss on random tokens (batch 4 x 64), over
// every Hugging Face tensor, the way a node computes theta_v - theta_local after its inner steps.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>

#include "bench_common.h"
#include "mesh/codec.h"
#include "mesh/named_tensors.h"
#include "model/device.h"
#include "model/model_io.h"

namespace meshrl::bench {
namespace {

mesh::NamedTensors hf_set(const model::Transformer& m) {
  mesh::NamedTensors s;
  for (auto& [name, t] : m->hf_tensors()) {
    s.names.push_back(name);
    s.tensors.push_back(t);
  }
  return s;
}

mesh::NamedTensors adamw_pseudo_gradient(const BenchOptions& options, int steps) {
  auto m = model::load_transformer(options.model, "cpu", options.seed).value();
  const auto before = mesh::clone_named_tensors(hf_set(m));
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-4).weight_decay(0.0));
  auto gen = at::detail::createCPUGenerator(options.seed + 7);
  for (int s = 0; s < steps; ++s) {
    auto tokens = torch::randint(m->config().n_vocab, {4, 64}, gen, torch::kInt64);
    auto logits = m->forward(tokens);  // [B, T, V]
    auto loss = torch::nn::functional::cross_entropy(
        logits.slice(1, 0, -1).reshape({-1, logits.size(2)}), tokens.slice(1, 1).reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  torch::NoGradGuard no_grad;
  return mesh::subtract_named_tensors(before, hf_set(m)).value();
}

double relative_error(const mesh::NamedTensors& x, const mesh::NamedTensors& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    auto a = x.tensors[i].to(torch::kFloat64), b = y.tensors[i].to(torch::kFloat64);
    num += (a - b).square().sum().item<double>();
    den += a.square().sum().item<double>();
  }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

}  // namespace

void run_compress_bench(const BenchOptions& options) {
  model::set_threads(options.threads);
  const auto delta = adamw_pseudo_gradient(options, 3);
  const double n_params = static_cast<double>(delta.numel());
  const double fp32_bytes = 4.0 * n_params;
  const mesh::UpdateDecodeLimits limits{static_cast<uint64_t>(fp32_bytes) + 1024, 1u << 16};
  struct Variant {
    mesh::CodecId id;
    int zstd_level;
    uint32_t block_size = mesh::kDefaultBlockSize;
    double int2_density = 0.0;  // > 0: sparse ternary (quantize.h)
  };
  const Variant variants[] = {{mesh::CodecId::kFp32, 0}, {mesh::CodecId::kFp32, 3}, {mesh::CodecId::kInt8, 0},
                              {mesh::CodecId::kInt8, 3}, {mesh::CodecId::kInt4, 0}, {mesh::CodecId::kInt4, 3},
                              {mesh::CodecId::kInt2, 0}, {mesh::CodecId::kInt2, 3}, {mesh::CodecId::kInt2, 3, 512},
                              {mesh::CodecId::kInt2, 3, 1024, 1.0 / 16}, {mesh::CodecId::kInt2, 19, 1024, 1.0 / 16},
                              {mesh::CodecId::kInt2, 3, 1024, 1.0 / 32}};
  for (const auto& v : variants) {
    mesh::CodecConfig cfg;
    cfg.id = v.id;
    cfg.zstd_level = v.zstd_level;
    cfg.block_size = v.block_size;
    cfg.int2_density = v.int2_density;
    auto codec = mesh::make_codec(cfg).value();
    std::string bytes;
    auto enc = time_median([&] { bytes = codec->encode(delta).value(); }, options.reps);
    mesh::NamedTensors decoded;
    auto dec = time_median([&] { decoded = codec->decode(bytes, limits).value(); }, options.reps);
    std::printf(
        "{\"bench\":\"compress\",\"model\":\"%s\",\"codec\":\"%s\",\"zstd_level\":%d,\"block_size\":%u,\"int2_density\":%g,"
        "\"threads\":%d,\"delta\":\"adamw-3-steps\",\"n_params\":%.0f,\"bytes\":%zu,\"ratio_to_fp32\":%.2f,"
        "\"encode_mb_s\":%.1f,\"decode_mb_s\":%.1f,\"rel_error\":%.5f,\"reps\":%d}\n",
        options.model.c_str(), std::string(mesh::codec_name(v.id)).c_str(), v.zstd_level,
        v.id == mesh::CodecId::kFp32 ? 0u : cfg.block_size, v.int2_density, options.threads, n_params, bytes.size(),
        fp32_bytes / static_cast<double>(bytes.size()), fp32_bytes / 1e6 / enc.median_s, fp32_bytes / 1e6 / dec.median_s,
        relative_error(delta, decoded), options.reps);
    std::fflush(stdout);
  }
}

}  // namespace meshrl::bench

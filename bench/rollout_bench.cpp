// `meshrl bench rollout`: BENCH.md's rollout workload — 64 sequences (8 prompts x group of 8),
// prompt 32 tokens, 96 new tokens each, multinomial sampling at temperature 1 with the KV cache,
// log-prob of every token kept, no early stop. Reports generated tokens/s = 64*96/seconds.
#include <torch/torch.h>

#include <cstdio>

#include "bench_common.h"
#include "model/device.h"
#include "model/model_io.h"
#include "rollout/generate.h"

namespace meshrl::bench {

void run_rollout_bench(const BenchOptions& options) {
  model::set_threads(options.threads);
  auto model = model::load_transformer(options.model, "cpu", options.seed).value();
  const int64_t n_prompts = 8, group = 8, prompt_len = 32, n_new = 96;
  auto gen = at::detail::createCPUGenerator(options.seed + 1);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t p = 0; p < n_prompts; ++p) {
    auto ids = torch::randint(model->config().n_vocab, {prompt_len}, gen, torch::kInt64);
    std::vector<int64_t> v(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + prompt_len);
    for (int64_t g = 0; g < group; ++g) prompts.push_back(v);
  }
  rollout::GenerateConfig cfg;
  cfg.max_new_tokens = n_new;
  cfg.sampling.temperature = 1.0;
  cfg.seed = options.seed;
  int64_t produced = 0;
  auto t = time_median(
      [&] {
        auto out = rollout::generate(*model, prompts, cfg, [](int64_t) { return std::string(); });
        produced = 0;
        for (auto& c : out) produced += static_cast<int64_t>(c.token_ids.size());
      },
      options.reps);
  const double tokens = static_cast<double>(n_prompts * group * n_new);
  if (produced != n_prompts * group * n_new)
    std::fprintf(stderr, "[bench rollout] produced %lld tokens, expected %.0f\n", (long long)produced, tokens);
  std::printf("{\"bench\":\"rollout\",\"impl\":\"meshrl\",\"model\":\"%s\",\"threads\":%d,\"tokens_per_s\":%.1f,"
              "\"seconds\":%.4f,\"reps\":%d}\n",
              options.model.c_str(), options.threads, tokens / t.median_s, t.median_s, options.reps);
  std::fflush(stdout);
}

}  // namespace meshrl::bench

// `meshrl bench train`: BENCH.md's train workload — 64 sequences x 128 tokens, the GRPO clipped
// surrogate over the last 96 positions (clip 0.8 .. 1.28, one advantage per sequence, token mean),
// forward + backward + AdamW step. Reports tokens/s = 64*128/seconds.
//   OMP_NUM_THREADS=1 build/meshrl bench train --model tiny --threads 1 --reps 3 [--profile]
// Its PyTorch-eager peer is bench/peer/train_peer.py; logp_old is made the same way there
// (detached logp_new plus fixed noise of std 0.01), so the clip is active on some tokens.
// --profile adds one JSON line per phase: forward (model body), head (final norm + lm_head +
// token log-probs), loss, backward, optimizer (zero grads + AdamW step).
#include <torch/torch.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include "core/check.h"
#include "model/device.h"
#include "model/model_io.h"
#include "rl/grpo_loss.h"
#include "rl/token_logprobs.h"

namespace meshrl::bench {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

void run_train_bench(const BenchOptions& options) {
  model::set_threads(options.threads);
  auto model = model::load_transformer(options.model, "cpu", options.seed).value();
  model->train();
  const int64_t B = 64, T = 128, n_completion = 96;
  auto gen = at::detail::createCPUGenerator(options.seed + 1);
  auto tokens = torch::randint(model->config().n_vocab, {B, T}, gen, torch::kInt64);  // [B, T]
  auto advantages = torch::randn({B}, gen);                                          // [B]
  auto noise = 0.01 * torch::randn({B, n_completion}, gen);                          // [B, n]
  auto mask = torch::ones({B, n_completion});                                        // [B, n]
  auto params = model->parameters();
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(1e-5).weight_decay(0.0));
  rl::GrpoLossConfig loss_config;
  loss_config.clip_low = 0.2;
  loss_config.clip_high = 0.28;
  loss_config.normalization = rl::LossNormalization::kToken;

  // Phases in run order; each step appends its seconds (the warm-up step too, dropped below).
  const std::vector<std::string> phases = {"forward", "head", "loss", "backward", "optimizer"};
  std::map<std::string, std::vector<double>> phase_s;
  auto step = [&] {
    auto clock = std::chrono::steady_clock::now();
    auto lap = [&](const std::string& phase) {
      auto now = std::chrono::steady_clock::now();
      phase_s[phase].push_back(std::chrono::duration<double>(now - clock).count());
      clock = now;
    };
    // token_logprobs_tail split in its two halves so that --profile can time them apart
    auto hidden = model->forward_hidden(tokens.narrow(1, 0, T - 1));  // [B, T-1, E]
    lap("forward");
    auto logp_new = rl::logprobs_from_hidden(*model, hidden.narrow(1, T - 1 - n_completion, n_completion),
                                             tokens.narrow(1, T - n_completion, n_completion))
                        .logprobs;  // [B, n]
    lap("head");
    auto out = rl::grpo_loss(logp_new, logp_new.detach() + noise, advantages, mask, loss_config);
    lap("loss");
    // set_to_none, as the peer's zero_grad(set_to_none=True): backward then writes each gradient
    // instead of adding it to a zeroed buffer (libtorch 1.13's zero_grad() zeroes in place).
    for (auto& p : params) p.mutable_grad().reset();
    out.loss.backward();
    lap("backward");
    optimizer.step();
    lap("optimizer");
    MESHRL_CHECK(std::isfinite(out.loss.item<double>()), "[bench train] loss is not finite");
  };
  auto t = time_median(step, options.reps);
  // MESHRL_TRAIN_TRACE=FILE: one more step under libtorch's legacy profiler, written as a Chrome
  // trace (op names and times) for the per-op table in BENCHMARKS.md.
  if (const char* trace = std::getenv("MESHRL_TRAIN_TRACE")) {
    torch::autograd::profiler::RecordProfile guard(trace);
    step();
  }

  const double tokens_per_step = static_cast<double>(B * T);
  std::printf("{\"bench\":\"train\",\"impl\":\"meshrl\",\"model\":\"%s\",\"threads\":%d,\"tokens_per_s\":%.1f,"
              "\"seconds\":%.4f,\"reps\":%d}\n",
              options.model.c_str(), options.threads, tokens_per_step / t.median_s, t.median_s, options.reps);
  if (options.profile) {
    for (const auto& phase : phases) {
      auto v = phase_s[phase];
      v.erase(v.begin());  // the warm-up step
      const double s = median(v);
      std::printf("{\"bench\":\"train\",\"impl\":\"meshrl\",\"model\":\"%s\",\"threads\":%d,\"phase\":\"%s\","
                  "\"seconds\":%.4f,\"share\":%.3f,\"reps\":%d}\n",
                  options.model.c_str(), options.threads, phase.c_str(), s, s / t.median_s, options.reps);
    }
  }
  std::fflush(stdout);
}

}  // namespace meshrl::bench

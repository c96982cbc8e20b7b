// Supervised warm start. See sft.h.
#include "rl/sft.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "rl/evaluate.h"
#include "rl/optimizer.h"
#include "rollout/policy.h"
#include "rollout/sampler.h"

namespace meshrl::rl {

Result<SftBatch> make_sft_batch(const tokenizer::Tokenizer& tok, const tasks::Task& task,
                                const std::vector<tasks::Problem>& problems) {
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> n_prompt;
  int64_t T = 0;
  for (const auto& p : problems) {
    const auto sol = task.solution(p);
    if (!sol) return invalid_argument("[sft] task " + task.name() + " has no solution for problem " + p.id + "; SFT needs worked solutions");
    MESHRL_ASSIGN_OR_RETURN(auto prompt, rollout::encode_ids(tok, p.prompt));
    MESHRL_ASSIGN_OR_RETURN(auto target, rollout::encode_ids(tok, *sol));
    if (prompt.empty() || target.empty()) return invalid_argument("[sft] problem " + p.id + " has an empty prompt or solution");
    n_prompt.push_back(static_cast<int64_t>(prompt.size()));
    prompt.insert(prompt.end(), target.begin(), target.end());
    T = std::max<int64_t>(T, static_cast<int64_t>(prompt.size()));
    rows.push_back(std::move(prompt));
  }
  const int64_t B = static_cast<int64_t>(rows.size());
  SftBatch b;
  b.tokens = torch::zeros({B, T}, torch::kInt64);
  b.mask = torch::zeros({B, T - 1}, torch::kFloat32);
  auto ta = b.tokens.accessor<int64_t, 2>();
  auto ma = b.mask.accessor<float, 2>();
  for (int64_t i = 0; i < B; ++i) {
    const int64_t L = static_cast<int64_t>(rows[i].size());
    for (int64_t t = 0; t < L; ++t) ta[i][t] = rows[i][t];
    // position t predicts token t + 1: the solution tokens are n_prompt .. L-1
    for (int64_t t = n_prompt[i] - 1; t < L - 1; ++t) ma[i][t] = 1.0f;
  }
  return b;
}

torch::Tensor sft_loss(model::TransformerImpl& model, const SftBatch& batch) {
  const auto device = model.parameters()[0].device();
  const auto tokens = batch.tokens.to(device);
  const auto mask = batch.mask.to(device);
  const int64_t T = tokens.size(1);
  // Right padding: real tokens never attend to the padding after them, so no key mask is needed.
  auto logits = model.forward(tokens.narrow(1, 0, T - 1));  // [B, T-1, V]
  auto targets = tokens.narrow(1, 1, T - 1);                 // [B, T-1]
  auto nll = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));  // [B*(T-1)]
  return (nll * mask.reshape({-1})).sum() / mask.sum().clamp_min(1.0);
}

std::string describe(const SftProgress& p) {
  char s[96];
  std::snprintf(s, sizeof s, "loss %.4f lr %.2g", p.loss, p.lr);
  std::string out = s;
  if (p.check_pass1 >= 0) {
    std::snprintf(s, sizeof s, " check %.1f%%", 100 * p.check_pass1);
    out += s;
  }
  return out;
}

std::string summarize(const SftResult& r) {
  char s[192];
  std::snprintf(s, sizeof s, "%zu steps, loss %.4f -> %.4f in %.0f s", r.losses.size(), r.first_loss, r.final_loss, r.seconds);
  std::string out = s;
  if (!r.checks.empty()) {
    std::snprintf(s, sizeof s, "; %s %.1f%% greedy accuracy on training problems", r.reached_target ? "stopped at" : "target not reached:",
                  100 * r.checks.back().second);
    out += s;
  }
  return out;
}

std::vector<tasks::Problem> sft_check_problems(const tasks::Task& task, const SftSection& c) {
  std::vector<tasks::Problem> problems;
  for (int64_t i = 0; i < c.check_problems; ++i)
    problems.push_back(task.sample(rollout::mix_seed({c.seed, static_cast<uint64_t>(i), 0xC4EC})));
  return problems;
}

namespace {

// sft_check_problems and a completion budget of their longest solution plus one token.
struct StopCheck {
  std::vector<tasks::Problem> problems;
  int64_t max_new_tokens = 1;
};

Result<StopCheck> make_stop_check(const tokenizer::Tokenizer& tok, const tasks::Task& task, const SftSection& c) {
  StopCheck s;
  s.problems = sft_check_problems(task, c);
  for (const tasks::Problem& p : s.problems) {
    const auto sol = task.solution(p);
    if (!sol) return invalid_argument("[sft] task " + task.name() + " has no solution for problem " + p.id);
    MESHRL_ASSIGN_OR_RETURN(auto ids, rollout::encode_ids(tok, *sol));
    s.max_new_tokens = std::max<int64_t>(s.max_new_tokens, static_cast<int64_t>(ids.size()) + 1);
  }
  return s;
}

}  // namespace

Result<SftResult> run_sft(model::TransformerImpl& model, const tokenizer::Tokenizer& tok, const tasks::Task& task,
                          const SftSection& c, const std::function<void(const SftProgress&)>& on_step,
                          const std::vector<int64_t>& stop_ids) {
  const auto t0 = std::chrono::steady_clock::now();
  OptimizerConfig oc;
  oc.schedule = {c.lr, c.warmup_steps, c.steps, c.min_lr_ratio};
  oc.weight_decay = c.weight_decay;
  oc.grad_clip = c.grad_clip;
  Optimizer opt(model.parameters(), oc);
  StopCheck check;
  if (c.stop_at_pass1 > 0) {
    MESHRL_ASSIGN_OR_RETURN(check, make_stop_check(tok, task, c));
  }
  model.train();
  SftResult r;
  for (int64_t s = 0; s < c.steps; ++s) {
    std::vector<tasks::Problem> problems;
    for (int64_t b = 0; b < c.batch_size; ++b)
      problems.push_back(task.sample(rollout::mix_seed({c.seed, static_cast<uint64_t>(s), static_cast<uint64_t>(b), 0x5F7})));
    MESHRL_ASSIGN_OR_RETURN(auto batch, make_sft_batch(tok, task, problems));
    auto loss = sft_loss(model, batch);
    loss.backward();
    const auto info = opt.step();
    const double l = loss.item<double>();
    r.losses.push_back(l);
    r.tokens += static_cast<int64_t>(batch.mask.sum().item<double>());
    double pass1 = -1;
    if (c.stop_at_pass1 > 0 && (s + 1) % c.check_every == 0) {
      torch::NoGradGuard no_grad;
      model.eval();
      MESHRL_ASSIGN_OR_RETURN(const GreedyScore g, greedy_score(model, tok, task, check.problems, check.max_new_tokens, stop_ids));
      model.train();
      pass1 = g.pass_at_1;
      r.checks.emplace_back(s + 1, pass1);
      r.reached_target = pass1 >= c.stop_at_pass1;
    }
    if (on_step)
      on_step({s + 1, c.steps, l, info.lr, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), pass1});
    if (r.reached_target) break;
  }
  const size_t n = r.losses.size(), w = std::min<size_t>(10, n);
  if (n > 0) {
    r.first_loss = std::accumulate(r.losses.begin(), r.losses.begin() + w, 0.0) / w;
    r.final_loss = std::accumulate(r.losses.end() - w, r.losses.end(), 0.0) / w;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace meshrl::rl

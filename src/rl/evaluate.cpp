// pass@1 / pass@k on the held-out split. See evaluate.h.
#include "rl/evaluate.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "rl/task_rollouts.h"
#include "rollout/sampler.h"

namespace meshrl::rl {

double pass_at_k_estimate(int64_t n, int64_t c, int64_t k) {
  MESHRL_CHECK(n >= 1 && c >= 0 && c <= n && k >= 1 && k <= n, "[pass_at_k] needs 0 <= c <= n, 1 <= k <= n; got n=" << n << " c=" << c << " k=" << k);
  if (n - c < k) return 1.0;
  // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i): a product of numbers in (0, 1], no overflow.
  double fail = 1.0;
  for (int64_t i = n - c + 1; i <= n; ++i) fail *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - fail;
}

Result<GreedyScore> greedy_score(model::TransformerImpl& model, const tokenizer::Tokenizer& tok, const tasks::Task& task,
                                 const std::vector<tasks::Problem>& problems, int64_t max_new_tokens,
                                 const std::vector<int64_t>& stop_ids, int64_t batch_size,
                                 const std::function<void(int64_t rows_done)>& on_rows) {
  MESHRL_CHECK(!problems.empty(), "[greedy_score] no problems");
  MESHRL_ASSIGN_OR_RETURN(auto prompts, encode_prompts(tok, problems));
  const auto stops = task.stop_strings();
  rollout::GenerateConfig g;
  g.max_new_tokens = max_new_tokens;
  g.stop_token_ids = stop_ids;
  g.stop_strings = stops;
  g.sampling.temperature = 0.0;
  const auto greedy = generate_batched(model, tok, prompts, g, batch_size, on_rows);
  int64_t solved = 0, parsed = 0;
  GreedyScore out;
  for (size_t i = 0; i < problems.size(); ++i) {
    MESHRL_ASSIGN_OR_RETURN(auto s, task.score(problems[i], text_for_scoring(greedy[i], tok, stops)));
    solved += s.correct && !s.failed();
    parsed += s.format_ok && !s.failed();
    out.verifier_failures.add(s.failure);
  }
  const double n = static_cast<double>(problems.size());
  out.pass_at_1 = static_cast<double>(solved) / n;
  out.format_rate = static_cast<double>(parsed) / n;
  return out;
}

Result<EvalResult> evaluate(model::TransformerImpl& model, const tokenizer::Tokenizer& tok, const tasks::Task& task,
                            const EvalOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  EvalResult r;
  const int64_t n = std::min<int64_t>(o.n_problems, static_cast<int64_t>(task.n_eval()));
  MESHRL_CHECK(n >= 1, "[evaluate] the task has no held-out problems");
  std::vector<tasks::Problem> problems;
  for (int64_t i = 0; i < n; ++i) problems.push_back(task.eval_problem(static_cast<size_t>(i)));
  const int64_t m_samples = o.pass_k > 1 ? (o.n_samples > 0 ? o.n_samples : 2 * o.pass_k) : 0;
  const int64_t rows_total = n + n * m_samples;
  MESHRL_ASSIGN_OR_RETURN(const GreedyScore greedy,
                          greedy_score(model, tok, task, problems, o.max_new_tokens, o.stop_ids, o.batch_size, [&](int64_t done) {
                            if (o.on_progress) o.on_progress(done, rows_total);
                          }));
  r.n_problems = n;
  r.pass_at_1 = greedy.pass_at_1;
  r.format_rate = greedy.format_rate;
  r.verifier_failures = greedy.verifier_failures;
  r.k = o.pass_k;

  if (o.pass_k > 1) {
    MESHRL_ASSIGN_OR_RETURN(auto prompts, encode_prompts(tok, problems));
    const auto stops = task.stop_strings();
    rollout::GenerateConfig g;
    g.max_new_tokens = o.max_new_tokens;
    g.stop_token_ids = o.stop_ids;
    g.stop_strings = stops;
    g.seed = o.seed;
    const int64_t m = o.n_samples > 0 ? o.n_samples : 2 * o.pass_k;
    MESHRL_CHECK(m >= o.pass_k, "[evaluate] n_samples " << m << " < pass_k " << o.pass_k);
    std::vector<std::vector<int64_t>> rows;
    rollout::GenerateConfig s = g;
    s.sampling.temperature = o.temperature;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        rows.push_back(prompts[i]);
        s.row_seeds.push_back(rollout::mix_seed({o.seed, static_cast<uint64_t>(i), static_cast<uint64_t>(j), 0xE7A1}));
      }
    const auto samples = generate_batched(model, tok, rows, s, o.batch_size, [&](int64_t done) {
      if (o.on_progress) o.on_progress(n + done, rows_total);
    });
    double sum_k = 0, sum_1 = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t c = 0;
      for (int64_t j = 0; j < m; ++j) {
        MESHRL_ASSIGN_OR_RETURN(auto sc, task.score(problems[i], text_for_scoring(samples[i * m + j], tok, stops)));
        c += sc.correct && !sc.failed();
        r.verifier_failures.add(sc.failure);
      }
      sum_k += pass_at_k_estimate(m, c, o.pass_k);
      sum_1 += static_cast<double>(c) / static_cast<double>(m);
    }
    r.n_samples = m;
    r.pass_at_k = sum_k / static_cast<double>(n);
    r.sampled_pass_at_1 = sum_1 / static_cast<double>(n);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::json eval_result_to_json(const EvalResult& r) {
  nlohmann::json j = {{"n_problems", r.n_problems}, {"pass_at_1", r.pass_at_1}, {"format_rate", r.format_rate},
                      {"verifier_failures", tasks::verifier_failures_to_json(r.verifier_failures)}, {"seconds", r.seconds}};
  if (r.n_samples > 0) {
    j["k"] = r.k;
    j["n_samples"] = r.n_samples;
    j["pass_at_k"] = r.pass_at_k;
    j["sampled_pass_at_1"] = r.sampled_pass_at_1;
  }
  return j;
}

}  // namespace meshrl::rl

// Held-out evaluation of a policy on a task: pass@1 with greedy decoding, and pass@k estimated
// without bias from n sampled completions per problem (Chen et al. 2021:
// 1 - C(n - c, k) / C(n, k), c = correct samples). Only the task's eval split is used.
// A completion the verifier failed on (task.h: Score.failure) counts as not correct and not
// well-formed, and is counted by kind; only the task's failure budget running out stops it.
// Knows nothing about training or the network.
#pragma once

#include <functional>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/transformer.h"
#include "tasks/task.h"
#include "tasks/verifier_failures.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::rl {

struct EvalOptions {
  int64_t n_problems = 200;     // the first n of the held-out split (capped by task.n_eval())
  int64_t pass_k = 1;           // 1: greedy pass@1 only; > 1: also sample n_samples per problem
  int64_t n_samples = 0;        // 0 = 2 * pass_k; must be >= pass_k
  double temperature = 1.0;     // for the samples
  int64_t max_new_tokens = 16;
  int64_t batch_size = 256;     // rows per generate() call
  uint64_t seed = 0;            // sample j of eval problem i uses mix_seed(seed, i, j)
  std::vector<int64_t> stop_ids;  // e.g. the policy's EOS ids
  // Progress display (may be empty): generated rows so far of all the rows to generate (the n
  // greedy ones, then n * n_samples when pass_k > 1), after each generation batch.
  std::function<void(int64_t rows_done, int64_t rows_total)> on_progress;
};

struct EvalResult {
  int64_t n_problems = 0;
  double pass_at_1 = 0;         // greedy, share of problems solved
  double format_rate = 0;       // greedy, share of completions the verifier could parse
  int64_t k = 1;
  int64_t n_samples = 0;        // 0 when no sampling was done
  double pass_at_k = -1;        // unbiased estimate; -1 when not measured
  double sampled_pass_at_1 = -1;  // mean c / n over problems; -1 when not measured
  tasks::VerifierFailureCounts verifier_failures;  // greedy and sampled completions together
  double seconds = 0;
};

// Unbiased pass@k from n samples with c correct (0 <= c <= n, 1 <= k <= n), in float64.
double pass_at_k_estimate(int64_t n, int64_t c, int64_t k);

struct GreedyScore {
  double pass_at_1 = 0;    // share of problems solved
  double format_rate = 0;  // share the verifier could parse
  tasks::VerifierFailureCounts verifier_failures;
};

// Greedy decoding of any problems (the SFT stop check uses training ones), scored by the task.
Result<GreedyScore> greedy_score(model::TransformerImpl& model, const tokenizer::Tokenizer& tok, const tasks::Task& task,
                                 const std::vector<tasks::Problem>& problems, int64_t max_new_tokens,
                                 const std::vector<int64_t>& stop_ids, int64_t batch_size = 256,
                                 const std::function<void(int64_t rows_done)>& on_rows = {});

// Fails only when scoring fails as a whole (an external verifier that cannot start, or fails
// past [task] max_failure_rate) or a prompt cannot be encoded.
Result<EvalResult> evaluate(model::TransformerImpl& model, const tokenizer::Tokenizer& tok, const tasks::Task& task,
                            const EvalOptions& options);

nlohmann::json eval_result_to_json(const EvalResult& r);

}  // namespace meshrl::rl

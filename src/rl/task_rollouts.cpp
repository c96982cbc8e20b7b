// Prompts in, scorable completions out. See task_rollouts.h.
#include "rl/task_rollouts.h"

#include <algorithm>

#include "rollout/policy.h"
#include "rollout/sampler.h"

namespace meshrl::rl {

Result<std::vector<std::vector<int64_t>>> encode_prompts(const tokenizer::Tokenizer& tok,
                                                         const std::vector<tasks::Problem>& problems) {
  std::vector<std::vector<int64_t>> out;
  out.reserve(problems.size());
  for (const auto& p : problems) {
    MESHRL_ASSIGN_OR_RETURN(auto ids, rollout::encode_ids(tok, p.prompt));
    if (ids.empty()) return invalid_argument("[rl] problem " + p.id + " has a prompt that encodes to no tokens");
    out.push_back(std::move(ids));
  }
  return out;
}

std::string text_for_scoring(const rollout::Completion& c, const tokenizer::Tokenizer& tok,
                             const std::vector<std::string>& stop_strings) {
  if (c.finish != rollout::FinishReason::kStopString) return c.text;
  std::string full;
  for (int64_t id : c.token_ids) {
    auto b = tok.token_bytes(static_cast<int32_t>(id));
    if (b.is_ok()) full += b.value();
  }
  // generate() cut `text` at the first stop string; the one that starts there is the one it matched.
  for (const auto& s : stop_strings)
    if (!s.empty() && full.compare(c.text.size(), s.size(), s) == 0) return c.text + s;
  return c.text;
}

std::vector<rollout::Completion> generate_batched(model::TransformerImpl& model, const tokenizer::Tokenizer& tok,
                                                  const std::vector<std::vector<int64_t>>& prompts,
                                                  const rollout::GenerateConfig& config, int64_t batch_size,
                                                  const std::function<void(int64_t rows_done)>& on_chunk) {
  std::vector<rollout::Completion> out;
  out.reserve(prompts.size());
  const auto bytes = rollout::token_bytes_fn(tok);
  const int64_t n = static_cast<int64_t>(prompts.size());
  for (int64_t from = 0; from < n; from += batch_size) {
    const int64_t to = std::min(n, from + batch_size);
    rollout::GenerateConfig c = config;
    c.row_seeds.clear();
    for (int64_t i = from; i < to; ++i)
      c.row_seeds.push_back(config.row_seeds.empty() ? rollout::mix_seed({config.seed, static_cast<uint64_t>(i)})
                                                     : config.row_seeds[i]);
    std::vector<std::vector<int64_t>> chunk(prompts.begin() + from, prompts.begin() + to);
    auto part = rollout::generate(model, chunk, c, bytes);
    for (auto& x : part) out.push_back(std::move(x));
    if (on_chunk) on_chunk(to);
  }
  return out;
}

}  // namespace meshrl::rl

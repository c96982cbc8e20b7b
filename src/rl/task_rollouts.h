// The glue between tasks and generation: problems' prompts to token ids, batched generation with
// the task's stop strings, and completions back to the text a verifier expects (with the stop
// string put back: generate() cuts it from `text`, task.h wants it kept).
// Knows nothing about losses or optimizers.
#pragma once

#include <functional>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/transformer.h"
#include "rollout/generate.h"
#include "tasks/task.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::rl {

// One id list per problem; an empty prompt is an error naming the problem.
Result<std::vector<std::vector<int64_t>>> encode_prompts(const tokenizer::Tokenizer& tok,
                                                         const std::vector<tasks::Problem>& problems);

// completion.text plus the stop string it ended on (found in the decoded token bytes), so that
// "82" + "\n" reaches the verifier as "82\n". Other finishes: the text as is.
std::string text_for_scoring(const rollout::Completion& c, const tokenizer::Tokenizer& tok,
                             const std::vector<std::string>& stop_strings);

// generate() over `prompts` in chunks of at most batch_size rows; row_seeds (one per prompt, or
// empty for mix_seed(config.seed, row)) keep each row's sample independent of the chunking.
// on_chunk (may be empty) is called with the rows done so far after each chunk.
std::vector<rollout::Completion> generate_batched(model::TransformerImpl& model, const tokenizer::Tokenizer& tok,
                                                  const std::vector<std::vector<int64_t>>& prompts,
                                                  const rollout::GenerateConfig& config, int64_t batch_size,
                                                  const std::function<void(int64_t rows_done)>& on_chunk = {});

}  // namespace meshrl::rl

// Batched generation with the KV cache: prompts are left-padded into one batch, prefilled in one
// forward pass, then decoded one token per step for every row until each row stops.
// Knows nothing about tasks, rewards or the network.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "rollout/sampler.h"

namespace meshrl::rollout {

struct GenerateConfig {
  int64_t max_new_tokens = 64;
  SamplingConfig sampling;
  std::vector<int64_t> stop_token_ids;   // e.g. EOS; the stop token is kept in token_ids, not in text
  std::vector<std::string> stop_strings; // matched on decoded bytes; kept in token_ids, cut from text
  uint64_t seed = 0;                     // row b uses mix_seed({seed, b}) unless row_seeds is given
  std::vector<uint64_t> row_seeds;       // optional, one per prompt
};

enum class FinishReason { kStopToken, kStopString, kLength };

struct Completion {
  std::vector<int64_t> token_ids;  // new tokens only, including the stop token if any
  std::vector<float> logprobs;     // one per token_ids entry (behaviour log-probs)
  std::string text;                // decoded new tokens, cut before a stop string / stop token
  FinishReason finish = FinishReason::kLength;
};

// Raw bytes of one token id (for stop strings and text); supplied by the tokenizer.
using TokenBytesFn = std::function<std::string(int64_t id)>;

std::vector<Completion> generate(model::TransformerImpl& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateConfig& config, const TokenBytesFn& token_bytes);

const char* finish_reason_name(FinishReason r);

}  // namespace meshrl::rollout

// The sampler turns logits into token ids and their log-probs. It knows nothing about tokenizers,
// tasks or the network.
//
// Randomness is counter-based: row b at step s draws u = uniform(hash(row_seed[b], s)) and takes
// the inverse CDF of its distribution. So a sequence's tokens depend only on its own seed, never
// on the batch it was run in or the thread count (derive row seeds from (run, version, node,
// prompt, sample)).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace meshrl::rollout {

struct SamplingConfig {
  double temperature = 1.0;  // 0 = greedy (argmax)
  int64_t top_k = 0;         // 0 = off
  double top_p = 1.0;        // 1 = off
};

struct SampleResult {
  torch::Tensor ids;       // [B] int64
  torch::Tensor logprobs;  // [B] float32: log-prob of ids under the distribution sampled from
};

// logits [B, V] float32. The log-prob is taken under the temperature-scaled, top-k/top-p filtered
// distribution actually sampled from (the behaviour policy); for greedy, under softmax(logits).
SampleResult sample_tokens(const torch::Tensor& logits, const SamplingConfig& config,
                           const std::vector<uint64_t>& row_seeds, int64_t step);

// A uniform double in [0, 1) from (seed, counter): splitmix64, 53 bits of mantissa.
double uniform_from(uint64_t seed, uint64_t counter);

// Mixes several integers into one seed (for row seeds from run, version, node, prompt, sample).
uint64_t mix_seed(std::initializer_list<uint64_t> parts);

}  // namespace meshrl::rollout

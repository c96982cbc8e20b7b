// A very small policy for fast RL tests: 2 layers, 64 wide, character tokenizer, seeded weights.
//   #include "support/micro_policy.h"
#pragma once

#include "model/transformer.h"
#include "rollout/policy.h"
#include "tokenizer/char_tokenizer.h"

namespace meshrl::test_support {

inline model::ModelConfig micro_config() {
  model::ModelConfig c;
  c.n_vocab = 264;  // the char tokenizer's 261 ids, rounded up
  c.n_embd = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.n_ff = 128;
  c.max_positions = 64;
  c.eos_token_ids = {tokenizer::kCharImEnd};
  return c;
}

inline rollout::Policy micro_policy(uint64_t seed) {
  rollout::Policy p;
  p.model = model::Transformer(micro_config());
  p.model->init_weights(seed);
  p.tokenizer = tokenizer::make_char_tokenizer(264).value();
  p.stop_ids = {tokenizer::kCharImEnd};
  return p;
}

}  // namespace meshrl::test_support

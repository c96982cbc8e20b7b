// The small transformer config the model-level tests share: 2 layers, 32 wide, 4 query heads over
// 2 kv heads (so grouped-query attention is exercised), a vocabulary of 61 (equal to no other
// dimension), 64 positions. Seconds to run against a plain reference implementation.
//   #include "support/small_model.h"
#pragma once

#include "model/config.h"

namespace meshrl::test_support {

inline model::ModelConfig small_model_config(bool attention_bias = false, bool tie_word_embeddings = true) {
  model::ModelConfig c;
  c.n_vocab = 61;
  c.n_embd = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.n_ff = 48;
  c.max_positions = 64;
  c.attention_bias = attention_bias;
  c.tie_word_embeddings = tie_word_embeddings;
  return c;
}

}  // namespace meshrl::test_support

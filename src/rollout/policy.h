// Policy: a model with its tokenizer, loaded from a Hugging Face folder (config.json, safetensors,
// tokenizer.json) or a built-in preset (tiny, small: seeded weights, character tokenizer).
// Knows nothing about tasks or the network.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/transformer.h"
#include "rollout/generate.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::rollout {

inline constexpr const char* kCharTokenizerMarker = "meshrl_tokenizer.json";

struct Policy {
  model::Transformer model{nullptr};
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::vector<int64_t> stop_ids;  // config.json's eos ids, else the tokenizer's guess
};

// Folder: reads tokenizer.json beside the weights and checks its vocabulary fits the embedding.
// A folder without tokenizer.json but with kCharTokenizerMarker ({"type": "char", "n_vocab": N},
// written by `meshrl sft` for models trained from a preset) gets the character tokenizer: a
// byte-level BPE tokenizer.json with no merges would NOT reproduce its ids (GPT-2's byte-to-unicode
// table orders the 256 bytes differently), so the folder says what it needs instead.
Result<Policy> load_policy(const std::string& spec, const std::string& device = "cpu", uint64_t seed = 0);

// Bytes of one id for stop strings and text; ids the tokenizer does not know decode to "".
TokenBytesFn token_bytes_fn(const tokenizer::Tokenizer& tok);

// Text -> int64 ids (the model's index type).
Result<std::vector<int64_t>> encode_ids(const tokenizer::Tokenizer& tok, const std::string& text);

}  // namespace meshrl::rollout

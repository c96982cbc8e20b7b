#include "rollout/policy.h"

#include <filesystem>

#include "model/model_io.h"
#include "tokenizer/char_tokenizer.h"

namespace meshrl::rollout {

Result<Policy> load_policy(const std::string& spec, const std::string& device, uint64_t seed) {
  Policy p;
  MESHRL_ASSIGN_OR_RETURN(p.model, model::load_transformer(spec, device, seed));
  const auto& cfg = p.model->config();
  const std::filesystem::path tok_path = std::filesystem::path(spec) / "tokenizer.json";
  if (std::filesystem::is_directory(spec)) {
    if (!std::filesystem::exists(tok_path))
      return not_found("[policy] " + tok_path.string() + " not found: a model folder needs its tokenizer.json");
    MESHRL_ASSIGN_OR_RETURN(auto tok, tokenizer::load_tokenizer(tok_path));
    p.tokenizer = std::move(tok);
  } else {
    MESHRL_ASSIGN_OR_RETURN(auto tok, tokenizer::make_char_tokenizer(static_cast<int32_t>(cfg.n_vocab)));
    p.tokenizer = std::move(tok);
  }
  if (p.tokenizer->n_vocab() > cfg.n_vocab)
    return invalid_argument("[policy] tokenizer has " + std::to_string(p.tokenizer->n_vocab()) +
                            " ids but config.json vocab_size is " + std::to_string(cfg.n_vocab) + " (" + spec + ")");
  p.stop_ids = cfg.eos_token_ids;
  if (p.stop_ids.empty() && p.tokenizer->eos_id()) p.stop_ids.push_back(*p.tokenizer->eos_id());
  return p;
}

TokenBytesFn token_bytes_fn(const tokenizer::Tokenizer& tok) {
  return [&tok](int64_t id) -> std::string {
    auto r = tok.token_bytes(static_cast<int32_t>(id));
    return r.is_ok() ? std::string(r.value()) : std::string();
  };
}

Result<std::vector<int64_t>> encode_ids(const tokenizer::Tokenizer& tok, const std::string& text) {
  MESHRL_ASSIGN_OR_RETURN(auto ids, tok.encode(text));
  return std::vector<int64_t>(ids.begin(), ids.end());
}

}  // namespace meshrl::rollout

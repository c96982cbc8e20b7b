#include "rollout/policy.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "model/model_io.h"
#include "tokenizer/char_tokenizer.h"

namespace meshrl::rollout {

namespace {
// {"type": "char", "n_vocab": N}: the folder's model uses the character tokenizer of size N.
Result<std::unique_ptr<tokenizer::Tokenizer>> load_char_marker(const std::filesystem::path& path) {
  MESHRL_ASSIGN_OR_RETURN(std::string text, read_file(path, 1 << 16));
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("[policy] " + path.string() + " is not a JSON object");
  if (!j.contains("type") || !j["type"].is_string() || j["type"].get<std::string>() != "char")
    return invalid_argument("[policy] " + path.string() + ": field 'type' must be \"char\"");
  if (!j.contains("n_vocab") || !j["n_vocab"].is_number_integer())
    return invalid_argument("[policy] " + path.string() + ": field 'n_vocab' must be an integer");
  const int64_t n = j["n_vocab"].get<int64_t>();
  if (n < tokenizer::kCharMinVocab || n > tokenizer::kCharMaxVocab)
    return invalid_argument("[policy] " + path.string() + ": field 'n_vocab' must be in [261, 2^24], got " + std::to_string(n));
  return tokenizer::make_char_tokenizer(static_cast<int32_t>(n));
}
}  // namespace

Result<Policy> load_policy(const std::string& spec, const std::string& device, uint64_t seed) {
  Policy p;
  MESHRL_ASSIGN_OR_RETURN(p.model, model::load_transformer(spec, device, seed));
  const auto& cfg = p.model->config();
  const std::filesystem::path tok_path = std::filesystem::path(spec) / "tokenizer.json";
  if (std::filesystem::is_directory(spec)) {
    const std::filesystem::path marker = std::filesystem::path(spec) / kCharTokenizerMarker;
    if (std::filesystem::exists(tok_path)) {
      MESHRL_ASSIGN_OR_RETURN(auto tok, tokenizer::load_tokenizer(tok_path));
      p.tokenizer = std::move(tok);
    } else if (std::filesystem::exists(marker)) {
      MESHRL_ASSIGN_OR_RETURN(auto tok, load_char_marker(marker));
      p.tokenizer = std::move(tok);
    } else {
      return not_found("[policy] " + tok_path.string() + " not found: a model folder needs its tokenizer.json (or " +
                       kCharTokenizerMarker + " for the character tokenizer)");
    }
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

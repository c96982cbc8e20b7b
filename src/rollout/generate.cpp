#include "rollout/generate.h"

#include <algorithm>

#include "core/check.h"

namespace meshrl::rollout {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kStopString: return "stop_string";
    case FinishReason::kLength: return "length";
  }
  return "?";
}

namespace {
// Row state while decoding: the bytes so far, to look for stop strings in the newest part only.
struct RowState {
  bool done = false;
  std::string bytes;
};

// Position of the first stop string in `bytes` that ends in its last `new_len` bytes, or npos.
size_t find_stop(const std::string& bytes, size_t new_len, const std::vector<std::string>& stops) {
  size_t best = std::string::npos;
  for (const auto& s : stops) {
    if (s.empty()) continue;
    size_t from = bytes.size() >= new_len + s.size() ? bytes.size() - new_len - s.size() + 1 : 0;
    size_t at = bytes.find(s, from);
    if (at != std::string::npos) best = std::min(best, at);
  }
  return best;
}
}  // namespace

std::vector<Completion> generate(model::TransformerImpl& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateConfig& config, const TokenBytesFn& token_bytes) {
  torch::NoGradGuard no_grad;
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<Completion> out(B);
  if (B == 0) return out;
  MESHRL_CHECK(config.row_seeds.empty() || static_cast<int64_t>(config.row_seeds.size()) == B,
               "[generate] row_seeds has " << config.row_seeds.size() << " entries for " << B << " prompts");
  int64_t T0 = 0;
  for (auto& p : prompts) {
    MESHRL_CHECK(!p.empty(), "[generate] empty prompt (give at least a BOS token)");
    T0 = std::max<int64_t>(T0, static_cast<int64_t>(p.size()));
  }
  const int64_t max_len = T0 + config.max_new_tokens;
  const auto device = model.parameters()[0].device();

  // Left-pad with token 0; padded slots are masked out of attention, and rotary embeddings only
  // see relative positions, so a padded row computes what it would alone (up to rounding).
  auto tokens = torch::zeros({B, T0}, torch::kInt64);
  auto tok_a = tokens.accessor<int64_t, 2>();
  auto key_mask = torch::ones({B, max_len}, torch::kBool);
  bool padded = false;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pad = T0 - static_cast<int64_t>(prompts[b].size());
    for (int64_t t = 0; t < static_cast<int64_t>(prompts[b].size()); ++t) tok_a[b][pad + t] = prompts[b][t];
    if (pad > 0) {
      key_mask[b].narrow(0, 0, pad).fill_(false);
      padded = true;
    }
  }
  std::vector<uint64_t> seeds = config.row_seeds;
  if (seeds.empty())
    for (int64_t b = 0; b < B; ++b) seeds.push_back(mix_seed({config.seed, static_cast<uint64_t>(b)}));

  auto cache = model.make_cache(B, max_len);
  cache.key_mask.copy_(key_mask);
  cache.padded = padded;

  std::vector<RowState> rows(B);
  // Prefill: only the last prompt position's logits are needed, so the lm_head sees B rows, not B*T0.
  auto logits = model.logits_from_hidden(model.forward_hidden(tokens.to(device), &cache).select(1, T0 - 1));  // [B, V]
  int64_t n_done = 0;
  for (int64_t step = 0; step < config.max_new_tokens; ++step) {
    auto s = sample_tokens(logits, config.sampling, seeds, step);
    auto ids = s.ids.to(torch::kCPU).contiguous();
    auto lps = s.logprobs.to(torch::kCPU).contiguous();
    const int64_t* id_p = ids.data_ptr<int64_t>();
    const float* lp_p = lps.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b) {
      if (rows[b].done) continue;
      auto& c = out[b];
      c.token_ids.push_back(id_p[b]);
      c.logprobs.push_back(lp_p[b]);
      if (std::find(config.stop_token_ids.begin(), config.stop_token_ids.end(), id_p[b]) !=
          config.stop_token_ids.end()) {
        c.finish = FinishReason::kStopToken;
        rows[b].done = true;
      } else {
        std::string piece = token_bytes(id_p[b]);
        rows[b].bytes += piece;
        size_t at = find_stop(rows[b].bytes, piece.size(), config.stop_strings);
        if (at != std::string::npos) {
          rows[b].bytes.resize(at);
          c.finish = FinishReason::kStopString;
          rows[b].done = true;
        }
      }
      if (rows[b].done) ++n_done;
    }
    if (n_done == B || step + 1 == config.max_new_tokens) break;
    // Finished rows keep decoding (their outputs are ignored) so the batch stays rectangular.
    logits = model.forward(s.ids.view({B, 1}).to(device), &cache).select(1, 0);
  }
  for (int64_t b = 0; b < B; ++b) out[b].text = std::move(rows[b].bytes);
  return out;
}

}  // namespace meshrl::rollout

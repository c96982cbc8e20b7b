// `meshrl generate --model DIR|PRESET --prompt TEXT [--max-new-tokens N] [--temperature T]
//  [--top-k K] [--top-p P] [--seed S] [--stop STR]... [--chat] [--json]`
// With --json: {"token_ids": [new ids only], "text": "...", "logprobs": [...], "finish": "..."}.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "rollout/policy.h"
#include "tokenizer/chat_template.h"

namespace meshrl::cli {

namespace {
struct GenerateArgs {
  ModelOptions model;
  std::string prompt;
  int64_t max_new_tokens = 64;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::vector<std::string> stops;
  bool chat = false;
  bool json = false;
};

void run_generate(const GenerateArgs& a) {
  auto policy = load_policy_or_throw(a.model);
  std::string text = a.prompt;
  if (a.chat) text = tokenizer::apply_chatml({{"user", a.prompt}}, /*add_generation_prompt=*/true);
  auto ids = rollout::encode_ids(*policy.tokenizer, text).value();
  if (ids.empty()) throw StatusError(invalid_argument("[generate] the prompt encodes to no tokens"));
  rollout::GenerateConfig cfg;
  cfg.max_new_tokens = a.max_new_tokens;
  cfg.sampling = {a.temperature, a.top_k, a.top_p};
  cfg.seed = a.seed;
  cfg.stop_token_ids = policy.stop_ids;
  cfg.stop_strings = a.stops;
  auto out = rollout::generate(*policy.model, {ids}, cfg, rollout::token_bytes_fn(*policy.tokenizer))[0];
  if (a.json) {
    nlohmann::json j;
    j["token_ids"] = out.token_ids;
    j["text"] = out.text;
    j["logprobs"] = std::vector<double>(out.logprobs.begin(), out.logprobs.end());
    j["finish"] = rollout::finish_reason_name(out.finish);
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::cout << out.text << std::endl;
  }
}
}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "sample a continuation of a prompt");
  add_model_options(cmd, a->model);
  cmd->add_option("--prompt", a->prompt, "prompt text")->required();
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate at most")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str()->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", a->top_k, "keep the k most likely tokens (0 = off)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", a->top_p, "nucleus mass (1 = off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", a->seed, "sampling seed")->capture_default_str();
  cmd->add_option("--stop", a->stops, "stop string (repeatable)");
  cmd->add_flag("--chat", a->chat, "wrap the prompt in the ChatML template");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace meshrl::cli

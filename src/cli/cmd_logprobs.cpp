// `meshrl logprobs --model DIR|PRESET --text TEXT [--json]`: log p(token_ids[i+1] | token_ids[..i])
// for every position, in fp32 from the stored weights. --json prints
// {"token_ids": [...], "logprobs": [...]} with len(logprobs) = len(token_ids) - 1.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "rollout/policy.h"

namespace meshrl::cli {

namespace {
struct LogprobsArgs {
  ModelOptions model;
  std::string text;
  bool json = false;
};

void run_logprobs(const LogprobsArgs& a) {
  auto policy = load_policy_or_throw(a.model);
  auto ids = rollout::encode_ids(*policy.tokenizer, a.text).value();
  std::vector<double> lps;
  if (ids.size() >= 2) {
    torch::NoGradGuard no_grad;
    auto device = policy.model->parameters()[0].device();
    auto tokens = torch::tensor(ids, torch::kInt64).view({1, -1}).to(device);
    auto logp = torch::log_softmax(policy.model->forward(tokens).squeeze(0), -1);  // [T, V]
    auto picked = logp.narrow(0, 0, logp.size(0) - 1).gather(1, tokens.squeeze(0).narrow(0, 1, logp.size(0) - 1).unsqueeze(1));
    auto cpu = picked.squeeze(1).to(torch::kCPU, torch::kFloat64).contiguous();
    lps.assign(cpu.data_ptr<double>(), cpu.data_ptr<double>() + cpu.numel());
  }
  if (a.json) {
    nlohmann::json j;
    j["token_ids"] = ids;
    j["logprobs"] = lps;
    std::cout << j.dump() << std::endl;
  } else {
    double total = 0;
    for (size_t i = 0; i < lps.size(); ++i) {
      std::cout << ids[i + 1] << "\t" << lps[i] << "\n";
      total += lps[i];
    }
    std::cout << "total\t" << total << std::endl;
  }
}
}  // namespace

void add_logprobs_command(CLI::App& app) {
  auto a = std::make_shared<LogprobsArgs>();
  auto* cmd = app.add_subcommand("logprobs", "log-probability of each token of a text under a model");
  add_model_options(cmd, a->model);
  cmd->add_option("--text", a->text, "text to score")->required();
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a] { run_logprobs(*a); });
}

}  // namespace meshrl::cli

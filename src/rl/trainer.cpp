// The inner GRPO loop. See trainer.h.
#include "rl/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/check.h"
#include "rl/advantages.h"
#include "rl/grpo_loss.h"
#include "rl/task_rollouts.h"
#include "rl/token_logprobs.h"
#include "rollout/sampler.h"

namespace meshrl::rl {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

OptimizerConfig optimizer_config(const GrpoSection& g) {
  OptimizerConfig oc;
  oc.schedule = {g.lr, g.warmup_steps, std::max<int64_t>(1, g.steps), g.min_lr_ratio};
  oc.weight_decay = g.weight_decay;
  oc.beta1 = g.adam_beta1;
  oc.beta2 = g.adam_beta2;
  oc.eps = g.adam_eps;
  oc.grad_clip = g.grad_clip;
  oc.pooled_batches = static_cast<double>(g.adam_pooled_batches);
  oc.pooled_clip = g.adam_pooled_clip;
  return oc;
}

LossNormalization loss_normalization(const std::string& s) {
  if (s == "sequence") return LossNormalization::kSequence;
  if (s == "constant") return LossNormalization::kConstant;
  MESHRL_CHECK(s == "token", "[trainer] unknown loss_normalization '" << s << "' (validate the config first)");
  return LossNormalization::kToken;
}

// The sequences that enter the loss, right-padded: tokens [B, T], and per position t of
// [B, T-1] (which predicts token t+1) the mask, the behaviour log-prob and nothing else.
struct LossBatch {
  torch::Tensor tokens;      // [B, T] int64
  torch::Tensor mask;        // [B, T-1] float32: 1 on positions predicting a completion token
  torch::Tensor logp_old;    // [B, T-1] float32: behaviour log-probs, 0 where mask == 0
  torch::Tensor advantages;  // [B] float32
};

// scored: [N*G] bool on the CPU (every row when undefined).
LossBatch build_loss_batch(const Rollouts& r, const std::vector<int64_t>& rows, const torch::Tensor& adv, int64_t G,
                           bool mask_truncated, const torch::Tensor& scored) {
  int64_t T = 0;
  for (int64_t row : rows)
    T = std::max<int64_t>(T, static_cast<int64_t>(r.prompt_ids[row / G].size() + r.completions[row].token_ids.size()));
  const int64_t B = static_cast<int64_t>(rows.size());
  LossBatch b;
  b.tokens = torch::zeros({B, T}, torch::kInt64);
  b.mask = torch::zeros({B, T - 1}, torch::kFloat32);
  b.logp_old = torch::zeros({B, T - 1}, torch::kFloat32);
  b.advantages = torch::empty({B}, torch::kFloat32);
  auto ta = b.tokens.accessor<int64_t, 2>();
  auto ma = b.mask.accessor<float, 2>();
  auto la = b.logp_old.accessor<float, 2>();
  auto aa = b.advantages.accessor<float, 1>();
  auto adv_a = adv.accessor<float, 1>();
  const bool* scored_a = scored.defined() ? scored.data_ptr<bool>() : nullptr;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t row = rows[i];
    const auto& prompt = r.prompt_ids[row / G];
    const auto& c = r.completions[row];
    const int64_t P = static_cast<int64_t>(prompt.size()), C = static_cast<int64_t>(c.token_ids.size());
    for (int64_t t = 0; t < P; ++t) ta[i][t] = prompt[t];
    for (int64_t j = 0; j < C; ++j) ta[i][P + j] = c.token_ids[j];
    aa[i] = adv_a[row];
    // Truncation is explicit: a completion cut at max_new_tokens keeps its reward (it still counts
    // in its group's baseline) but, with mask_truncated, teaches nothing itself (DAPO's overlong
    // filtering): its last tokens were cut, not chosen as an ending.
    if (mask_truncated && c.finish == rollout::FinishReason::kLength) continue;
    // A completion the verifier failed on has no reward to learn from: zero loss weight (mask 0),
    // so it is not in the token or sequence count that normalises the loss either.
    if (scored_a && !scored_a[row]) continue;
    for (int64_t j = 0; j < C; ++j) {
      ma[i][P + j - 1] = 1.0f;  // prompt tokens keep mask 0: the loss only sees the completion
      la[i][P + j - 1] = c.logprobs[j];
    }
  }
  return b;
}

torch::Tensor masked_mean(const torch::Tensor& x, const torch::Tensor& mask) {
  return (torch::where(mask > 0, x, torch::zeros_like(x)) * mask).sum() / mask.sum().clamp_min(1.0);
}
}  // namespace

model::Transformer clone_frozen(const model::Transformer& m) {
  model::Transformer ref(m->config());
  const auto device = m->parameters()[0].device();
  ref->to(device);
  // Adapters too, so the reference is the policy as it starts, parameter for parameter.
  if (m->lora()) MESHRL_CHECK(ref->attach_lora(m->lora()->config()).is_ok(), "[trainer] cannot copy the policy's adapters");
  torch::NoGradGuard no_grad;
  auto src = m->parameters();
  auto dst = ref->parameters();
  MESHRL_CHECK(src.size() == dst.size(), "[trainer] reference has " << dst.size() << " parameters, policy " << src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    dst[i].copy_(src[i]);
    dst[i].set_requires_grad(false);
  }
  ref->eval();
  return ref;
}

GrpoTrainer::GrpoTrainer(rollout::Policy policy, std::shared_ptr<const tasks::Task> task, const GrpoSection& config,
                         const EvalSection& eval)
    : policy_(std::move(policy)),
      task_(std::move(task)),
      config_(config),
      eval_(eval),
      optimizer_(policy_.model->parameters(), optimizer_config(config)) {
  MESHRL_CHECK(config_.group_size >= 2, "[trainer] group_size must be >= 2, got " << config_.group_size);
  if (config_.kl_coef > 0) ref_ = clone_frozen(policy_.model);
}

uint64_t GrpoTrainer::prompt_seed(int64_t i) const {
  return rollout::mix_seed({config_.seed, static_cast<uint64_t>(step_), static_cast<uint64_t>(i), 0x9B0});
}

std::vector<tasks::Problem> GrpoTrainer::sample_prompts() const {
  std::vector<tasks::Problem> out;
  for (int64_t i = 0; i < config_.prompts_per_step; ++i) out.push_back(task_->sample(prompt_seed(i)));
  return out;
}

Result<Rollouts> GrpoTrainer::generate_rollouts(std::vector<tasks::Problem> problems) {
  const auto t0 = Clock::now();
  Rollouts r;
  r.step = step_;
  MESHRL_ASSIGN_OR_RETURN(r.prompt_ids, encode_prompts(*policy_.tokenizer, problems));
  r.problems = std::move(problems);
  const int64_t G = config_.group_size;
  std::vector<std::vector<int64_t>> rows;
  rollout::GenerateConfig g;
  g.max_new_tokens = config_.max_new_tokens;
  g.sampling.temperature = config_.temperature;
  g.stop_token_ids = policy_.stop_ids;
  g.stop_strings = task_->stop_strings();
  for (size_t i = 0; i < r.prompt_ids.size(); ++i)
    for (int64_t k = 0; k < G; ++k) {
      rows.push_back(r.prompt_ids[i]);
      g.row_seeds.push_back(rollout::mix_seed({config_.seed, static_cast<uint64_t>(step_), i, static_cast<uint64_t>(k)}));
    }
  r.completions = generate_batched(*policy_.model, *policy_.tokenizer, rows, g, static_cast<int64_t>(rows.size()));
  r.seconds = since(t0);
  return r;
}

Status GrpoTrainer::score(Rollouts& r) const {
  const int64_t G = config_.group_size;
  const auto stops = task_->stop_strings();
  r.scores.clear();
  r.scored_texts.clear();
  r.verifier_failures = {};
  r.rewards = torch::empty({static_cast<int64_t>(r.completions.size())}, torch::kFloat32);
  r.scored = torch::ones({static_cast<int64_t>(r.completions.size())}, torch::kBool);
  auto ra = r.rewards.accessor<float, 1>();
  auto sa = r.scored.accessor<bool, 1>();
  for (size_t row = 0; row < r.completions.size(); ++row) {
    auto text = text_for_scoring(r.completions[row], *policy_.tokenizer, stops);
    // An error here is the task's budget of failures spent (or a verifier that cannot start):
    // the step, and the run, stop with its message.
    MESHRL_ASSIGN_OR_RETURN(auto s, task_->score(r.problems[row / G], text));
    ra[row] = s.failed() ? 0.0f : static_cast<float>(s.reward);
    sa[row] = !s.failed();
    r.verifier_failures.add(s.failure);
    r.scores.push_back(std::move(s));
    r.scored_texts.push_back(std::move(text));
  }
  return Status::ok();
}

torch::Tensor GrpoTrainer::compute_advantages(const Rollouts& r) const {
  AdvantageConfig ac;
  ac.normalize_std = config_.normalize_std;
  ac.negative_scale = config_.negative_scale;
  return group_advantages(r.rewards, config_.group_size, ac, r.scored).to(torch::kFloat32);
}

TrainStats GrpoTrainer::train_step(const Rollouts& r, const torch::Tensor& advantages) {
  const auto t0 = Clock::now();
  TrainStats st;
  const int64_t G = config_.group_size;
  const int64_t N = static_cast<int64_t>(r.problems.size());
  // The schedule follows trainer steps (not optimizer updates) so that skipped steps and the
  // number of minibatches do not stretch it.
  optimizer_.set_step_count(step_);
  st.lr = optimizer_.current_lr();

  std::vector<int64_t> rows;
  const auto keep =
      (config_.filter_equal_groups ? groups_with_signal(r.rewards, G, r.scored) : torch::ones({N}, torch::kBool)).to(torch::kCPU).contiguous();
  auto keep_a = keep.accessor<bool, 1>();
  for (int64_t i = 0; i < N; ++i) {
    if (!keep_a[i]) continue;
    ++st.groups_kept;
    for (int64_t k = 0; k < G; ++k) rows.push_back(i * G + k);
  }
  if (rows.empty()) {
    st.seconds = since(t0);
    return st;
  }
  const torch::Tensor scored = r.scored.defined() ? r.scored.to(torch::kCPU).contiguous() : torch::Tensor();
  const LossBatch all = build_loss_batch(r, rows, advantages.to(torch::kCPU).contiguous(), G, config_.mask_truncated, scored);
  st.rows = static_cast<int64_t>(rows.size());
  st.tokens = static_cast<int64_t>(all.mask.sum().item<double>());
  if (st.tokens == 0) {
    st.seconds = since(t0);
    return st;
  }

  auto& model = *policy_.model;
  const auto device = model.parameters()[0].device();
  const auto tokens = all.tokens.to(device);
  const auto mask = all.mask.to(device);
  const auto adv = all.advantages.to(device);
  torch::Tensor logp_old = all.logp_old.to(device);
  const bool behaviour_is_policy = config_.temperature == 1.0;
  if (!behaviour_is_policy) {
    torch::NoGradGuard no_grad;
    logp_old = token_logprobs(model, tokens).logprobs.detach();
  }
  torch::Tensor logp_ref;
  if (has_reference()) {
    torch::NoGradGuard no_grad;
    logp_ref = token_logprobs(*ref_, tokens).logprobs.detach();
  }

  GrpoLossConfig lc;
  lc.clip_low = config_.clip_low;
  lc.clip_high = config_.clip_high;
  lc.kl_coef = config_.kl_coef;
  lc.normalization = loss_normalization(config_.loss_normalization);
  lc.max_len = config_.max_new_tokens;

  model.train();
  const int64_t B = st.rows;
  const int64_t M = std::min<int64_t>(config_.minibatches, B);
  double sum_loss = 0, sum_clip = 0, sum_kl = 0, sum_ratio = 0, sum_norm = 0, sum_entropy = 0;
  int64_t n_entropy = 0, n_passes = 0;
  // One forward + backward over rows [from, to) of the batch; the loss is normalised within them.
  struct Pass {
    double loss = 0, clip = 0, kl = 0, ratio = 0, entropy = 0, weight = 0;
    bool has_entropy = false;
  };
  auto forward_backward = [&](int64_t from, int64_t to, bool with_entropy) {
    auto sl = [&](const torch::Tensor& x) { return x.narrow(0, from, to - from); };
    const auto mb_mask = sl(mask);
    auto lp = token_logprobs(model, sl(tokens), {}, with_entropy);
    auto out = grpo_loss(lp.logprobs, sl(logp_old), sl(adv), mb_mask, lc, logp_ref.defined() ? sl(logp_ref) : torch::Tensor());
    out.loss.backward();
    Pass p{out.loss.item<double>(), out.clip_fraction, out.kl, out.ratio_mean, 0, 0, false};
    // The share of the loss's normaliser these rows hold: masked tokens (token), sequences with a
    // token (sequence), rows (constant).
    p.weight = lc.normalization == LossNormalization::kToken      ? mb_mask.sum().item<double>()
               : lc.normalization == LossNormalization::kSequence ? (mb_mask.sum(1) > 0).sum().item<double>()
                                                                  : static_cast<double>(to - from);
    if (with_entropy && lp.entropy.defined()) {
      p.entropy = masked_mean(lp.entropy.detach(), mb_mask).item<double>();
      p.has_entropy = true;
    }
    return p;
  };
  const auto params = model.parameters();
  for (int64_t epoch = 0; epoch < config_.ppo_epochs; ++epoch) {
    for (int64_t m = 0; m < M; ++m) {
      const int64_t from = B * m / M, to = B * (m + 1) / M;
      if (to <= from) continue;
      if (mask.narrow(0, from, to - from).sum().item<double>() == 0) continue;
      const bool with_entropy = epoch == 0;
      // The pooled second moment (optimizer.h) needs the spread between two halves of the batch,
      // split between groups so that the halves are independent samples.
      const int64_t groups = (to - from) / G;
      const int64_t mid = from + (groups / 2) * G;
      Pass pass;
      OptimizerStepInfo info;
      auto has_tokens = [&](int64_t a, int64_t b) { return mask.narrow(0, a, b - a).sum().item<double>() > 0; };
      if (optimizer_.pools_second_moment() && groups >= 2 && (to - from) % G == 0 && has_tokens(from, mid) && has_tokens(mid, to)) {
        const Pass a = forward_backward(from, mid, with_entropy);
        std::vector<torch::Tensor> grad_a;
        for (const auto& p : params) grad_a.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
        optimizer_.zero_grad();
        const Pass b = forward_backward(mid, to, with_entropy);
        const double wa = a.weight / (a.weight + b.weight), wb = 1 - wa;
        std::vector<torch::Tensor> spread(params.size());
        {
          torch::NoGradGuard no_grad;
          for (size_t i = 0; i < params.size(); ++i) {
            auto gb = params[i].grad();
            if (!gb.defined() || !grad_a[i].defined()) continue;
            spread[i] = (grad_a[i] - gb).mul_(std::sqrt(wa * wb));
            gb.mul_(wb).add_(grad_a[i], wa);  // the gradient of the whole batch's loss
          }
        }
        info = optimizer_.step(spread);
        pass = {wa * a.loss + wb * b.loss, wa * a.clip + wb * b.clip, wa * a.kl + wb * b.kl, wa * a.ratio + wb * b.ratio,
                wa * a.entropy + wb * b.entropy, 1, a.has_entropy && b.has_entropy};
      } else {
        pass = forward_backward(from, to, with_entropy);
        info = optimizer_.pools_second_moment() ? optimizer_.step(std::vector<torch::Tensor>(params.size())) : optimizer_.step();
      }
      optimizer_.set_step_count(step_);  // several updates in one trainer step share its lr
      ++n_passes;
      sum_loss += pass.loss;
      sum_clip += pass.clip;
      sum_kl += pass.kl;
      sum_ratio += pass.ratio;
      sum_norm += info.grad_norm;
      if (!info.skipped) ++st.updates;
      if (pass.has_entropy) {
        sum_entropy += pass.entropy;
        ++n_entropy;
      }
    }
  }
  if (n_passes > 0) {
    st.loss = sum_loss / n_passes;
    st.clip_fraction = sum_clip / n_passes;
    st.kl = sum_kl / n_passes;
    st.ratio_mean = sum_ratio / n_passes;
    st.grad_norm = sum_norm / n_passes;
  }
  if (n_entropy > 0) st.entropy = sum_entropy / n_entropy;
  st.seconds = since(t0);
  return st;
}

Result<StepMetrics> GrpoTrainer::step() {
  const auto t0 = Clock::now();
  auto problems = sample_prompts();
  MESHRL_ASSIGN_OR_RETURN(Rollouts r, generate_rollouts(std::move(problems)));
  for (int64_t i = 0; i < static_cast<int64_t>(r.problems.size()); ++i) r.prompt_seeds.push_back(prompt_seed(i));
  MESHRL_RETURN_IF_ERROR(score(r));
  if (on_scored_) on_scored_(r);
  const auto adv = compute_advantages(r);
  StepMetrics m;
  m.train = train_step(r, adv);
  ++step_;

  m.step = step_;
  m.samples = static_cast<int64_t>(r.completions.size());
  m.groups_total = static_cast<int64_t>(r.problems.size());
  m.verifier_failures = r.verifier_failures;
  const auto scored_rewards = r.rewards.masked_select(r.scored);  // [samples - failures]
  m.scored = scored_rewards.numel();
  if (m.scored > 0) {
    m.reward_mean = scored_rewards.mean().item<double>();
    m.reward_std = scored_rewards.std(/*unbiased=*/false).item<double>();
  }
  int64_t correct = 0, format = 0, truncated = 0;
  for (const auto& s : r.scores) {
    correct += s.correct;
    format += s.format_ok;
  }
  for (const auto& c : r.completions) {
    m.completion_tokens += static_cast<int64_t>(c.token_ids.size());
    truncated += c.finish == rollout::FinishReason::kLength;
  }
  const double n = static_cast<double>(std::max<int64_t>(1, m.samples));
  m.correct_rate = correct / n;
  m.format_rate = format / n;
  m.truncated = truncated / n;
  m.completion_len = m.completion_tokens / n;
  m.seconds = since(t0);
  m.tokens_per_s = m.seconds > 0 ? m.completion_tokens / m.seconds : 0;
  return m;
}

EvalOptions GrpoTrainer::eval_options() const {
  EvalOptions o;
  o.n_problems = eval_.n_eval;
  o.pass_k = eval_.pass_k;
  o.n_samples = eval_.n_samples;
  o.temperature = eval_.temperature;
  o.max_new_tokens = eval_.max_new_tokens > 0 ? eval_.max_new_tokens : config_.max_new_tokens;
  o.batch_size = eval_.batch_size;
  o.seed = config_.seed;
  o.stop_ids = policy_.stop_ids;
  return o;
}

Result<EvalResult> GrpoTrainer::evaluate(std::function<void(int64_t, int64_t)> on_progress) {
  EvalOptions o = eval_options();
  o.on_progress = std::move(on_progress);
  return rl::evaluate(*policy_.model, *policy_.tokenizer, *task_, o);
}

nlohmann::json step_metrics_to_json(const StepMetrics& m) {
  nlohmann::json j = {
      {"step", m.step},
      {"reward_mean", m.reward_mean},
      {"reward_std", m.reward_std},
      {"correct_rate", m.correct_rate},
      {"format_rate", m.format_rate},
      {"kl", m.train.kl},
      {"clip_fraction", m.train.clip_fraction},
      {"ratio_mean", m.train.ratio_mean},
      {"entropy", m.train.entropy},
      {"tokens_per_s", m.tokens_per_s},
      {"groups_kept", m.train.groups_kept},
      {"groups_total", m.groups_total},
      {"samples", m.samples},
      {"scored", m.scored},
      {"verifier_failures", tasks::verifier_failures_to_json(m.verifier_failures)},
      {"completion_len", m.completion_len},
      {"truncated", m.truncated},
      {"lr", m.train.lr},
      {"loss", m.train.loss},
      {"grad_norm", m.train.grad_norm},
      {"updates", m.train.updates},
      {"train_seconds", m.train.seconds},
      {"seconds", m.seconds},
  };
  if (m.pass_at_1) j["pass_at_1"] = *m.pass_at_1;
  return j;
}

}  // namespace meshrl::rl

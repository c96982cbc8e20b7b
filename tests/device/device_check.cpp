// meshrl-device-check: the project's own model, generator, log-probs and optimizer on a libtorch
// device (CUDA) against the CPU. Prints one JSON line per check, then
// {"check":"summary","ok":...}; exits 1 when any check failed, 2 on a bad argument.
//
//   env               libtorch version, device, TF32 state
//   forward           `tiny` with seeded weights, the same weights copied to the device; a
//                     left-padded batch with its key mask: max |logit diff| < 1e-3 (fp32, TF32 off)
//   optimizer_state   AdamW on the device: after 2 steps every parameter has moments in state()
//                     (libtorch's state keys, which changed in 2.x); set_state() into a fresh
//                     optimizer over a copy, then one more step on both: the same weights (< 1e-5)
//   train_sft         SFT on 2-digit addition on the device: the mean loss of the last 10 steps
//                     below 0.7 x that of the first 10; seconds per step
//   greedy_generate   greedy decoding (KV cache, left padding, stop string) of the trained weights
//                     on the CPU and on the device: every token sequence equal, except where the
//                     CPU's top two logits at the first difference are within 1e-4 (a near tie that
//                     rounding alone may flip; counted and shown)
//   token_logprobs    log-probs of those sequences (right-padded, as the trainer builds them) on
//                     the device vs the CPU, and the generator's own log-probs vs the device's
//                     full forward: both max |diff| < 1e-3
//   grpo_gradients    the GRPO loss (token_logprobs with autograd, its fused head) on those
//                     sequences, backward: the loss and every parameter's gradient on the device vs
//                     the CPU, max |diff| / max |gradient| < 1e-3
//   timing            per preset (tiny, small): train tokens/s (SFT loss + backward + AdamW step)
//                     and rollout tokens/s (sampled generation), median of 3 after a warm-up;
//                     reported, no threshold
//
//   meshrl-device-check [--device cuda] [--seed 0] [--sft-steps 60] [--threads N]
//                       [--timing tiny,small | none]
// With --device cpu every comparison is the CPU against itself: a smoke test of the program.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/device.h"
#include "model/model_io.h"
#include "rl/grpo_loss.h"
#include "rl/optimizer.h"
#include "rl/sft.h"
#include "rl/task_rollouts.h"
#include "rl/token_logprobs.h"
#include "rollout/generate.h"
#include "rollout/policy.h"
#include "rollout/sampler.h"
#include "tasks/task.h"
#include "tokenizer/char_tokenizer.h"

namespace {

using json = nlohmann::ordered_json;
using namespace meshrl;

constexpr double kTolerance = 1e-3;
constexpr double kNearTie = 1e-4;  // top-two logit margin below which greedy CPU and device may part

struct Options {
  std::string device = "cuda";
  uint64_t seed = 0;
  int64_t sft_steps = 60;
  int threads = 0;  // 0: libtorch's default
  std::vector<std::string> timing_presets = {"tiny", "small"};
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class T>
T value_or_throw(Result<T> r) {
  if (!r.is_ok()) throw std::runtime_error(r.status().message());
  return std::move(r.value());
}

// The same weights in a new model on `device` (copied through the Hugging Face names, the way a
// checkpoint would carry them).
model::Transformer copy_model(model::TransformerImpl& src, const torch::Device& device) {
  model::Transformer m(src.config());
  std::map<std::string, torch::Tensor> tensors;
  for (auto& [name, t] : src.hf_tensors()) tensors.emplace(name, t.detach().to(torch::kCPU));
  const Status st = m->load_hf_tensors(tensors);
  if (!st.is_ok()) throw std::runtime_error(st.message());
  m->to(device);
  return m;
}

std::unique_ptr<tasks::Task> addition_task() {
  tasks::TaskConfig c;
  c.arithmetic.digits = 2;
  c.arithmetic.operators = "+";
  c.arithmetic.pad_operands = false;  // "3+45=" and "37+45=": prompts of several lengths
  return value_or_throw(tasks::make_task(c));
}

std::vector<tasks::Problem> problems_of(const tasks::Task& task, int64_t n, uint64_t seed) {
  std::vector<tasks::Problem> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(task.sample(rollout::mix_seed({seed, static_cast<uint64_t>(i), 0xDE7})));
  return out;
}

// Where two token sequences first differ (-1 when equal).
int64_t first_difference(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

// Logit of the best next token minus the second best, after `seq` (no cache, one row).
double top2_gap(model::TransformerImpl& m, const std::vector<int64_t>& seq) {
  torch::NoGradGuard no_grad;
  const auto tokens = torch::tensor(seq, torch::kInt64).view({1, -1}).to(m.parameters()[0].device());
  const auto top = std::get<0>(m.forward(tokens).select(1, tokens.size(1) - 1).squeeze(0).topk(2)).to(torch::kCPU);
  return (top[0] - top[1]).item<double>();
}

class Checker {
 public:
  explicit Checker(Options o) : o_(std::move(o)) {}

  int run() {
    if (!env()) {
      emit_summary();
      return 1;
    }
    check("forward", [&] { return forward(); });
    check("optimizer_state", [&] { return optimizer_state(); });
    check("train_sft", [&] { return train_sft(); });
    check("greedy_generate", [&] { return greedy_generate(); });
    check("token_logprobs", [&] { return token_logprobs(); });
    check("grpo_gradients", [&] { return grpo_gradients(); });
    for (const auto& preset : o_.timing_presets) check("timing", [&] { return timing(preset); });
    emit_summary();
    return all_ok_ ? 0 : 1;
  }

 private:
  void emit(json j) {
    all_ok_ = all_ok_ && j.value("ok", false);
    std::cout << j.dump() << std::endl;
  }

  void emit_summary() {
    json j;
    j["check"] = "summary";
    j["ok"] = all_ok_;
    j["failed"] = failed_;
    emit(j);
  }

  // Runs one check; an exception is that check's failure, and the next checks still run.
  void check(const std::string& name, const std::function<json()>& fn) {
    json j;
    j["check"] = name;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      json body = fn();
      for (auto it = body.begin(); it != body.end(); ++it) j[it.key()] = it.value();
    } catch (const c10::Error& e) {
      j["ok"] = false;
      j["error"] = std::string(e.what_without_backtrace()).substr(0, 2000);
    } catch (const std::exception& e) {
      j["ok"] = false;
      j["error"] = std::string(e.what()).substr(0, 2000);
    }
    j["seconds"] = seconds_since(t0);
    if (!j.value("ok", false)) failed_.push_back(name);
    emit(j);
  }

  bool env() {
    json j;
    j["check"] = "env";
#ifdef TORCH_VERSION
    j["torch_version"] = TORCH_VERSION;
#endif
    j["device_requested"] = o_.device;
    j["cuda_available"] = torch::cuda::is_available();
    j["cuda_device_count"] = static_cast<int64_t>(torch::cuda::device_count());
    if (o_.threads > 0) model::set_threads(o_.threads);
    j["cpu_threads"] = static_cast<int64_t>(torch::get_num_threads());
    // fp32 comparisons need true fp32 products: TF32 (off by default since 1.12) would cost ~1e-3.
    try {
      at::globalContext().setAllowTF32CuBLAS(false);
      j["allow_tf32_cublas"] = at::globalContext().allowTF32CuBLAS();
    } catch (const std::exception& e) {
      j["allow_tf32_cublas_error"] = std::string(e.what()).substr(0, 500);
    }
    auto dev = model::resolve_device(o_.device);
    if (!dev.is_ok()) {
      j["ok"] = false;
      j["error"] = dev.status().message();
      failed_.push_back("env");
      emit(j);
      return false;
    }
    device_ = torch::Device(dev.value());
    j["device"] = device_.str();
    j["seed"] = o_.seed;
    j["ok"] = true;
    emit(j);
    torch::manual_seed(o_.seed);
    cpu_policy_ = value_or_throw(rollout::load_policy("tiny", "cpu", o_.seed));
    task_ = addition_task();
    return true;
  }

  json forward() {
    auto& cpu = *cpu_policy_.model;
    auto dev = copy_model(cpu, device_);
    torch::NoGradGuard no_grad;
    cpu.eval();
    dev->eval();
    // Left-padded rows of several lengths, as generate() builds its prefill batch.
    const std::vector<int64_t> lengths = {16, 11, 5, 1, 13, 16};
    const int64_t B = static_cast<int64_t>(lengths.size()), T = 16;
    auto gen = at::detail::createCPUGenerator(o_.seed + 11);
    auto tokens = torch::randint(0, 256, {B, T}, gen, torch::kInt64);
    auto key_mask = torch::ones({B, T}, torch::kBool);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t pad = T - lengths[b];
      if (pad > 0) {
        tokens[b].narrow(0, 0, pad).fill_(0);
        key_mask[b].narrow(0, 0, pad).fill_(false);
      }
    }
    const auto lc = cpu.forward(tokens, nullptr, key_mask);
    const auto ld = dev->forward(tokens.to(device_), nullptr, key_mask.to(device_)).to(torch::kCPU);
    const auto diff = (lc - ld).abs().amax(-1);  // [B, T]
    const double max_valid = diff.masked_select(key_mask).max().item<double>();
    const double max_all = diff.max().item<double>();
    const bool finite = torch::isfinite(ld).all().item<bool>();
    json j;
    j["ok"] = finite && max_valid < kTolerance;
    j["preset"] = "tiny";
    j["batch"] = {B, T};
    j["max_abs_diff"] = max_valid;
    j["max_abs_diff_incl_padding"] = max_all;
    j["max_abs_logit"] = lc.abs().max().item<double>();
    j["finite"] = finite;
    j["threshold"] = kTolerance;
    return j;
  }

  json optimizer_state() {
    auto a = copy_model(*cpu_policy_.model, device_);
    auto b = copy_model(*cpu_policy_.model, device_);
    auto gen = at::detail::createCPUGenerator(o_.seed + 3);
    rl::SftBatch batch;
    batch.tokens = torch::randint(0, 256, {4, 24}, gen, torch::kInt64);
    batch.mask = torch::ones({4, 23}, torch::kFloat32);
    rl::OptimizerConfig oc;
    oc.schedule = {1e-3, 0, 10, 0.1};
    oc.weight_decay = 0.1;
    rl::Optimizer opt_a(a->parameters(), oc), opt_b(b->parameters(), oc);
    auto step = [&](model::TransformerImpl& m, rl::Optimizer& opt) {
      rl::sft_loss(m, batch).backward();
      opt.step();
    };
    step(*a, opt_a);
    step(*a, opt_a);
    const rl::OptimizerState st = opt_a.state();
    int64_t present = 0, on_device = 0;
    for (const auto& m : st.params) {
      if (!m) continue;
      ++present;
      // Compare the device type: torch::Device("cuda") has no index, the moments live on cuda:0.
      on_device += m->exp_avg.device().type() == device_.type() && m->step == 2;
    }
    // b: the weights a had after its 2 steps, and a's moments and schedule.
    {
      torch::NoGradGuard no_grad;
      auto pa = a->parameters(), pb = b->parameters();
      for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
    }
    const Status restored = opt_b.set_state(st);
    step(*a, opt_a);
    step(*b, opt_b);
    double diff = 0;
    {
      auto pa = a->parameters(), pb = b->parameters();
      for (size_t i = 0; i < pa.size(); ++i) diff = std::max(diff, (pa[i] - pb[i]).abs().max().item<double>());
    }
    const int64_t n = static_cast<int64_t>(st.params.size());
    json j;
    j["ok"] = present == n && on_device == n && restored.is_ok() && diff < 1e-5;
    j["parameters"] = n;
    j["with_moments"] = present;
    j["moments_on_device_step2"] = on_device;
    j["set_state"] = restored.is_ok() ? std::string("ok") : restored.message();
    j["max_abs_param_diff_after_restore"] = diff;
    return j;
  }

  json train_sft() {
    dev_model_ = copy_model(*cpu_policy_.model, device_);
    rl::SftSection c;
    c.steps = o_.sft_steps;
    c.batch_size = 32;
    c.lr = 2e-3;
    c.warmup_steps = std::min<int64_t>(10, std::max<int64_t>(1, o_.sft_steps / 6));
    c.seed = o_.seed;
    std::vector<double> step_s;
    double last = 0;
    auto r = value_or_throw(rl::run_sft(*dev_model_, *cpu_policy_.tokenizer, *task_, c, [&](const rl::SftProgress& p) {
      step_s.push_back(p.seconds - last);  // run_sft reads each loss back: the clock sees finished work
      last = p.seconds;
    }));
    dev_model_->eval();
    const bool finite = std::all_of(r.losses.begin(), r.losses.end(), [](double l) { return std::isfinite(l); });
    json j;
    j["ok"] = finite && !r.losses.empty() && r.final_loss < 0.7 * r.first_loss;
    j["preset"] = "tiny";
    j["steps"] = static_cast<int64_t>(r.losses.size());
    j["batch_size"] = c.batch_size;
    j["first_loss"] = r.first_loss;  // mean of the first 10 steps
    j["final_loss"] = r.final_loss;  // mean of the last 10 steps
    j["loss_step1"] = r.losses.empty() ? NAN : r.losses.front();
    j["loss_last"] = r.losses.empty() ? NAN : r.losses.back();
    j["rule"] = "final_loss < 0.7 * first_loss";
    j["seconds_per_step_mean"] = r.losses.empty() ? NAN : r.seconds / static_cast<double>(r.losses.size());
    if (step_s.size() > 1) j["seconds_per_step_median_after_first"] = median({step_s.begin() + 1, step_s.end()});
    j["tokens"] = r.tokens;
    return j;
  }

  // The weights trained on the device (or the seeded ones when training failed), on both sides.
  void ensure_trained_pair() {
    if (!dev_model_) dev_model_ = copy_model(*cpu_policy_.model, device_);
    if (!cpu_trained_) cpu_trained_ = copy_model(*dev_model_, torch::kCPU);
    dev_model_->eval();
    cpu_trained_->eval();
  }

  json greedy_generate() {
    ensure_trained_pair();
    const auto& tok = *cpu_policy_.tokenizer;
    const auto problems = problems_of(*task_, 48, o_.seed + 1);
    prompts_ = value_or_throw(rl::encode_prompts(tok, problems));
    rollout::GenerateConfig g;
    g.max_new_tokens = 8;
    g.sampling.temperature = 0.0;
    g.stop_token_ids = cpu_policy_.stop_ids;
    g.stop_strings = task_->stop_strings();
    const auto bytes = rollout::token_bytes_fn(tok);
    const auto on_cpu = rollout::generate(*cpu_trained_, prompts_, g, bytes);
    dev_completions_ = rollout::generate(*dev_model_, prompts_, g, bytes);
    int64_t rows_equal = 0, rows_near_tie = 0, tokens = 0, correct = 0;
    json mismatches = json::array();
    for (size_t i = 0; i < prompts_.size(); ++i) {
      const int64_t at = first_difference(on_cpu[i].token_ids, dev_completions_[i].token_ids);
      tokens += static_cast<int64_t>(on_cpu[i].token_ids.size());
      if (at < 0) {
        ++rows_equal;
      } else {
        // The CPU's margin between its top two tokens where the paths part.
        std::vector<int64_t> seq = prompts_[i];
        seq.insert(seq.end(), on_cpu[i].token_ids.begin(), on_cpu[i].token_ids.begin() + at);
        const double gap = top2_gap(*cpu_trained_, seq);
        rows_near_tie += gap < kNearTie;
        if (mismatches.size() < 5)
          mismatches.push_back({{"row", i}, {"position", at}, {"cpu_top2_gap", gap}, {"cpu", on_cpu[i].token_ids},
                                {"device", dev_completions_[i].token_ids}});
      }
      auto s = task_->score(problems[i], rl::text_for_scoring(dev_completions_[i], tok, g.stop_strings));
      if (s.is_ok() && s.value().correct) ++correct;
    }
    const int64_t rows = static_cast<int64_t>(prompts_.size());
    json j;
    j["ok"] = rows_equal + rows_near_tie == rows;
    j["rows"] = rows;
    j["rows_equal"] = rows_equal;
    j["rows_near_tie"] = rows_near_tie;
    j["cpu_tokens"] = tokens;
    j["max_new_tokens"] = g.max_new_tokens;
    j["device_correct"] = correct;  // how far 60 SFT steps got (not checked)
    if (!mismatches.empty()) j["mismatches"] = mismatches;
    return j;
  }

  // prompt + completion, right-padded with 0, as the trainer builds its loss batch.
  struct Sequences {
    torch::Tensor tokens;     // [B, T] int64
    torch::Tensor mask;       // [B, T-1] float32: 1 where position t predicts a completion token
    torch::Tensor behaviour;  // [B, T-1] float32: the generator's log-prob of that token, else 0
  };

  Sequences sequences() const {
    if (dev_completions_.empty()) throw std::runtime_error("no completions (greedy_generate failed)");
    const int64_t B = static_cast<int64_t>(prompts_.size());
    int64_t T = 2;
    for (int64_t b = 0; b < B; ++b)
      T = std::max<int64_t>(T, static_cast<int64_t>(prompts_[b].size() + dev_completions_[b].token_ids.size()));
    auto tokens = torch::zeros({B, T}, torch::kInt64);
    auto mask = torch::zeros({B, T - 1}, torch::kFloat32);
    auto behaviour = torch::zeros({B, T - 1}, torch::kFloat32);
    auto ta = tokens.accessor<int64_t, 2>();
    auto ma = mask.accessor<float, 2>();
    auto ba = behaviour.accessor<float, 2>();
    for (int64_t b = 0; b < B; ++b) {
      const auto& p = prompts_[b];
      const auto& c = dev_completions_[b];
      const int64_t P = static_cast<int64_t>(p.size());
      for (int64_t t = 0; t < P; ++t) ta[b][t] = p[t];
      for (size_t k = 0; k < c.token_ids.size(); ++k) {
        ta[b][P + k] = c.token_ids[k];
        ma[b][P + k - 1] = 1.0f;
        ba[b][P + k - 1] = c.logprobs[k];
      }
    }
    return {tokens, mask, behaviour};
  }

  json token_logprobs() {
    ensure_trained_pair();
    const auto [tokens, mask, behaviour] = sequences();
    const int64_t B = tokens.size(0);
    torch::NoGradGuard no_grad;
    const auto lc = rl::token_logprobs(*cpu_trained_, tokens).logprobs;
    const auto ld = rl::token_logprobs(*dev_model_, tokens.to(device_)).logprobs.to(torch::kCPU);
    const auto on = mask > 0;
    const double diff = (lc - ld).abs().masked_select(on).max().item<double>();
    const double behaviour_diff = (behaviour - ld).abs().masked_select(on).max().item<double>();
    const bool finite = torch::isfinite(ld.masked_select(on)).all().item<bool>();
    json j;
    j["ok"] = finite && diff < kTolerance && behaviour_diff < kTolerance;
    j["rows"] = B;
    j["scored_tokens"] = static_cast<int64_t>(mask.sum().item<double>());
    j["max_abs_diff_device_vs_cpu"] = diff;
    j["max_abs_diff_generator_vs_forward"] = behaviour_diff;  // KV-cache decode vs full forward, on the device
    j["min_logprob"] = ld.masked_select(on).min().item<double>();
    j["threshold"] = kTolerance;
    return j;
  }

  json grpo_gradients() {
    ensure_trained_pair();
    const auto seq = sequences();
    const int64_t B = seq.tokens.size(0);
    auto adv = torch::empty({B}, torch::kFloat32);
    auto adv_a = adv.accessor<float, 1>();
    for (int64_t b = 0; b < B; ++b) adv_a[b] = b % 2 ? 0.5f : -1.0f;
    rl::GrpoLossConfig lc;  // defaults: token-level normalisation, DAPO clip
    auto run = [&](model::TransformerImpl& m) {
      const auto d = m.parameters()[0].device();
      m.zero_grad();
      m.train();
      const auto lp = rl::token_logprobs(m, seq.tokens.to(d)).logprobs;
      const auto out = rl::grpo_loss(lp, seq.behaviour.to(d), adv.to(d), seq.mask.to(d), lc);
      out.loss.backward();
      std::vector<torch::Tensor> grads;
      for (const auto& p : m.parameters())  // a copy: zero_grad() below would zero a CPU gradient in place
        grads.push_back(p.grad().defined() ? p.grad().detach().to(torch::kCPU).clone() : torch::Tensor());
      m.zero_grad();
      m.eval();
      return std::make_pair(out.loss.item<double>(), grads);
    };
    const auto [loss_c, grads_c] = run(*cpu_trained_);
    const auto [loss_d, grads_d] = run(*dev_model_);
    double diff = 0, scale = 0;
    int64_t missing = 0;
    for (size_t i = 0; i < grads_c.size(); ++i) {
      if (!grads_c[i].defined() || !grads_d[i].defined()) {
        missing += grads_c[i].defined() != grads_d[i].defined();
        continue;
      }
      diff = std::max(diff, (grads_c[i] - grads_d[i]).abs().max().item<double>());
      scale = std::max(scale, grads_c[i].abs().max().item<double>());
    }
    const double rel = scale > 0 ? diff / scale : (diff > 0 ? INFINITY : 0.0);
    json j;
    j["ok"] = std::isfinite(loss_d) && missing == 0 && scale > 0 && rel < kTolerance &&
              std::abs(loss_c - loss_d) < kTolerance;
    j["loss_cpu"] = loss_c;
    j["loss_device"] = loss_d;
    j["max_abs_grad_diff"] = diff;
    j["max_abs_grad"] = scale;
    j["relative_grad_diff"] = rel;
    j["parameters_grad_defined_on_one_side_only"] = missing;
    j["threshold"] = kTolerance;
    return j;
  }

  json timing(const std::string& preset) {
    const bool gpu = device_.is_cuda();
    // CPU sizes keep the smoke test short; they are no benchmark.
    const int64_t train_b = gpu ? 64 : 8, train_t = gpu ? 128 : 64;
    const int64_t roll_b = gpu ? 256 : 8, roll_n = gpu ? 64 : 32;
    auto m = value_or_throw(model::load_transformer(preset, device_.str(), o_.seed));
    const auto tok = value_or_throw(tokenizer::make_char_tokenizer(static_cast<int32_t>(m->config().n_vocab)));

    // Train: the SFT loss on random tokens (every position scored), backward, one AdamW step.
    auto gen = at::detail::createCPUGenerator(o_.seed + 5);
    rl::SftBatch batch;
    batch.tokens = torch::randint(0, 256, {train_b, train_t}, gen, torch::kInt64);
    batch.mask = torch::ones({train_b, train_t - 1}, torch::kFloat32);
    rl::OptimizerConfig oc;
    oc.schedule = {1e-4, 0, 1000, 0.1};
    rl::Optimizer opt(m->parameters(), oc);
    m->train();
    double last_loss = NAN;
    auto train_step = [&] {
      auto loss = rl::sft_loss(*m, batch);
      loss.backward();
      opt.step();
      last_loss = loss.item<double>();
      sync(device_);
    };
    // One warm-up (allocator, cuBLAS handles, kernel selection), then 3 timed runs.
    auto time_three = [&](const std::function<void()>& run) {
      run();
      std::vector<double> s;
      for (int i = 0; i < 3; ++i) {
        sync(device_);
        const auto t0 = std::chrono::steady_clock::now();
        run();
        s.push_back(seconds_since(t0));
      }
      return s;
    };
    const std::vector<double> train_s = time_three(train_step);
    const double train_med = median(train_s);

    // Rollout: sampled generation, no stop, so every row makes roll_n tokens.
    m->eval();
    const auto prompts = value_or_throw(rl::encode_prompts(*tok, problems_of(*task_, roll_b, o_.seed + 2)));
    rollout::GenerateConfig g;
    g.max_new_tokens = roll_n;
    g.sampling.temperature = 1.0;
    g.seed = o_.seed;
    const auto bytes = rollout::token_bytes_fn(*tok);
    int64_t made = 0;
    auto roll = [&] {
      auto out = rollout::generate(*m, prompts, g, bytes);
      sync(device_);
      made = 0;
      for (const auto& c : out) made += static_cast<int64_t>(c.token_ids.size());
    };
    const std::vector<double> roll_s = time_three(roll);
    const double roll_med = median(roll_s);

    json j;
    j["ok"] = std::isfinite(last_loss);
    j["preset"] = preset;
    j["params"] = m->n_params();
    j["train_batch"] = {train_b, train_t};
    j["train_step_s_median"] = train_med;
    j["train_step_s"] = train_s;
    j["train_tokens_per_s"] = static_cast<double>(train_b * train_t) / train_med;
    j["rollout_rows"] = roll_b;
    j["rollout_new_tokens"] = roll_n;
    j["rollout_s_median"] = roll_med;
    j["rollout_s"] = roll_s;
    j["rollout_tokens_per_s"] = static_cast<double>(made) / roll_med;
    return j;
  }

  Options o_;
  torch::Device device_{torch::kCPU};
  bool all_ok_ = true;
  std::vector<std::string> failed_;
  rollout::Policy cpu_policy_;
  std::unique_ptr<tasks::Task> task_;
  model::Transformer dev_model_{nullptr};
  model::Transformer cpu_trained_{nullptr};
  std::vector<std::vector<int64_t>> prompts_;
  std::vector<rollout::Completion> dev_completions_;
};

int usage(const std::string& why) {
  std::cerr << "meshrl-device-check: " << why << "\n"
            << "usage: meshrl-device-check [--device cuda] [--seed 0] [--sft-steps 60] [--threads N] "
               "[--timing tiny,small|none]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage("checks a libtorch device against the CPU");
      return 0;
    }
    if (i + 1 >= argc) return usage("missing value after " + a);
    const std::string v = argv[++i];
    try {
      if (a == "--device") o.device = v;
      else if (a == "--seed") o.seed = std::stoull(v);
      else if (a == "--sft-steps") o.sft_steps = std::stoll(v);
      else if (a == "--threads") o.threads = std::stoi(v);
      else if (a == "--timing") {
        o.timing_presets.clear();
        std::stringstream ss(v);
        for (std::string p; std::getline(ss, p, ',');)
          if (!p.empty() && p != "none") o.timing_presets.push_back(p);
      } else return usage("unknown option " + a);
    } catch (const std::exception&) {
      return usage("bad value '" + v + "' for " + a);
    }
  }
  if (o.sft_steps < 1) return usage("--sft-steps must be >= 1");
  try {
    return Checker(o).run();
  } catch (const std::exception& e) {
    // Only the setup outside a check (loading the CPU policy or the task) gets here.
    json j;
    j["check"] = "summary";
    j["ok"] = false;
    j["error"] = std::string(e.what()).substr(0, 2000);
    std::cout << j.dump() << std::endl;
    return 1;
  }
}

// The single-node run recipe. See train_run.h.
#include "rl/train_run.h"

#include <chrono>
#include <cstdio>

#include "core/file_io.h"
#include "model/device.h"
#include "model/lora_io.h"
#include "rl/lora_setup.h"
#include "rl/metrics_log.h"
#include "rl/policy_folder.h"
#include "rl/warm_start.h"
#include "rollout/policy.h"

namespace meshrl::rl {

namespace fs = std::filesystem;

namespace {
std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * x);
  return b;
}
}  // namespace

Result<TrainRunSummary> run_training(const RunConfig& c, const fs::path& run_dir, const TrainRunCallbacks& cb) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = [&](const std::string& s) {
    if (cb.log) cb.log(s);
  };
  if (fs::exists(run_dir / "metrics.jsonl") || fs::exists(run_dir / "summary.json"))
    return invalid_argument("[train] " + run_dir.string() + " already holds a run; choose another --run-dir");
  std::error_code ec;
  fs::create_directories(run_dir / "checkpoints", ec);
  if (ec) return io_error("[train] cannot create " + run_dir.string() + ": " + ec.message());
  MESHRL_RETURN_IF_ERROR(write_file_atomic(run_dir / "config.toml", run_config_to_toml(c)));

  model::set_threads(static_cast<int>(c.model.threads));
  MESHRL_ASSIGN_OR_RETURN(std::string device, model::resolve_device(c.model.device));
  MESHRL_ASSIGN_OR_RETURN(std::unique_ptr<tasks::Task> task_owned, tasks::make_task(c.task));
  std::shared_ptr<const tasks::Task> task(std::move(task_owned));

  MESHRL_ASSIGN_OR_RETURN(WarmStart warm, ensure_warm_start(c, cb.on_sft_step));
  if (warm.trained)
    log("sft: " + summarize(warm.sft) + "; saved " + warm.policy_spec);
  else if (warm.cached)
    log("sft: reusing cached warm start " + warm.policy_spec);
  MESHRL_ASSIGN_OR_RETURN(rollout::Policy policy, rollout::load_policy(warm.policy_spec, device, c.model.weight_seed));
  // [lora]: adapters on the warm start, which stays frozen; checkpoints then also hold DIR/adapter.
  MESHRL_ASSIGN_OR_RETURN(const bool adapters, setup_lora(c.lora, *policy.model, "run config"));
  if (adapters) {
    int64_t trained = 0;
    for (const auto& p : policy.model->parameters())
      if (p.requires_grad()) trained += p.numel();
    log("lora: r = " + std::to_string(policy.model->lora()->config().rank) + ", training " + std::to_string(trained) +
        " adapter values (B) on a frozen base");
  }
  GrpoTrainer trainer(std::move(policy), task, c.grpo, c.eval);

  MESHRL_ASSIGN_OR_RETURN(MetricsLog metrics, MetricsLog::open(run_dir / "metrics.jsonl"));
  MESHRL_ASSIGN_OR_RETURN(EvalResult before, trainer.evaluate(cb.on_eval_progress));
  log("eval before: pass@1 " + pct(before.pass_at_1) + " on " + std::to_string(before.n_problems) + " held-out problems" +
      (before.n_samples > 0 ? ", pass@" + std::to_string(before.k) + " " + pct(before.pass_at_k) : ""));
  MESHRL_RETURN_IF_ERROR(metrics.write({{"step", 0}, {"pass_at_1", before.pass_at_1}, {"eval", eval_result_to_json(before)}}));

  auto save_checkpoint = [&](int64_t step) -> Result<fs::path> {
    const fs::path dir = run_dir / "checkpoints" / ("step-" + std::to_string(step));
    MESHRL_RETURN_IF_ERROR(save_policy_folder(dir, trainer.policy().model, *trainer.policy().tokenizer, warm.policy_spec));
    if (adapters) MESHRL_RETURN_IF_ERROR(model::save_adapter(dir / "adapter", *trainer.policy().model, warm.policy_spec));
    return dir;
  };

  int64_t samples = 0;
  fs::path last_checkpoint;
  for (int64_t s = 0; s < c.grpo.steps; ++s) {
    MESHRL_ASSIGN_OR_RETURN(StepMetrics m, trainer.step());
    samples += m.samples;
    const bool last = m.step == c.grpo.steps;
    if (c.eval.every_steps > 0 && m.step % c.eval.every_steps == 0 && !last) {
      MESHRL_ASSIGN_OR_RETURN(EvalResult e, trainer.evaluate(cb.on_eval_progress));
      m.pass_at_1 = e.pass_at_1;
    }
    if (c.checkpoint.every_steps > 0 && m.step % c.checkpoint.every_steps == 0 && !last) {
      MESHRL_ASSIGN_OR_RETURN(last_checkpoint, save_checkpoint(m.step));
    }
    if (last) {
      // The final eval belongs to the last step's line so the curve ends where the summary does.
      MESHRL_ASSIGN_OR_RETURN(EvalResult e, trainer.evaluate(cb.on_eval_progress));
      m.pass_at_1 = e.pass_at_1;
    }
    MESHRL_RETURN_IF_ERROR(metrics.write(step_metrics_to_json(m)));
    if (cb.on_step) cb.on_step(m);
  }
  MESHRL_ASSIGN_OR_RETURN(last_checkpoint, save_checkpoint(trainer.step_count()));
  MESHRL_ASSIGN_OR_RETURN(EvalResult after, trainer.evaluate(cb.on_eval_progress));
  log("eval after: pass@1 " + pct(after.pass_at_1) +
      (after.n_samples > 0 ? ", pass@" + std::to_string(after.k) + " " + pct(after.pass_at_k) : "") +
      " (before " + pct(before.pass_at_1) + ")");

  TrainRunSummary sum;
  sum.pass_at_1_before = before.pass_at_1;
  sum.pass_at_1_after = after.pass_at_1;
  sum.steps = trainer.step_count();
  sum.samples = samples;
  sum.final_checkpoint = last_checkpoint;
  sum.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sum.json = {
      {"format", "meshrl-run/1"},
      {"pass_at_1_before", sum.pass_at_1_before},
      {"pass_at_1_after", sum.pass_at_1_after},
      {"eval_before", eval_result_to_json(before)},
      {"eval_after", eval_result_to_json(after)},
      {"steps", sum.steps},
      {"samples", sum.samples},
      {"wall_seconds", sum.wall_seconds},
      {"seed", c.grpo.seed},
      {"task", task->name()},
      {"warm_start", {{"policy", warm.policy_spec}, {"trained", warm.trained}, {"cached", warm.cached}}},
      {"final_checkpoint", last_checkpoint.string()},
      {"config", run_config_to_json(c)},
  };
  if (warm.trained)
    sum.json["warm_start"]["sft"] = {{"steps", static_cast<int64_t>(warm.sft.losses.size())},
                                     {"first_loss", warm.sft.first_loss},
                                     {"final_loss", warm.sft.final_loss},
                                     {"seconds", warm.sft.seconds},
                                     {"reached_target", warm.sft.reached_target}};
  MESHRL_RETURN_IF_ERROR(write_file_atomic(run_dir / "summary.json", sum.json.dump(2) + "\n"));
  return sum;
}

}  // namespace meshrl::rl

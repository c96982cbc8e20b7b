// SFT folders and their cache. See warm_start.h.
#include "rl/warm_start.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "model/config.h"
#include "model/device.h"
#include "rl/policy_folder.h"
#include "rollout/policy.h"
#include "tasks/split.h"

namespace meshrl::rl {

std::string warm_start_key(const RunConfig& c) {
  nlohmann::json task = tasks::task_config_to_json(c.task);
  // The verifier failure budget decides when a run stops, not what the warm start learns: left
  // out of the key, so changing it reuses the cached warm start.
  task.erase("max_failure_rate");
  task.erase("failure_window");
  const nlohmann::json j = {
      {"version", 1},
      {"init", c.model.init},
      {"weight_seed", c.model.weight_seed},
      {"task", task},
      {"sft",
       {{"steps", c.sft.steps},
        {"batch_size", c.sft.batch_size},
        {"lr", c.sft.lr},
        {"warmup_steps", c.sft.warmup_steps},
        {"min_lr_ratio", c.sft.min_lr_ratio},
        {"weight_decay", c.sft.weight_decay},
        {"grad_clip", c.sft.grad_clip},
        {"seed", c.sft.seed}}},
  };
  nlohmann::json k = j;
  if (c.sft.stop_at_pass1 > 0)  // only then: keys of warm starts cached without the stop rule stay valid
    k["sft"]["stop"] = {{"at_pass1", c.sft.stop_at_pass1}, {"every", c.sft.check_every}, {"problems", c.sft.check_problems}};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(tasks::hash_text(k.dump())));
  return buf;
}

Result<SftResult> sft_to_folder(const RunConfig& c, const std::filesystem::path& out,
                                const std::function<void(const SftProgress&)>& on_step) {
  if (c.sft.steps < 1) return invalid_argument("[sft] steps is 0: set [sft] steps (or --sft.steps=N) to train");
  model::set_threads(static_cast<int>(c.model.threads));
  MESHRL_ASSIGN_OR_RETURN(std::string device, model::resolve_device(c.model.device));
  MESHRL_ASSIGN_OR_RETURN(auto task, tasks::make_task(c.task));
  MESHRL_ASSIGN_OR_RETURN(auto policy, rollout::load_policy(c.model.init, device, c.model.weight_seed));
  MESHRL_ASSIGN_OR_RETURN(SftResult r, run_sft(*policy.model, *policy.tokenizer, *task, c.sft, on_step, policy.stop_ids));
  nlohmann::json info = {{"format", "meshrl-sft/1"},   {"key", warm_start_key(c)}, {"steps", static_cast<int64_t>(r.losses.size())},
                         {"first_loss", r.first_loss}, {"final_loss", r.final_loss}, {"seconds", r.seconds},
                         {"tokens", r.tokens},         {"task", tasks::task_config_to_json(c.task)}};
  if (c.sft.stop_at_pass1 > 0) {
    info["stop_at_pass1"] = c.sft.stop_at_pass1;
    info["reached_target"] = r.reached_target;
    info["checks"] = r.checks;  // [[step, greedy accuracy on training problems], ...]
  }
  MESHRL_RETURN_IF_ERROR(
      save_policy_folder(out, policy.model, *policy.tokenizer, c.model.init, {{"meshrl_sft.json", info.dump(2) + "\n"}}));
  return r;
}

Result<WarmStart> ensure_warm_start(const RunConfig& c, const std::function<void(const SftProgress&)>& on_step) {
  WarmStart w;
  if (c.sft.steps < 1 || !model::is_preset_name(c.model.init) || std::filesystem::exists(c.model.init)) {
    w.policy_spec = c.model.init;
    return w;
  }
  const std::filesystem::path dir = std::filesystem::path(c.sft.cache_dir) / ("sft-" + warm_start_key(c));
  w.policy_spec = dir.string();
  // save_policy_folder renames a complete folder (meshrl_sft.json included) into place.
  if (std::filesystem::exists(dir / "meshrl_sft.json")) {
    w.cached = true;
    return w;
  }
  MESHRL_ASSIGN_OR_RETURN(w.sft, sft_to_folder(c, dir, on_step));
  w.trained = true;
  return w;
}

}  // namespace meshrl::rl

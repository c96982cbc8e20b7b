// The run's model on the coordinator. See run_model.h.
#include "mesh/run_model.h"

#include "mesh/content_hash.h"
#include "mesh/policy_params.h"
#include "model/config.h"
#include "model/device.h"
#include "rl/evaluate.h"
#include "rl/lora_setup.h"

namespace meshrl::mesh {

Result<RunModel> load_run_model(const MeshRunConfig& config, const std::string& policy_spec) {
  RunModel m;
  model::set_threads(static_cast<int>(config.run.model.threads));
  // On the CPU whatever [model] device says (that is for the nodes): theta is views into this model,
  // and merging, hashing and encoding work on CPU tensors; a GPU box can coordinate a CPU mesh and
  // the reverse.
  MESHRL_ASSIGN_OR_RETURN(m.policy, rollout::load_policy(policy_spec, "cpu", config.run.model.weight_seed));
  // [lora]: the run's parameter set is then the adapters' B matrices (model/lora.h says why), on a
  // frozen base that nodes never download through the mesh, so they must prove they hold the same.
  if (config.run.lora.rank > 0) {
    m.base_params = trainable_parameters(*m.policy.model);  // views: setup_lora freezes them, nothing changes them
    m.base_weights_hash = content_hash(m.base_params);
  }
  MESHRL_RETURN_IF_ERROR(rl::setup_lora(config.run.lora, *m.policy.model, "run config").status());
  m.theta = trainable_parameters(*m.policy.model);
  m.param_count = m.theta.numel();
  // An update is at most its fp32 encoding plus per-tensor headers; anything larger is refused
  // before it is read into memory.
  m.max_update_bytes = static_cast<uint64_t>(m.param_count) * 4 + 4096 + 2048 * m.theta.size();
  m.limits.max_decoded_bytes = static_cast<uint64_t>(m.param_count) * 4;
  // Room for other tensor counts, so a wrong parameter set (a full delta into an adapter run, or
  // the reverse) reaches the layout check and is refused as "shape"; max_decoded_bytes bounds memory.
  m.limits.max_tensors = static_cast<uint32_t>(m.theta.size()) + 1024;
  m.config_json = model::to_hf_config_json(m.policy.model->config());
  m.config_hash = model_config_hash(m.policy.model->config());
  m.tokenizer_hash = tokenizer_hash(*m.policy.tokenizer);
  MESHRL_ASSIGN_OR_RETURN(std::unique_ptr<tasks::Task> task, tasks::make_task(config.run.task));
  m.task = std::move(task);
  return m;
}

Result<double> evaluate_run_model(RunModel& model, const MeshRunConfig& config, int64_t n_eval,
                                  std::function<void(int64_t, int64_t)> on_progress) {
  rl::EvalOptions o;
  const auto& e = config.run.eval;
  o.n_problems = n_eval > 0 ? n_eval : e.n_eval;
  o.pass_k = 1;
  o.max_new_tokens = e.max_new_tokens > 0 ? e.max_new_tokens : config.run.grpo.max_new_tokens;
  o.batch_size = e.batch_size;
  o.seed = config.run.grpo.seed;
  o.stop_ids = model.policy.stop_ids;
  o.on_progress = std::move(on_progress);
  MESHRL_ASSIGN_OR_RETURN(rl::EvalResult r, rl::evaluate(*model.policy.model, *model.policy.tokenizer, *model.task, o));
  return r.pass_at_1;
}

}  // namespace meshrl::mesh

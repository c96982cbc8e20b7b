// RunConfig: everything one training run needs — model, task, SFT warm start, GRPO, evaluation,
// checkpoints — with the defaults in the structs, and their field tables (core/config_fields.h),
// through which a TOML run file and `--section.key=value` command-line overrides are read, checked
// and written back. Knows nothing about models or tensors: it only produces validated values
// (configs/README.md documents every key).
//
// Errors are one line naming the file, the section and the key (and, for a value of the file,
// its line and column):
//   "run.toml: [grpo] group_size must be >= 2, got 1"
//   "run.toml:2:1: [grpo] unknown key 'group_sise'; see configs/README.md"
//   "run.toml:4:6: [sft] lr must be a number, got string \"fast\""
// Unknown sections, unknown keys, wrong types and out-of-range values are all errors; nothing is
// silently defaulted. The [task] keys are tasks::task_section's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config_fields.h"
#include "core/status.h"
#include "tasks/task_config.h"

namespace meshrl::rl {

struct ModelSection {
  std::string init = "tiny";    // preset name (tiny, small) or a Hugging Face folder
  std::string device = "cpu";   // cpu | cuda | mps | auto
  int64_t threads = 1;          // intra-op threads, 1..1024 (1 when processes share a machine)
  uint64_t weight_seed = 0;     // seed of a preset's random initial weights
};

struct SftSection {
  int64_t steps = 0;            // optimizer steps of the warm start; 0 = no SFT
  int64_t batch_size = 64;      // sequences per step
  double lr = 2e-3;             // peak learning rate, > 0
  int64_t warmup_steps = 20;    // linear warm-up, then cosine down to lr * min_lr_ratio
  double min_lr_ratio = 0.1;    // in [0, 1]
  double weight_decay = 0.0;    // AdamW decoupled decay on matrices, >= 0
  double grad_clip = 1.0;       // max global gradient norm; 0 = off
  uint64_t seed = 0;            // which problems are drawn
  std::string cache_dir = "runs/cache";  // `meshrl train` caches its warm start here (sft-<hash>)
  int64_t log_every = 25;       // progress lines every N steps
  // Stop once greedy accuracy on check_problems *training* problems reaches this (0 = run all
  // steps). A tiny model learns the carry suddenly, at a step that float rounding moves by
  // hundreds (other BLAS kernels, another machine): a warm start defined by its skill, not by
  // its step count, is the same warm start everywhere. `steps` is then the upper bound.
  double stop_at_pass1 = 0.0;   // in [0, 1)
  int64_t check_every = 50;     // steps between checks
  int64_t check_problems = 256; // training problems per check (fixed seeds)
};

struct GrpoSection {
  int64_t steps = 100;            // GRPO steps (one batch of prompts each)
  int64_t prompts_per_step = 16;  // N prompts per step
  int64_t group_size = 8;         // G completions per prompt, >= 2
  int64_t max_new_tokens = 16;    // completion budget; longer completions are truncated
  double temperature = 1.0;       // sampling temperature, > 0
  double lr = 5e-5;               // peak learning rate, > 0
  int64_t warmup_steps = 0;       // linear warm-up steps, then cosine
  double min_lr_ratio = 0.1;      // cosine floor as a share of lr, in [0, 1]
  double weight_decay = 0.0;      // AdamW decoupled decay on matrices, >= 0
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.99;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;         // max global gradient norm; 0 = off
  int64_t adam_pooled_batches = 1;  // K: AdamW's second moment as for K such batches pooled (a mesh
                                    // of K nodes; rl/optimizer.h); 1 = plain AdamW
  bool adam_pooled_clip = false;    // with K > 1: clip by the pooled batch's estimated gradient norm
  int64_t ppo_epochs = 1;         // optimisation passes over one batch of rollouts
  int64_t minibatches = 1;        // optimizer steps per pass (the batch is split this many ways)
  double clip_low = 0.2;          // ratio floor 1 - clip_low, in (0, 1)
  double clip_high = 0.28;        // ratio ceiling 1 + clip_high (DAPO clip-higher), > 0
  double kl_coef = 0.0;           // k3 KL to a frozen copy of the initial model; 0 = no reference
  bool normalize_std = true;      // divide advantages by the group std (false: Dr. GRPO)
  double negative_scale = 1.0;    // multiplies negative advantages, in [0, 1]: 1 = GRPO; 0 = learn
                                  // only from completions that beat their group (rejection-sampling
                                  // fine-tuning); in between damps the noisy push-down of failures
  std::string loss_normalization = "token";  // token | sequence | constant
  bool filter_equal_groups = true;  // drop groups whose G rewards are all equal (no signal)
  bool mask_truncated = false;    // leave completions cut at max_new_tokens out of the loss
  uint64_t seed = 0;              // prompts and sampling of step s derive from (seed, s, ...)
};

struct EvalSection {
  int64_t n_eval = 200;          // held-out problems evaluated (capped by the task's split)
  int64_t every_steps = 0;       // also evaluate every N GRPO steps; 0 = only before and after
  int64_t pass_k = 1;            // k of pass@k (sampled); 1 = greedy pass@1 only
  int64_t n_samples = 0;         // samples per problem for pass@k (n >= k); 0 = 2k
  double temperature = 1.0;      // for the pass@k samples
  int64_t max_new_tokens = 0;    // 0 = grpo.max_new_tokens
  int64_t batch_size = 256;      // sequences per generation batch
};

struct CheckpointSection {
  int64_t every_steps = 0;       // write RUN_DIR/checkpoints/step-N every N steps; 0 = only at the end
};

// LoRA adapters (model/lora.h): with rank > 0 the base is frozen and only the adapters' B
// matrices are trained (and, on the mesh, exchanged). rl/lora_setup.h turns this into adapters.
struct LoraSection {
  int64_t rank = 0;        // adapter rank r; 0 = train the full weights
  double alpha = 16.0;     // the update is scaled by alpha / r, > 0
  std::string targets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";  // comma-separated
  uint64_t seed = 0;       // seed of the frozen A matrices; one per run (every node draws the same A)
  std::string adapter;     // start from this adapter folder instead of fresh adapters ("" = fresh)
};

struct RunConfig {
  ModelSection model;
  tasks::TaskConfig task;
  SftSection sft;
  GrpoSection grpo;
  EvalSection eval;
  CheckpointSection checkpoint;
  LoraSection lora;
};

// The field tables of [model], [task], [sft], [grpo], [eval], [checkpoint] and [lora], in that
// order, pointing into `config` (a mesh run file adds its [mesh] table to these).
std::vector<config::Section> run_sections(RunConfig& config);

// Parses TOML text. `source` names the file in messages ("run.toml"). `overrides` are command-line
// arguments "--section.key=value" (or "section.key=value"), applied after the file, typed by the
// field they set. Validates the result.
Result<RunConfig> parse_run_config(const std::string& toml_text, const std::string& source,
                                   const std::vector<std::string>& overrides = {});

// Reads the file (at most 1 MiB), then as parse_run_config; messages name the file's base name.
Result<RunConfig> load_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});

// Applies overrides to an already valid config and validates again; `source` prefixes messages.
Status apply_overrides(RunConfig& config, const std::vector<std::string>& overrides, const std::string& source);

// A task config from command-line arguments alone, as `meshrl eval` takes them: `kind`, then
// `--task.key=value` (or `--task.key value`) in order, the later winning. Array keys take a JSON
// array (--task.command.argv='["python3", "verify.py"]') or one bare string (a one-element list).
// Anything but a --task.* option is an error; the task is validated once, after all of them.
Result<tasks::TaskConfig> task_config_from_args(const std::string& kind, const std::vector<std::string>& args);

// Range checks; the first problem found is returned as "<source>: [section] key must be ...".
Status validate_run_config(const RunConfig& config, const std::string& source);

// The effective config, every key present: TOML text that parse_run_config reads back to the
// same values, and the same as JSON (for summary.json).
std::string run_config_to_toml(const RunConfig& config);
nlohmann::json run_config_to_json(const RunConfig& config);

}  // namespace meshrl::rl

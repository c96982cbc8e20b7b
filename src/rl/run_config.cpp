// The run file's field tables, their checks, and the run file in and out. See run_config.h.
#include "rl/run_config.h"

#include <sstream>

#include "core/config_overrides.h"
#include "core/file_io.h"
#include "core/toml_document.h"
#include "rl/lora_targets.h"

namespace meshrl::rl {
namespace {

using config::above;
using config::at_least;
using config::closed;
using config::closed_open;
using config::Field;
using config::open;
using config::open_closed;
using config::Section;
using nlohmann::json;

const char* kSeeReadme = "; see configs/README.md";

// Learning rates: documented as "> 0", with an upper bound that only catches typos.
config::Range learning_rate() { return open_closed(0, 10).worded("> 0 (and at most 10)"); }

Section model_section(ModelSection& m) {
  return {"model",
          {
              Field("init", &m.init, "preset name (tiny, small) or a Hugging Face folder"),
              Field("device", &m.device, "cpu | cuda | mps | auto").values({"cpu", "cuda", "mps", "auto"}),
              Field("threads", &m.threads, "intra-op threads (1 when processes share a machine)").in(closed(1, 1024)),
              Field("weight_seed", &m.weight_seed, "seed of a preset's random initial weights"),
          },
          kSeeReadme};
}

Section sft_section(SftSection& s) {
  return {"sft",
          {
              Field("steps", &s.steps, "optimizer steps of the warm start; 0 = no SFT").in(closed(0, 10'000'000)),
              Field("batch_size", &s.batch_size, "sequences per step").in(closed(1, 65536)),
              Field("lr", &s.lr, "peak learning rate").in(learning_rate()),
              Field("warmup_steps", &s.warmup_steps, "linear warm-up, then cosine down to lr * min_lr_ratio").in(at_least(0)),
              Field("min_lr_ratio", &s.min_lr_ratio, "cosine floor as a share of lr").in(closed(0, 1)),
              Field("weight_decay", &s.weight_decay, "AdamW decoupled decay on matrices").in(at_least(0)),
              Field("grad_clip", &s.grad_clip, "max global gradient norm; 0 = off").in(at_least(0).with_note("(0 = off)")),
              Field("seed", &s.seed, "which problems are drawn"),
              Field("cache_dir", &s.cache_dir, "`meshrl train` caches its warm start here (sft-<hash>)"),
              Field("log_every", &s.log_every, "progress lines every N steps").in(at_least(1)),
              Field("stop_at_pass1", &s.stop_at_pass1, "stop once greedy accuracy on training problems reaches this; 0 = off")
                  .in(closed_open(0, 1).with_note("(0 = off)")),
              Field("check_every", &s.check_every, "steps between accuracy checks").in(at_least(1)),
              Field("check_problems", &s.check_problems, "training problems per check").in(closed(1, 100000)),
          },
          kSeeReadme};
}

Section grpo_section(GrpoSection& g) {
  return {"grpo",
          {
              Field("steps", &g.steps, "GRPO steps (one batch of prompts each)").in(closed(0, 10'000'000)),
              Field("prompts_per_step", &g.prompts_per_step, "N prompts per step").in(closed(1, 65536)),
              Field("group_size", &g.group_size, "G completions per prompt, in [2, 4096]"),
              Field("max_new_tokens", &g.max_new_tokens, "completion budget").in(closed(1, 65536)),
              Field("temperature", &g.temperature, "sampling temperature").in(open_closed(0, 100)),
              Field("lr", &g.lr, "peak learning rate").in(learning_rate()),
              Field("warmup_steps", &g.warmup_steps, "linear warm-up steps, then cosine").in(at_least(0)),
              Field("min_lr_ratio", &g.min_lr_ratio, "cosine floor as a share of lr").in(closed(0, 1)),
              Field("weight_decay", &g.weight_decay, "AdamW decoupled decay on matrices").in(at_least(0)),
              Field("adam_beta1", &g.adam_beta1, "AdamW beta1").in(closed_open(0, 1)),
              Field("adam_beta2", &g.adam_beta2, "AdamW beta2").in(closed_open(0, 1)),
              Field("adam_eps", &g.adam_eps, "AdamW epsilon").in(above(0)),
              Field("grad_clip", &g.grad_clip, "max global gradient norm; 0 = off").in(at_least(0).with_note("(0 = off)")),
              Field("adam_pooled_batches", &g.adam_pooled_batches, "K: AdamW's second moment as for K pooled batches").in(closed(1, 1024)),
              Field("adam_pooled_clip", &g.adam_pooled_clip, "with K > 1: clip by the pooled batch's estimated norm"),
              Field("ppo_epochs", &g.ppo_epochs, "optimisation passes over one batch of rollouts").in(closed(1, 100)),
              Field("minibatches", &g.minibatches, "optimizer steps per pass, in [1, prompts_per_step * group_size]"),
              Field("clip_low", &g.clip_low, "ratio floor 1 - clip_low").in(open(0, 1)),
              Field("clip_high", &g.clip_high, "ratio ceiling 1 + clip_high").in(open_closed(0, 100)),
              Field("kl_coef", &g.kl_coef, "k3 KL to a frozen copy of the initial model; 0 = no reference").in(at_least(0)),
              Field("normalize_std", &g.normalize_std, "divide advantages by the group std (false: Dr. GRPO)"),
              Field("negative_scale", &g.negative_scale, "multiplies negative advantages").in(closed(0, 1)),
              Field("loss_normalization", &g.loss_normalization, "token | sequence | constant").values({"token", "sequence", "constant"}),
              Field("filter_equal_groups", &g.filter_equal_groups, "drop groups whose rewards are all equal"),
              Field("mask_truncated", &g.mask_truncated, "leave completions cut at max_new_tokens out of the loss"),
              Field("seed", &g.seed, "prompts and sampling of step s derive from (seed, s, ...)"),
          },
          kSeeReadme};
}

Section eval_section(EvalSection& e) {
  return {"eval",
          {
              Field("n_eval", &e.n_eval, "held-out problems evaluated").in(closed(1, 100000)),
              Field("every_steps", &e.every_steps, "also evaluate every N GRPO steps; 0 = only before and after")
                  .in(at_least(0).with_note("(0 = only before and after)")),
              Field("pass_k", &e.pass_k, "k of pass@k; 1 = greedy pass@1 only").in(closed(1, 1024)),
              Field("n_samples", &e.n_samples, "samples per problem for pass@k; 0 = 2k"),
              Field("temperature", &e.temperature, "for the pass@k samples").in(open_closed(0, 100)),
              Field("max_new_tokens", &e.max_new_tokens, "0 = grpo.max_new_tokens").in(closed(0, 65536).with_note("(0 = grpo.max_new_tokens)")),
              Field("batch_size", &e.batch_size, "sequences per generation batch").in(closed(1, 65536)),
          },
          kSeeReadme};
}

Section checkpoint_section(CheckpointSection& c) {
  return {"checkpoint",
          {
              Field("every_steps", &c.every_steps, "write RUN_DIR/checkpoints/step-N every N steps; 0 = only at the end")
                  .in(at_least(0).with_note("(0 = only at the end)")),
          },
          kSeeReadme};
}

Section lora_section(LoraSection& l) {
  return {"lora",
          {
              Field("rank", &l.rank, "adapter rank r; 0 = train the full weights").in(closed(0, 65536).with_note("(0 = full weights)")),
              Field("alpha", &l.alpha, "the update is scaled by alpha / r").in(open_closed(0, 1e6)),
              Field("targets", &l.targets, "comma-separated module names"),
              Field("seed", &l.seed, "seed of the frozen A matrices"),
              Field("adapter", &l.adapter, "start from this adapter folder (\"\" = fresh adapters)"),
          },
          kSeeReadme};
}

Status check(bool ok, const config::Scope& scope, const char* key, const std::string& what, const std::string& got) {
  if (ok) return Status::ok();
  return invalid_argument(scope.name(key) + " must be " + what + ", got " + got);
}

}  // namespace

std::vector<Section> run_sections(RunConfig& c) {
  Section task = tasks::task_section(c.task);
  task.unknown_hint = "; see src/tasks/task_config.h";
  return {model_section(c.model), std::move(task), sft_section(c.sft), grpo_section(c.grpo),
          eval_section(c.eval),   checkpoint_section(c.checkpoint), lora_section(c.lora)};
}

Status validate_run_config(const RunConfig& cfg, const std::string& source) {
  RunConfig c = cfg;  // the tables need mutable pointers; checking a copy keeps `cfg` const
  for (const Section& s : run_sections(c))
    if (s.name != "task") MESHRL_RETURN_IF_ERROR(config::check_fields(s, config::Scope{source, s.name}));
  // What a range cannot say: relations between keys, and non-empty strings.
  const config::Scope model{source, "model"}, sft{source, "sft"}, grpo{source, "grpo"}, eval{source, "eval"};
  if (c.model.init.empty()) return invalid_argument(model.name("init") + " must name a preset (tiny, small) or a model folder");
  if (c.sft.cache_dir.empty()) return invalid_argument(sft.name("cache_dir") + " must not be empty");
  const GrpoSection& g = c.grpo;
  MESHRL_RETURN_IF_ERROR(check(g.group_size >= 2, grpo, "group_size", ">= 2", std::to_string(g.group_size)));
  MESHRL_RETURN_IF_ERROR(check(g.group_size <= 4096, grpo, "group_size", "<= 4096", std::to_string(g.group_size)));
  MESHRL_RETURN_IF_ERROR(check(!g.adam_pooled_clip || g.adam_pooled_batches > 1, grpo, "adam_pooled_clip",
                               "false unless adam_pooled_batches > 1 (it clips by the pooled batch's norm)", "true"));
  const int64_t rows = g.prompts_per_step * g.group_size;
  MESHRL_RETURN_IF_ERROR(check(g.minibatches >= 1 && g.minibatches <= rows, grpo, "minibatches",
                               "in [1, prompts_per_step * group_size = " + std::to_string(rows) + "]", std::to_string(g.minibatches)));
  const EvalSection& e = c.eval;
  MESHRL_RETURN_IF_ERROR(check(e.n_samples == 0 || (e.n_samples >= e.pass_k && e.n_samples <= 4096), eval, "n_samples",
                               "0 (= 2 * pass_k) or in [pass_k, 4096]", std::to_string(e.n_samples)));
  if (auto t = lora_targets_of(c.lora, config::Scope{source, "lora"}.name("targets")); !t.is_ok()) return t.status();
  return tasks::validate_task_config(c.task, config::Scope{source, "task"});
}

Status apply_overrides(RunConfig& c, const std::vector<std::string>& args, const std::string& source) {
  MESHRL_ASSIGN_OR_RETURN(std::vector<config::Override> parsed, config::parse_overrides(args));
  std::vector<Section> sections = run_sections(c);
  MESHRL_RETURN_IF_ERROR(config::apply_overrides(parsed, sections, source));
  return validate_run_config(c, source);
}

Result<tasks::TaskConfig> task_config_from_args(const std::string& kind, const std::vector<std::string>& args) {
  // Only [task] keys: a --grpo.* or a stray word would otherwise be accepted and then ignored.
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool option = a.rfind("--", 0) == 0;
    const bool value_of_previous = !option && i > 0 && args[i - 1].rfind("--task.", 0) == 0 && args[i - 1].find('=') == std::string::npos;
    if (option && a.rfind("--task.", 0) != 0)
      return invalid_argument("command line: unknown option '" + config::clip_text(a) + "'; task settings are --task.key=value");
    if (!option && !value_of_previous)
      return invalid_argument("command line: unexpected argument '" + config::clip_text(a) + "'; task settings are --task.key=value");
  }
  RunConfig c;
  std::vector<std::string> all = {"--task.kind=" + kind};
  all.insert(all.end(), args.begin(), args.end());
  MESHRL_RETURN_IF_ERROR(apply_overrides(c, all, "command line"));
  return c.task;
}

Result<RunConfig> parse_run_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides) {
  RunConfig c;
  std::vector<Section> sections = run_sections(c);
  MESHRL_RETURN_IF_ERROR(config::read_config(text, source, overrides, sections));
  MESHRL_RETURN_IF_ERROR(validate_run_config(c, source));
  return c;
}

Result<RunConfig> load_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  auto text = read_file(path, uint64_t{1} << 20);
  if (!text.is_ok()) return Status(text.status().code(), "[run config] " + text.status().message());
  return parse_run_config(text.value(), path.filename().string(), overrides);
}

nlohmann::json run_config_to_json(const RunConfig& cfg) {
  RunConfig c = cfg;
  json j = json::object();
  for (const Section& s : run_sections(c)) j[s.name] = config::to_json(s);
  return j;
}

std::string run_config_to_toml(const RunConfig& cfg) {
  RunConfig c = cfg;
  toml::table root;
  for (const Section& s : run_sections(c)) root.insert_or_assign(s.name, config::to_toml_table(s));
  std::ostringstream os;
  // Basic strings only: toml++ would write "\n" as a multi-line literal ''''\n'''', whose first
  // newline TOML readers trim, so a stop string would not read back.
  os << "# Effective run config written by meshrl (every key present; see configs/README.md).\n"
     << toml::toml_formatter(root, toml::format_flags::indentation) << "\n";
  return os.str();
}

}  // namespace meshrl::rl

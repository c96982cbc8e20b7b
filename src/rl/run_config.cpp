// Reading, overriding, validating and writing the run file. See run_config.h.
#include "rl/run_config.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <variant>

#include <toml++/toml.h>

#include "core/file_io.h"
#include "rl/config_field.h"
#include "rl/lora_targets.h"

namespace meshrl::rl {
namespace {

using nlohmann::json;

// One typed key of a section. The table below is the single list of keys: parsing, overrides and
// writing the effective config all walk it, so a key cannot be readable but not writable.
struct Field {
  const char* section;
  const char* key;
  FieldRef ref;
};

std::vector<Field> fields_of(RunConfig& c) {
  ModelSection& m = c.model;
  SftSection& s = c.sft;
  GrpoSection& g = c.grpo;
  EvalSection& e = c.eval;
  return {
      {"model", "init", &m.init},
      {"model", "device", &m.device},
      {"model", "threads", &m.threads},
      {"model", "weight_seed", &m.weight_seed},
      {"sft", "steps", &s.steps},
      {"sft", "batch_size", &s.batch_size},
      {"sft", "lr", &s.lr},
      {"sft", "warmup_steps", &s.warmup_steps},
      {"sft", "min_lr_ratio", &s.min_lr_ratio},
      {"sft", "weight_decay", &s.weight_decay},
      {"sft", "grad_clip", &s.grad_clip},
      {"sft", "seed", &s.seed},
      {"sft", "cache_dir", &s.cache_dir},
      {"sft", "log_every", &s.log_every},
      {"sft", "stop_at_pass1", &s.stop_at_pass1},
      {"sft", "check_every", &s.check_every},
      {"sft", "check_problems", &s.check_problems},
      {"grpo", "steps", &g.steps},
      {"grpo", "prompts_per_step", &g.prompts_per_step},
      {"grpo", "group_size", &g.group_size},
      {"grpo", "max_new_tokens", &g.max_new_tokens},
      {"grpo", "temperature", &g.temperature},
      {"grpo", "lr", &g.lr},
      {"grpo", "warmup_steps", &g.warmup_steps},
      {"grpo", "min_lr_ratio", &g.min_lr_ratio},
      {"grpo", "weight_decay", &g.weight_decay},
      {"grpo", "adam_beta1", &g.adam_beta1},
      {"grpo", "adam_beta2", &g.adam_beta2},
      {"grpo", "adam_eps", &g.adam_eps},
      {"grpo", "grad_clip", &g.grad_clip},
      {"grpo", "adam_pooled_batches", &g.adam_pooled_batches},
      {"grpo", "adam_pooled_clip", &g.adam_pooled_clip},
      {"grpo", "ppo_epochs", &g.ppo_epochs},
      {"grpo", "minibatches", &g.minibatches},
      {"grpo", "clip_low", &g.clip_low},
      {"grpo", "clip_high", &g.clip_high},
      {"grpo", "kl_coef", &g.kl_coef},
      {"grpo", "normalize_std", &g.normalize_std},
      {"grpo", "negative_scale", &g.negative_scale},
      {"grpo", "loss_normalization", &g.loss_normalization},
      {"grpo", "filter_equal_groups", &g.filter_equal_groups},
      {"grpo", "mask_truncated", &g.mask_truncated},
      {"grpo", "seed", &g.seed},
      {"eval", "n_eval", &e.n_eval},
      {"eval", "every_steps", &e.every_steps},
      {"eval", "pass_k", &e.pass_k},
      {"eval", "n_samples", &e.n_samples},
      {"eval", "temperature", &e.temperature},
      {"eval", "max_new_tokens", &e.max_new_tokens},
      {"eval", "batch_size", &e.batch_size},
      {"checkpoint", "every_steps", &c.checkpoint.every_steps},
      {"lora", "rank", &c.lora.rank},
      {"lora", "alpha", &c.lora.alpha},
      {"lora", "targets", &c.lora.targets},
      {"lora", "seed", &c.lora.seed},
      {"lora", "adapter", &c.lora.adapter},
  };
}

const std::set<std::string> kSections = {"model", "task", "sft", "grpo", "eval", "checkpoint", "lora"};

std::string where_key(const std::string& source, const std::string& section, const std::string& key) {
  return source + ": [" + section + "] " + key;
}

// Sets one field from a TOML value, checking its type.
Status set_from_toml(const Field& f, const toml::node& n, const std::string& source) {
  return set_field_from_toml(f.ref, n, where_key(source, f.section, f.key));
}

// TOML value -> JSON for the task config (which is defined over JSON). Non-negative integers
// become unsigned so that unsigned task keys (split_seed) accept them.
Result<json> toml_to_json(const toml::node& n, const std::string& where) {
  if (n.is_integer()) {
    const int64_t v = n.as_integer()->get();
    return v >= 0 ? json(static_cast<uint64_t>(v)) : json(v);
  }
  if (n.is_floating_point()) return json(n.as_floating_point()->get());
  if (n.is_boolean()) return json(n.as_boolean()->get());
  if (n.is_string()) return json(n.as_string()->get());
  if (n.is_array()) {
    json a = json::array();
    for (const toml::node& e : *n.as_array()) {
      if (e.is_array() || e.is_table()) return invalid_argument(where + " must not nest arrays or tables in an array");
      MESHRL_ASSIGN_OR_RETURN(json v, toml_to_json(e, where));
      a.push_back(std::move(v));
    }
    return a;
  }
  return invalid_argument(where + " has a " + toml_type_name(n) + " value, which no task key takes");
}

// [task] table -> dotted pairs ("arithmetic.digits" -> 2), as task_config_from_pairs expects.
Status flatten_task(const toml::table& t, const std::string& prefix, const std::string& source,
                    std::vector<std::pair<std::string, json>>& out) {
  for (auto&& [k, v] : t) {
    const std::string key = prefix + std::string(k.str());
    if (v.is_table()) {
      MESHRL_RETURN_IF_ERROR(flatten_task(*v.as_table(), key + ".", source, out));
      continue;
    }
    MESHRL_ASSIGN_OR_RETURN(json j, toml_to_json(v, where_key(source, "task", key)));
    out.emplace_back(key, std::move(j));
  }
  return Status::ok();
}

// One "--task.a.b=value" override into `cur` (the task config as JSON), typed by the value
// already at that path. The task is read back and validated once, after every override: one
// override alone may leave it invalid (kind = "command" needs both jsonl.path and command.argv).
Status apply_task_override(json& cur, const std::string& dotted, const std::string& text, const std::string& source) {
  const std::string where = where_key(source, "task", dotted) + " (command line)";
  json* slot = &cur;
  size_t from = 0;
  while (true) {
    const size_t dot = dotted.find('.', from);
    const std::string part = dotted.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!slot->is_object() || !slot->contains(part))
      return invalid_argument(source + ": [task] unknown key '" + dotted + "' (command line); see src/tasks/task_config.h");
    slot = &(*slot)[part];
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  if (slot->is_object()) return invalid_argument(where + " is a table; set one of its keys");
  json v;
  if (slot->is_boolean()) {
    if (text != "true" && text != "false") return invalid_argument(where + " must be true or false, got '" + clip_text(text) + "'");
    v = text == "true";
  } else if (slot->is_number_unsigned()) {
    uint64_t x{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      return invalid_argument(where + " must be a non-negative integer, got '" + clip_text(text) + "'");
    v = x;
  } else if (slot->is_number_integer()) {
    int64_t x{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      return invalid_argument(where + " must be an integer, got '" + clip_text(text) + "'");
    v = x;
  } else if (slot->is_number()) {
    char* end = nullptr;
    const double x = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x))
      return invalid_argument(where + " must be a finite number, got '" + clip_text(text) + "'");
    v = x;
  } else if (slot->is_array()) {
    // A JSON array of strings, or one bare string meaning a one-element list.
    v = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded() || !v.is_array()) v = json::array({text});
  } else {
    v = text;
  }
  *slot = std::move(v);
  return Status::ok();
}

Status check(bool ok, const std::string& source, const char* section, const char* key, const std::string& what,
             const std::string& got) {
  if (ok) return Status::ok();
  return invalid_argument(where_key(source, section, key) + " must be " + what + ", got " + got);
}
#define MESHRL_CHECK_INT(section, key, v, cond, what) \
  MESHRL_RETURN_IF_ERROR(check((cond), source, section, key, what, std::to_string(v)))
#define MESHRL_CHECK_NUM(section, key, v, cond, what) \
  MESHRL_RETURN_IF_ERROR(check((cond), source, section, key, what, format_double(v)))

}  // namespace

Status validate_run_config(const RunConfig& c, const std::string& source) {
  const ModelSection& m = c.model;
  if (m.init.empty()) return invalid_argument(where_key(source, "model", "init") + " must name a preset (tiny, small) or a model folder");
  static const std::set<std::string> devices = {"cpu", "cuda", "mps", "auto"};
  if (!devices.count(m.device))
    return invalid_argument(where_key(source, "model", "device") + " must be cpu, cuda, mps or auto, got \"" + m.device + "\"");
  MESHRL_CHECK_INT("model", "threads", m.threads, m.threads >= 1 && m.threads <= 1024, "in [1, 1024]");

  const SftSection& s = c.sft;
  MESHRL_CHECK_INT("sft", "steps", s.steps, s.steps >= 0 && s.steps <= 10'000'000, "in [0, 10000000]");
  MESHRL_CHECK_INT("sft", "batch_size", s.batch_size, s.batch_size >= 1 && s.batch_size <= 65536, "in [1, 65536]");
  MESHRL_CHECK_NUM("sft", "lr", s.lr, s.lr > 0 && s.lr <= 10, "> 0 (and at most 10)");
  MESHRL_CHECK_INT("sft", "warmup_steps", s.warmup_steps, s.warmup_steps >= 0, ">= 0");
  MESHRL_CHECK_NUM("sft", "min_lr_ratio", s.min_lr_ratio, s.min_lr_ratio >= 0 && s.min_lr_ratio <= 1, "in [0, 1]");
  MESHRL_CHECK_NUM("sft", "weight_decay", s.weight_decay, s.weight_decay >= 0, ">= 0");
  MESHRL_CHECK_NUM("sft", "grad_clip", s.grad_clip, s.grad_clip >= 0, ">= 0 (0 = off)");
  if (s.cache_dir.empty()) return invalid_argument(where_key(source, "sft", "cache_dir") + " must not be empty");
  MESHRL_CHECK_INT("sft", "log_every", s.log_every, s.log_every >= 1, ">= 1");
  MESHRL_CHECK_NUM("sft", "stop_at_pass1", s.stop_at_pass1, s.stop_at_pass1 >= 0 && s.stop_at_pass1 < 1, "in [0, 1) (0 = off)");
  MESHRL_CHECK_INT("sft", "check_every", s.check_every, s.check_every >= 1, ">= 1");
  MESHRL_CHECK_INT("sft", "check_problems", s.check_problems, s.check_problems >= 1 && s.check_problems <= 100000, "in [1, 100000]");

  const GrpoSection& g = c.grpo;
  MESHRL_CHECK_INT("grpo", "steps", g.steps, g.steps >= 0 && g.steps <= 10'000'000, "in [0, 10000000]");
  MESHRL_CHECK_INT("grpo", "prompts_per_step", g.prompts_per_step, g.prompts_per_step >= 1 && g.prompts_per_step <= 65536, "in [1, 65536]");
  MESHRL_CHECK_INT("grpo", "group_size", g.group_size, g.group_size >= 2, ">= 2");
  MESHRL_CHECK_INT("grpo", "group_size", g.group_size, g.group_size <= 4096, "<= 4096");
  MESHRL_CHECK_INT("grpo", "max_new_tokens", g.max_new_tokens, g.max_new_tokens >= 1 && g.max_new_tokens <= 65536, "in [1, 65536]");
  MESHRL_CHECK_NUM("grpo", "temperature", g.temperature, g.temperature > 0 && g.temperature <= 100, "in (0, 100]");
  MESHRL_CHECK_NUM("grpo", "lr", g.lr, g.lr > 0 && g.lr <= 10, "> 0 (and at most 10)");
  MESHRL_CHECK_INT("grpo", "warmup_steps", g.warmup_steps, g.warmup_steps >= 0, ">= 0");
  MESHRL_CHECK_NUM("grpo", "min_lr_ratio", g.min_lr_ratio, g.min_lr_ratio >= 0 && g.min_lr_ratio <= 1, "in [0, 1]");
  MESHRL_CHECK_NUM("grpo", "weight_decay", g.weight_decay, g.weight_decay >= 0, ">= 0");
  MESHRL_CHECK_NUM("grpo", "adam_beta1", g.adam_beta1, g.adam_beta1 >= 0 && g.adam_beta1 < 1, "in [0, 1)");
  MESHRL_CHECK_NUM("grpo", "adam_beta2", g.adam_beta2, g.adam_beta2 >= 0 && g.adam_beta2 < 1, "in [0, 1)");
  MESHRL_CHECK_NUM("grpo", "adam_eps", g.adam_eps, g.adam_eps > 0, "> 0");
  MESHRL_CHECK_NUM("grpo", "grad_clip", g.grad_clip, g.grad_clip >= 0, ">= 0 (0 = off)");
  MESHRL_CHECK_INT("grpo", "adam_pooled_batches", g.adam_pooled_batches, g.adam_pooled_batches >= 1 && g.adam_pooled_batches <= 1024,
                   "in [1, 1024]");
  MESHRL_RETURN_IF_ERROR(check(!g.adam_pooled_clip || g.adam_pooled_batches > 1, source, "grpo", "adam_pooled_clip",
                               "false unless adam_pooled_batches > 1 (it clips by the pooled batch's norm)", "true"));
  MESHRL_CHECK_INT("grpo", "ppo_epochs", g.ppo_epochs, g.ppo_epochs >= 1 && g.ppo_epochs <= 100, "in [1, 100]");
  const int64_t rows = g.prompts_per_step * g.group_size;
  MESHRL_CHECK_INT("grpo", "minibatches", g.minibatches, g.minibatches >= 1 && g.minibatches <= rows,
                   "in [1, prompts_per_step * group_size = " + std::to_string(rows) + "]");
  MESHRL_CHECK_NUM("grpo", "clip_low", g.clip_low, g.clip_low > 0 && g.clip_low < 1, "in (0, 1)");
  MESHRL_CHECK_NUM("grpo", "clip_high", g.clip_high, g.clip_high > 0 && g.clip_high <= 100, "in (0, 100]");
  MESHRL_CHECK_NUM("grpo", "kl_coef", g.kl_coef, g.kl_coef >= 0, ">= 0");
  MESHRL_CHECK_NUM("grpo", "negative_scale", g.negative_scale, g.negative_scale >= 0 && g.negative_scale <= 1, "in [0, 1]");
  if (g.loss_normalization != "token" && g.loss_normalization != "sequence" && g.loss_normalization != "constant")
    return invalid_argument(where_key(source, "grpo", "loss_normalization") + " must be token, sequence or constant, got \"" +
                            g.loss_normalization + "\"");

  const EvalSection& e = c.eval;
  MESHRL_CHECK_INT("eval", "n_eval", e.n_eval, e.n_eval >= 1 && e.n_eval <= 100000, "in [1, 100000]");
  MESHRL_CHECK_INT("eval", "every_steps", e.every_steps, e.every_steps >= 0, ">= 0 (0 = only before and after)");
  MESHRL_CHECK_INT("eval", "pass_k", e.pass_k, e.pass_k >= 1 && e.pass_k <= 1024, "in [1, 1024]");
  MESHRL_CHECK_INT("eval", "n_samples", e.n_samples, e.n_samples == 0 || (e.n_samples >= e.pass_k && e.n_samples <= 4096),
                   "0 (= 2 * pass_k) or in [pass_k, 4096]");
  MESHRL_CHECK_NUM("eval", "temperature", e.temperature, e.temperature > 0 && e.temperature <= 100, "in (0, 100]");
  MESHRL_CHECK_INT("eval", "max_new_tokens", e.max_new_tokens, e.max_new_tokens >= 0 && e.max_new_tokens <= 65536,
                   "in [0, 65536] (0 = grpo.max_new_tokens)");
  MESHRL_CHECK_INT("eval", "batch_size", e.batch_size, e.batch_size >= 1 && e.batch_size <= 65536, "in [1, 65536]");

  MESHRL_CHECK_INT("checkpoint", "every_steps", c.checkpoint.every_steps, c.checkpoint.every_steps >= 0, ">= 0 (0 = only at the end)");
  MESHRL_CHECK_INT("lora", "rank", c.lora.rank, c.lora.rank >= 0 && c.lora.rank <= 65536, "in [0, 65536] (0 = full weights)");
  MESHRL_CHECK_NUM("lora", "alpha", c.lora.alpha, c.lora.alpha > 0 && c.lora.alpha <= 1e6, "in (0, 1e6]");
  if (auto t = lora_targets_of(c.lora, where_key(source, "lora", "targets")); !t.is_ok()) return t.status();
  return tasks::validate_task_config(c.task, source + ": [task]");
}

Status apply_overrides(RunConfig& c, const std::vector<std::string>& args, const std::string& source) {
  auto fields = fields_of(c);
  // Every argument, values given as a separate argument included (fuzz_run_file found one that
  // came back changed after a TOML round trip).
  for (const std::string& a : args)
    if (!is_valid_utf8(a)) return invalid_argument("command line: an override is not valid UTF-8");
  json task = tasks::task_config_to_json(c.task);
  bool task_changed = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a.rfind("--", 0) == 0) a = a.substr(2);
    std::string key, value;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      key = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      key = a;
      value = args[++i];
    } else {
      return invalid_argument("command line: '" + args[i] + "' is not an override; write --section.key=value");
    }
    const size_t dot = key.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == key.size())
      return invalid_argument("command line: '" + args[i] + "' is not an override; write --section.key=value");
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    if (!kSections.count(section))
      return invalid_argument("command line: unknown section [" + section + "] in '" + args[i] +
                              "'; sections are model, task, sft, grpo, eval, checkpoint, lora");
    if (section == "task") {
      MESHRL_RETURN_IF_ERROR(apply_task_override(task, name, value, source));
      task_changed = true;
      continue;
    }
    const Field* f = nullptr;
    for (const Field& x : fields)
      if (section == x.section && name == x.key) f = &x;
    if (!f) return invalid_argument(source + ": [" + section + "] unknown key '" + name + "' (command line); see configs/README.md");
    MESHRL_RETURN_IF_ERROR(set_field_from_text(f->ref, value, where_key(source, section, name) + " (command line)"));
  }
  if (task_changed) {
    MESHRL_ASSIGN_OR_RETURN(c.task, tasks::task_config_from_json(task, source + ": [task]"));
  }
  return validate_run_config(c, source);
}

Result<tasks::TaskConfig> task_config_from_args(const std::string& kind, const std::vector<std::string>& args) {
  // Only [task] keys: a --grpo.* or a stray word would otherwise be accepted and then ignored.
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool option = a.rfind("--", 0) == 0;
    const bool value_of_previous = !option && i > 0 && args[i - 1].rfind("--task.", 0) == 0 && args[i - 1].find('=') == std::string::npos;
    if (option && a.rfind("--task.", 0) != 0)
      return invalid_argument("command line: unknown option '" + clip_text(a) + "'; task settings are --task.key=value");
    if (!option && !value_of_previous)
      return invalid_argument("command line: unexpected argument '" + clip_text(a) + "'; task settings are --task.key=value");
  }
  RunConfig c;
  std::vector<std::string> all = {"--task.kind=" + kind};
  all.insert(all.end(), args.begin(), args.end());
  MESHRL_RETURN_IF_ERROR(apply_overrides(c, all, "command line"));
  return c.task;
}

Result<RunConfig> parse_run_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return invalid_argument(source + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                            ": " + std::string(e.description()));
  }
  RunConfig c;
  auto fields = fields_of(c);
  std::vector<std::pair<std::string, json>> task_pairs;
  for (auto&& [k, v] : root) {
    const std::string section(k.str());
    if (!kSections.count(section)) {
      if (!v.is_table()) return invalid_argument(source + ": unknown top-level key '" + section + "'; every key belongs in a [section]");
      return invalid_argument(source + ": unknown section [" + section + "]; sections are model, task, sft, grpo, eval, checkpoint, lora");
    }
    if (!v.is_table()) return invalid_argument(source + ": '" + section + "' must be a [section] table, got " + toml_type_name(v));
    if (section == "task") {
      MESHRL_RETURN_IF_ERROR(flatten_task(*v.as_table(), "", source, task_pairs));
      continue;
    }
    for (auto&& [kk, vv] : *v.as_table()) {
      const std::string key(kk.str());
      const Field* f = nullptr;
      for (const Field& x : fields)
        if (section == x.section && key == x.key) f = &x;
      if (!f) return invalid_argument(source + ": [" + section + "] unknown key '" + key + "'; see configs/README.md");
      MESHRL_RETURN_IF_ERROR(set_from_toml(*f, vv, source));
    }
  }
  MESHRL_ASSIGN_OR_RETURN(c.task, tasks::task_config_from_pairs(task_pairs, source + ": [task]"));
  MESHRL_RETURN_IF_ERROR(validate_run_config(c, source));
  if (!overrides.empty()) MESHRL_RETURN_IF_ERROR(apply_overrides(c, overrides, source));
  return c;
}

Result<RunConfig> load_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  auto text = read_file(path, uint64_t{1} << 20);
  if (!text.is_ok()) return Status(text.status().code(), "[run config] " + text.status().message());
  return parse_run_config(text.value(), path.filename().string(), overrides);
}

namespace {
toml::table json_to_toml_table(const json& j);

void insert_json(toml::table& t, const std::string& k, const json& v) {
  if (v.is_object()) t.insert_or_assign(k, json_to_toml_table(v));
  else if (v.is_boolean()) t.insert_or_assign(k, v.get<bool>());
  else if (v.is_number_integer()) t.insert_or_assign(k, static_cast<int64_t>(v.get<int64_t>()));
  else if (v.is_number()) t.insert_or_assign(k, v.get<double>());
  else if (v.is_string()) t.insert_or_assign(k, v.get<std::string>());
  else if (v.is_array()) {
    toml::array a;
    for (const json& e : v) {
      if (e.is_string()) a.push_back(e.get<std::string>());
      else if (e.is_boolean()) a.push_back(e.get<bool>());
      else if (e.is_number_integer()) a.push_back(e.get<int64_t>());
      else if (e.is_number()) a.push_back(e.get<double>());
    }
    t.insert_or_assign(k, std::move(a));
  }
}

toml::table json_to_toml_table(const json& j) {
  toml::table t;
  for (auto it = j.begin(); it != j.end(); ++it) insert_json(t, it.key(), it.value());
  return t;
}
}  // namespace

nlohmann::json run_config_to_json(const RunConfig& config) {
  RunConfig c = config;  // fields_of needs mutable pointers; reading a copy keeps `config` const
  json j = json::object();
  for (const Field& f : fields_of(c)) {
    std::visit([&](auto* p) { j[f.section][f.key] = *p; }, f.ref);
  }
  j["task"] = tasks::task_config_to_json(c.task);
  return j;
}

std::string run_config_to_toml(const RunConfig& config) {
  const json j = run_config_to_json(config);
  toml::table root;
  for (const char* s : {"model", "task", "sft", "grpo", "eval", "checkpoint", "lora"}) root.insert_or_assign(s, json_to_toml_table(j[s]));
  std::ostringstream os;
  // Basic strings only: toml++ would write "\n" as a multi-line literal ''''\n'''', whose first
  // newline TOML readers trim, so a stop string would not read back.
  os << "# Effective run config written by meshrl (every key present; see configs/README.md).\n"
     << toml::toml_formatter(root, toml::format_flags::indentation) << "\n";
  return os.str();
}

}  // namespace meshrl::rl

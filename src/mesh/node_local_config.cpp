// Node-local settings. See node_local_config.h.
#include "mesh/node_local_config.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/config_overrides.h"
#include "core/file_io.h"
#include "core/toml_document.h"
#include "model/config.h"

namespace meshrl::mesh {
namespace {

using nlohmann::json;

// The node-local keys as the overrides name them ("task.jsonl.path"): kNodeLocalKeys without
// --model, which is a flag of its own and no key of the run config.
bool is_node_local(const std::string& dotted) {
  for (std::string_view k : kNodeLocalKeys)
    if (k != "--model" && k.substr(2) == dotted) return true;
  return false;
}

// A value the coordinator sent, quoted for a message: JSON, clipped, never raw bytes.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

Status refuse(const std::string& node, const std::string& what, const std::string& fix) {
  return invalid_argument("[node " + node + "] " + what + "; a node takes programs and paths on its own disk only from its operator: " +
                          fix + " (keys a node sets itself: " + node_local_keys_text() + ")");
}

}  // namespace

std::string node_local_keys_text() {
  std::string s;
  for (std::string_view k : kNodeLocalKeys) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

Status check_node_overrides(const std::vector<std::string>& overrides, const std::string& node) {
  MESHRL_ASSIGN_OR_RETURN(std::vector<config::Override> parsed, config::parse_overrides(overrides));
  for (const config::Override& o : parsed)
    if (!is_node_local(o.dotted()))
      return invalid_argument("[node " + node + "] --" + config::clip_text(o.dotted()) +
                              " is a setting of the run, which every node takes from the coordinator's manifest so that all "
                              "of them train the same run; keys a node sets itself: " + node_local_keys_text() +
                              " (and this machine's --threads, --device, --cache-dir, --state-dir)");
  return Status::ok();
}

Result<MeshRunConfig> node_run_config(const std::string& manifest_toml, const std::vector<std::string>& overrides,
                                      const std::string& node) {
  MESHRL_RETURN_IF_ERROR(check_node_overrides(overrides, node));
  MESHRL_ASSIGN_OR_RETURN(MeshRunConfig c, parse_mesh_run_config(manifest_toml, "manifest", overrides));
  std::set<std::string> own;
  for (const config::Override& o : config::parse_overrides(overrides).value()) own.insert(o.dotted());
  const bool own_argv = own.count("task.command.argv") > 0, own_path = own.count("task.jsonl.path") > 0,
             own_adapter = own.count("lora.adapter") > 0;
  tasks::TaskConfig& t = c.run.task;
  // Checked in this order so the first refusal names the most dangerous ask: a program to run.
  if (t.kind == "command" && !own_argv)
    return refuse(node, "the run's task is kind = \"command\" with the coordinator's verifier argv " + shown(t.command.argv) +
                            ", which this node does not run",
                  "pass --task.command.argv='[\"python3\", \"verify.py\"]' (a JSON array) naming this machine's verifier, "
                  "or set task.command.argv in --node-file");
  if ((t.kind == "jsonl" || t.kind == "command") && !own_path)
    return refuse(node, "the run's task is kind = \"" + t.kind + "\" and its prompts file is the coordinator's path " +
                            shown(t.jsonl.path) + ", which this node does not open",
                  "pass --task.jsonl.path=FILE naming this machine's copy, or set task.jsonl.path in --node-file");
  if (!c.run.lora.adapter.empty() && !own_adapter)
    return refuse(node, "the run starts from the [lora] adapter folder " + shown(c.run.lora.adapter) +
                            " on the coordinator's disk, which this node does not open",
                  "pass --lora.adapter=DIR naming this machine's copy, or set lora.adapter in --node-file");
  // What the node did not set keeps its default, whatever the manifest said: nothing it names is
  // ever run or opened, even by a task kind that does not read it today.
  const tasks::TaskConfig defaults;
  if (!own_argv) t.command.argv = defaults.command.argv;
  if (!own_path) t.jsonl.path = defaults.jsonl.path;
  if (!own_adapter) c.run.lora.adapter.clear();
  return c;
}

Result<std::string> node_model_spec(const std::string& manifest_spec, const std::string& local_model, const std::string& node) {
  if (!local_model.empty()) return local_model;
  if (model::is_preset_name(manifest_spec)) return manifest_spec;
  return refuse(node, "the run's model is the folder " + shown(manifest_spec) + " on the coordinator's disk, which this node does not open",
                "pass --model DIR naming this machine's copy of the run's model (its config and tokenizer are checked against "
                "the manifest's hashes), or set model in --node-file");
}

Result<NodeLocalConfig> load_node_file(const std::filesystem::path& path) {
  const std::string source = path.filename().string();
  auto text = read_file(path, uint64_t{1} << 20);
  if (!text.is_ok()) return Status(text.status().code(), "[node file] " + text.status().message());
  MESHRL_ASSIGN_OR_RETURN(toml::table root, config::parse_toml(text.value(), source));
  NodeLocalConfig out;
  std::vector<std::string> argv;
  std::string jsonl_path, adapter;
  config::Section keys{"",
                       {
                           config::Field("model", &out.model, "model folder on this machine (--model)"),
                           config::Field("task.command.argv", &argv, "this machine's verifier program (--task.command.argv)"),
                           config::Field("task.jsonl.path", &jsonl_path, "this machine's prompts file (--task.jsonl.path)"),
                           config::Field("lora.adapter", &adapter, "this machine's start adapter folder (--lora.adapter)"),
                       },
                       "; a node file holds only model, task.command.argv, task.jsonl.path and lora.adapter (the rest of the "
                       "run config comes from the coordinator)"};
  const config::Scope scope{source, ""};
  std::vector<std::string> given;
  MESHRL_RETURN_IF_ERROR(config::read_section(root, keys, scope, &given));
  // In the order of the table, so the overrides do not depend on the order of the file.
  for (const config::Field& f : keys.fields) {
    if (std::find(given.begin(), given.end(), f.key) == given.end()) continue;
    if (f.key == "task.command.argv") {
      if (argv.empty() || argv[0].empty())
        return invalid_argument(scope.name(f.key) + " must be a non-empty array of strings, e.g. [\"python3\", \"verify.py\"]");
      out.overrides.push_back("--task.command.argv=" + json(argv).dump());
      continue;
    }
    const std::string& value = *std::get<std::string*>(f.ref);
    if (value.empty()) return invalid_argument(scope.name(f.key) + " must be a non-empty string");
    if (f.key != "model") out.overrides.push_back("--" + f.key + "=" + value);
  }
  return out;
}

NodeLocalConfig merge_node_local(const NodeLocalConfig& file, const NodeLocalConfig& command_line) {
  NodeLocalConfig out = file;
  if (!command_line.model.empty()) out.model = command_line.model;
  out.overrides.insert(out.overrides.end(), command_line.overrides.begin(), command_line.overrides.end());
  return out;
}

}  // namespace meshrl::mesh

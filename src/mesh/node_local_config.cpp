// Node-local settings. See node_local_config.h.
#include "mesh/node_local_config.h"

#include <set>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "core/file_io.h"
#include "model/config.h"
#include "rl/config_field.h"

namespace meshrl::mesh {
namespace {

using nlohmann::json;

// The dotted keys ("task.jsonl.path") that the node's own overrides set, read as apply_overrides
// reads them: "--key=value", or "--key" followed by a value that does not start with "--".
std::set<std::string> keys_set_by(const std::vector<std::string>& overrides) {
  std::set<std::string> keys;
  for (size_t i = 0; i < overrides.size(); ++i) {
    std::string a = overrides[i];
    if (a.rfind("--", 0) == 0) a = a.substr(2);
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      keys.insert(a.substr(0, eq));
    } else {
      keys.insert(a);
      if (i + 1 < overrides.size() && overrides[i + 1].rfind("--", 0) != 0) ++i;
    }
  }
  return keys;
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

Result<MeshRunConfig> node_run_config(const std::string& manifest_toml, const std::vector<std::string>& overrides,
                                      const std::string& node) {
  MESHRL_ASSIGN_OR_RETURN(MeshRunConfig c, parse_mesh_run_config(manifest_toml, "manifest", overrides));
  const std::set<std::string> own = keys_set_by(overrides);
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
  toml::table root;
  try {
    root = toml::parse(text.value(), source);
  } catch (const toml::parse_error& e) {
    return invalid_argument(source + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                            ": " + std::string(e.description()));
  }
  const std::string allowed = " a node file holds only model, task.command.argv, task.jsonl.path and lora.adapter";
  auto string_of = [&](const toml::node& n, const std::string& key) -> Result<std::string> {
    if (!n.is_string() || n.as_string()->get().empty())
      return invalid_argument(source + ": " + key + " must be a non-empty string, got " + rl::toml_type_name(n) + " " + rl::toml_shown(n));
    return n.as_string()->get();
  };
  NodeLocalConfig out;
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    if (key == "model") {
      MESHRL_ASSIGN_OR_RETURN(out.model, string_of(v, "model"));
    } else if (key == "task" && v.is_table()) {
      for (auto&& [tk, tv] : *v.as_table()) {
        const std::string sub(tk.str());
        if (sub == "jsonl" && tv.is_table()) {
          for (auto&& [jk, jv] : *tv.as_table()) {
            if (jk.str() != "path") return invalid_argument(source + ": unknown key 'task.jsonl." + std::string(jk.str()) + "';" + allowed);
            MESHRL_ASSIGN_OR_RETURN(std::string p, string_of(jv, "task.jsonl.path"));
            out.overrides.push_back("--task.jsonl.path=" + p);
          }
        } else if (sub == "command" && tv.is_table()) {
          for (auto&& [ck, cv] : *tv.as_table()) {
            if (ck.str() != "argv") return invalid_argument(source + ": unknown key 'task.command." + std::string(ck.str()) + "';" + allowed);
            const toml::array* arr = cv.as_array();
            json argv = json::array();
            if (arr)
              for (auto&& e : *arr)
                if (e.is_string()) argv.push_back(e.as_string()->get());
            if (!arr || arr->empty() || argv.size() != arr->size())
              return invalid_argument(source + ": task.command.argv must be a non-empty array of strings, e.g. [\"python3\", \"verify.py\"], got " +
                                      rl::toml_type_name(cv) + " " + rl::toml_shown(cv));
            out.overrides.push_back("--task.command.argv=" + argv.dump());
          }
        } else {
          return invalid_argument(source + ": unknown key 'task." + sub + "';" + allowed);
        }
      }
    } else if (key == "lora" && v.is_table()) {
      for (auto&& [lk, lv] : *v.as_table()) {
        if (lk.str() != "adapter") return invalid_argument(source + ": unknown key 'lora." + std::string(lk.str()) + "';" + allowed);
        MESHRL_ASSIGN_OR_RETURN(std::string p, string_of(lv, "lora.adapter"));
        out.overrides.push_back("--lora.adapter=" + p);
      }
    } else {
      return invalid_argument(source + ": unknown key '" + key + "';" + allowed + " (the rest of the run config comes from the coordinator)");
    }
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

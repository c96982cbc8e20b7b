// Node-local settings: what a node takes only from its own operator (its command line or its node
// file), never from the coordinator's manifest: the programs it runs and the paths on its own
// disk. A coordinator (or whoever holds its host or the run CA) decides what every node trains
// and how, but cannot make a node run a program or open a file it names. Everything else in the
// run config comes from the manifest alone: it is the run's, shared by every node, and an
// override of it on a node (another inner_steps, another lr) is refused, since that node would
// train another run than the others. The machine's own resources are flags of `meshrl node`
// (--threads, --device, --cache-dir, --state-dir), not run-config keys.
// Knows nothing about the network, models or tensors.
//
// A node file (`meshrl node --node-file node.toml`) holds only these keys, as TOML:
//   model = "models/qwen2.5-0.5b"            # --model
//   [task]
//   command.argv = ["python3", "verify.py"]  # --task.command.argv
//   jsonl.path = "data/train.jsonl"          # --task.jsonl.path
//   [lora]
//   adapter = "adapters/start"               # --lora.adapter
// Paths are used as written (relative ones from the node's working directory); flags given on the
// command line win over the file.
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "mesh/mesh_config.h"

namespace meshrl::mesh {

// The keys a node sets itself, as `meshrl node` takes them.
inline constexpr std::array<std::string_view, 4> kNodeLocalKeys = {"--model", "--task.command.argv", "--task.jsonl.path",
                                                                    "--lora.adapter"};

// "--model, --task.command.argv, --task.jsonl.path, --lora.adapter" (for --help and refusals).
std::string node_local_keys_text();

// Refuses (kInvalidArgument) every --section.key=value override but the node-local keys above,
// naming the key and listing the keys a node sets itself. `node` names the node in messages.
Status check_node_overrides(const std::vector<std::string>& overrides, const std::string& node);

struct NodeLocalConfig {
  std::string model;                   // --model: a model folder on this machine; "" = the run's preset
  std::vector<std::string> overrides;  // --section.key=value, node-local keys and any other
};

// The node's run config: the manifest's run config with the node's node-local overrides applied,
// in which every node-local key holds the node's own value or its default, never the manifest's.
// Fails (kInvalidArgument) on an override of any other key (check_node_overrides), and, naming
// the flag to pass, when the run needs a node-local value the node did not give: a command task
// without --task.command.argv, a jsonl or command task without --task.jsonl.path, a [lora]
// adapter without --lora.adapter. `node` names the node in messages.
Result<MeshRunConfig> node_run_config(const std::string& manifest_toml, const std::vector<std::string>& overrides,
                                      const std::string& node);

// What the node loads for architecture + tokenizer: local_model when given; else the manifest's
// spec when it is a built-in preset name (nothing read from disk); else refused (kInvalidArgument),
// naming --model, since a folder named by the coordinator is a path on this machine's disk.
Result<std::string> node_model_spec(const std::string& manifest_spec, const std::string& local_model, const std::string& node);

// Reads a node file (format above; at most 1 MiB). Unknown keys and wrong types are errors naming
// the file and the key.
Result<NodeLocalConfig> load_node_file(const std::filesystem::path& path);

// `file` then `command_line`: the command line's overrides come later (they win), its model
// replaces the file's when given.
NodeLocalConfig merge_node_local(const NodeLocalConfig& file, const NodeLocalConfig& command_line);

}  // namespace meshrl::mesh

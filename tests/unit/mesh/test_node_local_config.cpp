// What a node takes from its coordinator's manifest and what only from its own operator
// (mesh/node_local_config.h), and the download caps a node sets from its own shapes (node.h):
//   - a command task, a jsonl file, a start adapter or a model folder the node was not given is
//     refused, naming the flag; given, the node's own value is used and the manifest's never is;
//   - an override of any other key (the run's shared settings: inner_steps, lr, ...) is refused,
//     naming the key and listing the keys a node sets itself;
//   - a node file holds only those keys;
//   - the cap on an fp32 download without zstd is exactly its encoded size, and zstd's worst case
//     (random values) stays under the cap with zstd.
//   build/tests/test_mesh --gtest_filter='NodeLocal*:DownloadCaps*'
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "mesh/codec.h"
#include "mesh/node.h"
#include "mesh/node_local_config.h"

namespace meshrl::mesh {
namespace {

namespace fs = std::filesystem;

// What a hostile coordinator would send: its own verifier, prompts file and adapter folder.
const char* kCommandRun = R"(
[task]
kind = "command"
jsonl.path = "/coordinator/prompts.jsonl"
command.argv = ["/bin/sh", "-c", "touch /tmp/pwned"]
)";

const char* kJsonlRun = R"(
[task]
kind = "jsonl"
jsonl.path = "/home/coordinator/.ssh/id_ed25519"
)";

TEST(NodeLocalConfig, ACommandTaskWithoutTheNodesOwnArgvIsRefusedNamingTheFlag) {
  auto c = node_run_config(kCommandRun, {}, "paris");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("[node paris]"), std::string::npos) << m;
  EXPECT_NE(m.find("--task.command.argv"), std::string::npos) << m;
  EXPECT_NE(m.find("touch /tmp/pwned"), std::string::npos) << m;  // the operator sees what was asked
  EXPECT_NE(m.find(node_local_keys_text()), std::string::npos) << m;
  // Its own argv alone is not enough: the prompts file is a path on its disk too.
  auto only_argv = node_run_config(kCommandRun, {"--task.command.argv=[\"python3\", \"verify.py\"]"}, "paris");
  ASSERT_FALSE(only_argv.is_ok());
  EXPECT_NE(only_argv.status().message().find("--task.jsonl.path"), std::string::npos) << only_argv.status().message();
}

TEST(NodeLocalConfig, TheNodesOwnArgvAndPathAreUsedNeverTheManifests) {
  // Both override forms apply_overrides accepts: "--key=value" and "--key" "value".
  auto c = node_run_config(kCommandRun, {"--task.command.argv=[\"python3\", \"verify.py\"]", "--task.jsonl.path", "mine.jsonl"}, "paris");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c.value().run.task.kind, "command");
  EXPECT_EQ(c.value().run.task.command.argv, (std::vector<std::string>{"python3", "verify.py"}));
  EXPECT_EQ(c.value().run.task.jsonl.path, "mine.jsonl");
}

TEST(NodeLocalConfig, AJsonlPathTheNodeWasNotGivenIsRefused) {
  auto c = node_run_config(kJsonlRun, {}, "dublin");
  ASSERT_FALSE(c.is_ok());
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("--task.jsonl.path"), std::string::npos) << m;
  EXPECT_NE(m.find("id_ed25519"), std::string::npos) << m;
  auto own = node_run_config(kJsonlRun, {"--task.jsonl.path=data/train.jsonl"}, "dublin");
  ASSERT_TRUE(own.is_ok()) << own.status().message();
  EXPECT_EQ(own.value().run.task.jsonl.path, "data/train.jsonl");
}

TEST(NodeLocalConfig, NodeLocalValuesInAManifestThatDoesNotUseThemAreDropped) {
  // An arithmetic run carrying a verifier and a path: neither reaches the node's config.
  const char* run = R"(
[task]
kind = "arithmetic"
jsonl.path = "/etc/shadow"
command.argv = ["/bin/sh", "-c", "id"]
[grpo]
lr = 0.001
)";
  auto c = node_run_config(run, {}, "paris");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c.value().run.task.command.argv.empty());
  EXPECT_TRUE(c.value().run.task.jsonl.path.empty());
  EXPECT_EQ(c.value().run.grpo.lr, 0.001);  // the rest comes from the manifest
}

TEST(NodeLocalConfig, OverridesOfTheRunsSharedSettingsAreRefusedNamingTheKey) {
  // Another H, lr or task on one node would make it train another run than the others; the
  // machine's own threads and device are the flags --threads and --device.
  const std::vector<std::vector<std::string>> shared = {
      {"--mesh.inner_steps=8"}, {"--grpo.lr", "0.1"}, {"--model.threads=4"}, {"--task.kind=countdown"},
      {"--task.jsonl.path=mine.jsonl", "--lora.rank=8"}, {"--task.command.timeout_ms=1"}, {"sft.steps=3"}};
  const std::vector<std::string> named = {"--mesh.inner_steps", "--grpo.lr", "--model.threads", "--task.kind",
                                          "--lora.rank", "--task.command.timeout_ms", "--sft.steps"};
  for (size_t i = 0; i < shared.size(); ++i) {
    const Status s = check_node_overrides(shared[i], "paris");
    ASSERT_FALSE(s.is_ok()) << shared[i][0];
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("[node paris] " + named[i] + " is a setting of the run", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("keys a node sets itself: " + node_local_keys_text()), std::string::npos) << s.message();
  }
  // node_run_config refuses it too, before anything of the manifest is used.
  auto c = node_run_config(kJsonlRun, {"--task.jsonl.path=data/train.jsonl", "--mesh.inner_steps=8"}, "dublin");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().message(),
            "[node dublin] --mesh.inner_steps is a setting of the run, which every node takes from the coordinator's manifest so "
            "that all of them train the same run; keys a node sets itself: --model, --task.command.argv, --task.jsonl.path, "
            "--lora.adapter (and this machine's --threads, --device, --cache-dir, --state-dir)");
  // The node-local keys pass, in both forms; a malformed override is refused as the run config would.
  EXPECT_TRUE(check_node_overrides({"--task.command.argv=[\"python3\", \"v.py\"]", "--task.jsonl.path", "p.jsonl",
                                    "--lora.adapter=adapters/a"},
                                   "paris")
                  .is_ok());
  EXPECT_NE(check_node_overrides({"--grpo"}, "paris").message().find("not an override"), std::string::npos);
}

TEST(NodeLocalConfig, AStartAdapterTheNodeWasNotGivenIsRefused) {
  const char* run = "[lora]\nrank = 0\nadapter = \"/coordinator/adapters/start\"\n";
  auto c = node_run_config(run, {}, "paris");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("--lora.adapter"), std::string::npos) << c.status().message();
  auto own = node_run_config(run, {"--lora.adapter=adapters/mine"}, "paris");
  ASSERT_TRUE(own.is_ok()) << own.status().message();
  EXPECT_EQ(own.value().run.lora.adapter, "adapters/mine");
}

TEST(NodeLocalConfig, AModelFolderIsLoadedOnlyWhenTheNodeNamesIt) {
  EXPECT_EQ(node_model_spec("tiny", "", "paris").value(), "tiny");  // a preset: nothing read from disk
  auto folder = node_model_spec("/coordinator/runs/cache/sft-0123", "", "paris");
  ASSERT_FALSE(folder.is_ok());
  EXPECT_NE(folder.status().message().find("--model"), std::string::npos) << folder.status().message();
  EXPECT_EQ(node_model_spec("/coordinator/runs/cache/sft-0123", "models/mine", "paris").value(), "models/mine");
  EXPECT_EQ(node_model_spec("tiny", "models/mine", "paris").value(), "models/mine");
}

TEST(NodeLocalConfig, KeysAreListedForHelpAndMessages) {
  EXPECT_EQ(node_local_keys_text(), "--model, --task.command.argv, --task.jsonl.path, --lora.adapter");
}

class NodeFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("meshrl-node-file-" + std::to_string(::getpid()) + ".toml");
  }
  void TearDown() override { fs::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  fs::path path_;
};

TEST_F(NodeFile, HoldsTheNodeLocalKeysAndTheCommandLineWins) {
  write(R"(
model = "models/a"
[task]
command.argv = ["python3", "verify.py", "--strict"]
jsonl.path = "data/train.jsonl"
[lora]
adapter = "adapters/start"
)");
  auto f = load_node_file(path_);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f.value().model, "models/a");
  auto c = node_run_config(kCommandRun, f.value().overrides, "paris");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c.value().run.task.command.argv, (std::vector<std::string>{"python3", "verify.py", "--strict"}));
  EXPECT_EQ(c.value().run.task.jsonl.path, "data/train.jsonl");
  EXPECT_EQ(c.value().run.lora.adapter, "adapters/start");

  const NodeLocalConfig merged = merge_node_local(f.value(), {"models/b", {"--task.jsonl.path=other.jsonl"}});
  EXPECT_EQ(merged.model, "models/b");
  auto m = node_run_config(kCommandRun, merged.overrides, "paris");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m.value().run.task.jsonl.path, "other.jsonl");
  EXPECT_EQ(merge_node_local(f.value(), {}).model, "models/a");
}

TEST_F(NodeFile, RefusesOtherKeysAndWrongTypes) {
  write("[grpo]\nlr = 0.1\n");
  auto other = load_node_file(path_);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("unknown key 'grpo'"), std::string::npos) << other.status().message();
  write("[task]\njsonl.prompt_key = \"q\"\n");
  auto sub = load_node_file(path_);
  ASSERT_FALSE(sub.is_ok());
  EXPECT_NE(sub.status().message().find("task.jsonl.prompt_key"), std::string::npos) << sub.status().message();
  write("[task]\ncommand.argv = \"python3 verify.py\"\n");
  auto type = load_node_file(path_);
  ASSERT_FALSE(type.is_ok());
  EXPECT_NE(type.status().message().find("task.command.argv must be an array of strings"), std::string::npos)
      << type.status().message();
  write("[task]\ncommand.argv = []\n");
  auto empty = load_node_file(path_);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("task.command.argv must be a non-empty array of strings"), std::string::npos)
      << empty.status().message();
  write("model = \"\"\n");
  auto no_model = load_node_file(path_);
  ASSERT_FALSE(no_model.is_ok());
  EXPECT_NE(no_model.status().message().find("model must be a non-empty string"), std::string::npos) << no_model.status().message();
  write("model = [\n");
  EXPECT_FALSE(load_node_file(path_).is_ok());
}

NamedTensors two_tensors(uint64_t seed) {
  torch::manual_seed(seed);
  NamedTensors s;
  s.names = {"model.layers.0.mlp.up_proj.weight", "model.norm.weight"};
  s.tensors = {torch::randn({300, 7}), torch::randn({7})};
  return s;
}

TEST(DownloadCaps, Fp32WithoutZstdIsExactlyTheEncodedSize) {
  const NamedTensors s = two_tensors(1);
  CodecConfig raw;
  raw.id = CodecId::kFp32;
  raw.zstd_level = 0;
  const std::string bytes = make_codec(raw).value()->encode(s).value();
  // By hand: 12 header bytes; each record 2 + name + 1 + 8 * rank + 8 + 4 + 8; payloads 4 * numel.
  const uint64_t by_hand = 12 + (2 + 33 + 1 + 16 + 20) + (2 + 17 + 1 + 8 + 20) + 4 * (2100 + 7);
  EXPECT_EQ(bytes.size(), by_hand);
  EXPECT_EQ(max_encoded_bytes(s, raw), by_hand);
}

TEST(DownloadCaps, RandomValuesUnderZstdStayUnderTheCap) {
  // Random fp32 values do not compress: the worst case zstd's bound is there for.
  const NamedTensors s = two_tensors(2);
  for (CodecId id : {CodecId::kFp32, CodecId::kInt8, CodecId::kInt4, CodecId::kInt2}) {
    CodecConfig c;
    c.id = id;
    c.block_size = 64;
    c.zstd_level = 3;
    const std::string bytes = make_codec(c).value()->encode(s).value();
    EXPECT_LE(bytes.size(), max_encoded_bytes(s, c)) << codec_name(id);
    EXPECT_LE(max_encoded_bytes(s, c), bytes.size() + 4096) << codec_name(id);  // and not far above
  }
  const DownloadCaps caps = download_caps(s, CodecConfig{});
  EXPECT_GE(caps.weights, 4u * 2107);
  EXPECT_LT(caps.broadcast, caps.weights);  // int8 by default: about a quarter
}

}  // namespace
}  // namespace meshrl::mesh

// RunStore (src/store/run_store.h): version folders, crash leftovers, spool, manifest, on real files.
//   OMP_NUM_THREADS=1 ./build-store/tests/test_store --gtest_filter='RunStore*'
#include <gtest/gtest.h>

#include <fstream>

#include "store/run_store.h"
#include "support/temp_dir.h"

namespace meshrl::store {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

// Names deliberately not sorted (safetensors sorts, the store must not), odd shapes, a
// non-contiguous view, a NaN payload and a -0.0: a bit-exact round trip keeps all of them.
TensorSet sample_weights(uint64_t seed) {
  torch::manual_seed(seed);
  TensorSet s;
  s.names = {"z.last", "model.embed_tokens.weight", "a.first", "scalar", "empty"};
  auto odd = torch::randn({5, 3});
  odd.index_put_({0, 0}, std::nanf(""));
  odd.index_put_({0, 1}, -0.0f);
  s.tensors = {torch::randn({7}), torch::randn({16, 8}).t(), odd, torch::tensor(3.5f), torch::zeros({0, 4})};
  return s;
}

bool bit_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;  // an empty tensor's data_ptr is null: memcmp(nullptr, ...) is UB
  auto ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

void expect_same(const TensorSet& a, const TensorSet& b) {
  ASSERT_EQ(a.names, b.names);
  for (size_t i = 0; i < a.names.size(); ++i) EXPECT_TRUE(bit_equal(a.tensors[i], b.tensors[i])) << a.names[i];
}

std::string msg(const Status& s) { return s.message(); }

// A run with v0 and v1 committed.
RunStore make_run(const fs::path& dir) {
  auto store = RunStore::create(dir, {{"model", "tiny"}}).value();
  auto w0 = sample_weights(0);
  EXPECT_TRUE(store.write_version(0, "h0", "", w0, {}, "").is_ok());
  EXPECT_TRUE(store.ledger().commit_initial("h0").is_ok());
  EXPECT_TRUE(store.write_version(1, "h1", "h0", sample_weights(1), sample_weights(11), "delta-1").is_ok());
  EXPECT_TRUE(store.ledger().commit_round(1, "h1", {}, "quorum").is_ok());
  return store;
}

TEST(RunStore, VersionFolderRoundTripIsBitIdenticalInOrder) {
  TempDir tmp;
  auto store = RunStore::create(tmp.path() / "run", {{"model", "tiny"}, {"nodes", 4}}).value();
  const auto w0 = sample_weights(0);
  ASSERT_TRUE(store.write_version(0, "hash0", "", w0, {}, "").is_ok());
  ASSERT_TRUE(store.ledger().commit_initial("hash0").is_ok());
  const auto w1 = sample_weights(1), m1 = sample_weights(2);
  const std::string delta("\0\1binary\xff delta", 15);
  ASSERT_TRUE(store.write_version(1, "hash1", "hash0", w1, m1, delta).is_ok());
  ASSERT_TRUE(store.ledger().commit_round(1, "hash1", {}, "quorum").is_ok());

  auto v0 = store.load_version(0).value();
  EXPECT_EQ(v0.version, 0);
  EXPECT_EQ(v0.hash, "hash0");
  EXPECT_EQ(v0.parent_hash, "");
  expect_same(v0.weights, w0);
  EXPECT_TRUE(v0.outer_state.names.empty());
  EXPECT_FALSE(fs::exists(store.version_dir(0) / "broadcast.bin"));
  EXPECT_FALSE(store.load_broadcast(0).is_ok());

  auto v1 = store.load_version(1).value();
  EXPECT_EQ(v1.hash, "hash1");
  EXPECT_EQ(v1.parent_hash, "hash0");
  expect_same(v1.weights, w1);
  expect_same(v1.outer_state, m1);
  EXPECT_EQ(store.load_broadcast(1).value(), delta);
  EXPECT_EQ(store.list_versions(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(store.version_dir(1).filename(), "v-000001");

  // The manifest keeps the caller's keys and adds identity and format.
  EXPECT_EQ(store.manifest()["model"], "tiny");
  EXPECT_EQ(store.manifest()["nodes"], 4);
  EXPECT_EQ(store.manifest()["format"], "meshrl-run");
  EXPECT_EQ(store.manifest()["run_id"].get<std::string>().size(), 16u);
  EXPECT_TRUE(store.manifest()["created_at"].is_number());
}

TEST(RunStore, ReopenResumesAtTheLedgerVersion) {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  std::string run_id;
  { run_id = make_run(dir).manifest()["run_id"]; }
  auto store = RunStore::open(dir).value();
  EXPECT_EQ(store.manifest()["run_id"], run_id);
  EXPECT_EQ(store.ledger().current_version(), 1);
  auto v1 = store.load_version(1).value();
  expect_same(v1.weights, sample_weights(1));
  expect_same(v1.outer_state, sample_weights(11));
}

TEST(RunStore, CrashBetweenWriteAndCommitLeavesAnOrphanThatOpenRemoves) {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  {
    auto store = make_run(dir);
    // Crash after write_version(2) but before commit_round(2), and one in the middle of writing 3.
    ASSERT_TRUE(store.write_version(2, "h2", "h1", sample_weights(2), sample_weights(12), "delta-2").is_ok());
    fs::create_directories(dir / "versions" / ".tmp-v-000003");
    std::ofstream(dir / "versions" / ".tmp-v-000003" / "weights.safetensors") << "half";
    std::ofstream(dir / "spool" / "x.v0.s1.bin.tmp") << "half";
    EXPECT_EQ(store.list_versions(), (std::vector<int64_t>{0, 1, 2}));
  }
  auto store = RunStore::open(dir).value();
  EXPECT_EQ(store.ledger().current_version(), 1);
  EXPECT_EQ(store.list_versions(), (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(fs::exists(dir / "versions" / ".tmp-v-000003"));
  EXPECT_FALSE(fs::exists(dir / "spool" / "x.v0.s1.bin.tmp"));
  EXPECT_EQ(store.load_version(2).status().code(), StatusCode::kNotFound);
  // The round is redone, possibly with other weights.
  ASSERT_TRUE(store.write_version(2, "h2b", "h1", sample_weights(22), sample_weights(12), "delta-2b").is_ok());
  ASSERT_TRUE(store.ledger().commit_round(2, "h2b", {}, "deadline").is_ok());
  expect_same(store.load_version(2).value().weights, sample_weights(22));
}

TEST(RunStore, WriteVersionOverwritesAnOrphanButNeverACommittedVersion) {
  TempDir tmp;
  auto store = make_run(tmp.path() / "run");
  for (int64_t v : {0, 1, 3, -1}) {
    auto st = store.write_version(v, "hx", "h1", sample_weights(5), {}, "d");
    EXPECT_FALSE(st.is_ok()) << v;
    EXPECT_NE(msg(st).find("next version to write is 2"), std::string::npos) << msg(st);
  }
  expect_same(store.load_version(1).value().weights, sample_weights(1));
  ASSERT_TRUE(store.write_version(2, "h2", "h1", sample_weights(2), {}, "d").is_ok());
  ASSERT_TRUE(store.write_version(2, "h2b", "h1", sample_weights(3), {}, "d").is_ok());  // retry of the round
  EXPECT_EQ(store.load_version(2).value().hash, "h2b");
  TensorSet bad = sample_weights(2);
  bad.names[1] = bad.names[0];
  EXPECT_NE(msg(store.write_version(2, "h", "h1", bad, {}, "d")).find("duplicate name"), std::string::npos);
  bad.names.pop_back();
  EXPECT_FALSE(store.write_version(2, "h", "h1", bad, {}, "d").is_ok());
}

TEST(RunStore, LoadVersionNamesTheCorruptOrMissingFile) {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  auto store = make_run(dir);
  const auto weights = store.version_dir(1) / "weights.safetensors";
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  auto r = store.load_version(1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(weights.string()), std::string::npos) << r.status().message();

  const auto broadcast = store.version_dir(1) / "broadcast.bin";
  fs::remove(broadcast);
  auto b = store.load_broadcast(1);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find(broadcast.string()), std::string::npos) << b.status().message();

  fs::remove(store.version_dir(0) / "meta.json");
  auto m = store.load_version(0);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("meta.json"), std::string::npos) << m.status().message();
}

TEST(RunStore, OpenFailsWhenTheCurrentVersionFolderIsGone) {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  { make_run(dir); }
  fs::remove_all(dir / "versions" / "v-000001");
  auto r = RunStore::open(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("v-000001"), std::string::npos) << r.status().message();
}

TEST(RunStore, CreateRefusesAnExistingRunAndOpenNamesMissingOrCorruptFiles) {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  { make_run(dir); }
  auto again = RunStore::create(dir, nlohmann::json::object());
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("already holds a run"), std::string::npos) << again.status().message();
  EXPECT_FALSE(RunStore::create(tmp.path() / "other", nlohmann::json::array()).is_ok());

  const auto missing = RunStore::open(tmp.path() / "nothing");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("manifest.json"), std::string::npos);

  fs::copy_file(dir / "manifest.json", tmp.path() / "manifest.bak");
  std::ofstream(dir / "manifest.json") << "{ not json";
  auto corrupt = RunStore::open(dir);
  ASSERT_FALSE(corrupt.is_ok());
  EXPECT_NE(corrupt.status().message().find((dir / "manifest.json").string()), std::string::npos) << corrupt.status().message();
  fs::copy_file(tmp.path() / "manifest.bak", dir / "manifest.json", fs::copy_options::overwrite_existing);

  fs::rename(dir / "ledger.sqlite", tmp.path() / "ledger.bak");
  auto no_ledger = RunStore::open(dir);
  ASSERT_FALSE(no_ledger.is_ok());
  EXPECT_NE(no_ledger.status().message().find((dir / "ledger.sqlite").string()), std::string::npos);

  for (const char* wal : {"ledger.sqlite-wal", "ledger.sqlite-shm"}) fs::remove(dir / wal);
  std::ofstream(dir / "ledger.sqlite") << std::string(8192, 'g');
  auto bad_ledger = RunStore::open(dir);
  ASSERT_FALSE(bad_ledger.is_ok());
  EXPECT_NE(bad_ledger.status().message().find((dir / "ledger.sqlite").string()), std::string::npos)
      << bad_ledger.status().message();
}

TEST(RunStore, SecondOpenOfALiveRunIsRefused) {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  auto store = make_run(dir);
  auto second = RunStore::open(dir);
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status().message();
}

TEST(RunStore, SpoolSurvivesReopen) {
  TempDir tmp;
  const auto dir = tmp.path() / "run";
  const UpdateKey k{"paris/1", 0, 3};
  const std::string payload("\0MRLU payload\xff", 14);
  {
    auto store = make_run(dir);
    ASSERT_TRUE(store.spool_update(k.str(), payload).is_ok());
    ASSERT_TRUE(store.ledger().record_received(k, 8, static_cast<int64_t>(payload.size())).value());
  }
  auto store = RunStore::open(dir).value();
  auto pending = store.ledger().pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(store.read_spooled(pending[0].key.str()).value(), payload);
  ASSERT_TRUE(store.remove_spooled(k.str()).is_ok());
  ASSERT_TRUE(store.remove_spooled(k.str()).is_ok());
  EXPECT_EQ(store.read_spooled(k.str()).status().code(), StatusCode::kNotFound);
  for (const char* bad : {"", "../x", ".hidden", "a/b", "a b"}) EXPECT_FALSE(store.spool_update(bad, "x").is_ok()) << bad;
}

TEST(RunStore, TensorSetFileKeepsOrderAndEmptySets) {
  TempDir tmp;
  const auto w = sample_weights(4);
  ASSERT_TRUE(write_tensor_set(tmp.path() / "w.safetensors", w).is_ok());
  expect_same(read_tensor_set(tmp.path() / "w.safetensors").value(), w);
  ASSERT_TRUE(write_tensor_set(tmp.path() / "e.safetensors", {}).is_ok());
  EXPECT_TRUE(read_tensor_set(tmp.path() / "e.safetensors").value().names.empty());
}

}  // namespace
}  // namespace meshrl::store

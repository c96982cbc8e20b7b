// RunStore: the coordinator's run directory, durable and crash-safe. Owns the files below and the
// ledger; knows nothing about the mesh (codecs, hashes, aggregation) or the network: tensors come
// in and go out as TensorSet, hashes and payloads as opaque strings.
//
//   RUN_DIR/manifest.json             written once, atomically, by create(); marks the folder a run
//   RUN_DIR/versions/v-000042/        one folder per version (%06d, wider past 999999)
//       weights.safetensors           the parameter set at that version (names and order kept)
//       outer_state.safetensors       outer optimizer state (may be an empty set)
//       broadcast.bin                 the encoded delta v-1 -> v exactly as broadcast (absent at v0)
//       meta.json                     {"format_version":1,"version":42,"hash":"...","parent_hash":"...",
//                                      "created_at":..., "files":{name:{"bytes":N,"xxh3":"..."}}}
//   RUN_DIR/versions/.tmp-v-000042/   a version being written (deleted by open())
//   RUN_DIR/spool/<key>.bin           received update payloads, fsynced before spool_update returns
//   RUN_DIR/ledger.sqlite             the ledger (ledger.h): which version is current
//
// Commit order, and what a crash leaves:
//   1. write_version(v+1): files into .tmp-v-..., each fsynced; the folder fsynced, renamed to
//      v-..., versions/ fsynced. A crash before the rename leaves a .tmp folder; after it, a
//      complete folder the ledger does not know yet (an orphan).
//   2. ledger().commit_round(v+1, ...): one SQLite transaction. Only now is v+1 current.
// open() reads the ledger's current version, deletes .tmp folders and orphans (versions above
// it), and checks that the current version's folder is there; the coordinator then redoes the
// round from the still-kReceived updates (ledger().pending() + read_spooled), so nothing is lost
// or applied twice. Spool before ledger().record_received, for the same reason.
//
// Tensors in safetensors files carry their order in the metadata key "meshrl.names" (a JSON array),
// since safetensors itself sorts them; load returns them in the order they were written.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "store/ledger.h"

namespace meshrl::store {

inline constexpr int kRunDirFormatVersion = 1;

// names[i] names tensors[i] (a parameter set; mesh::NamedTensors has the same two fields).
// Any dtype safetensors holds; tensors are written as contiguous CPU copies and read back
// bit-identical, in the same order.
struct TensorSet {
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
};

struct VersionRecord {
  int64_t version = 0;
  std::string hash;
  std::string parent_hash;  // "" at v0
  TensorSet weights;
  TensorSet outer_state;
};

class RunStore {
 public:
  // Makes a new run in `dir` (created if missing; may exist empty). `manifest` must be a JSON object;
  // its keys are kept, "format" and "format_version" are set, and "run_id" (16 random hex digits)
  // and "created_at" (Unix seconds) are added unless given. Fails when dir already holds a run
  // (manifest.json or ledger.sqlite present).
  static Result<RunStore> create(const std::filesystem::path& dir, const nlohmann::json& manifest);

  // Opens an existing run (--resume) and cleans what a crash left (see above). Fails naming the file
  // when manifest.json or ledger.sqlite is missing or corrupt, when the ledger's current version
  // has no folder or its meta.json hash differs from the ledger's, or when another process holds
  // the run (RUN_DIR/.lock, an flock held for the store's lifetime: destroy a RunStore before
  // opening its directory again). A run whose ledger has no v0 (a crash inside the first
  // write_version + commit_initial) opens with ledger().has_initial() false and no version folder.
  static Result<RunStore> open(const std::filesystem::path& dir);

  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;
  ~RunStore();

  const nlohmann::json& manifest() const;
  const std::filesystem::path& dir() const;
  Ledger& ledger();
  const Ledger& ledger() const;

  // Writes versions/v-NNNNNN atomically (see the commit order above); does not make it current.
  // `version` must be the next one: 0 before commit_initial, else ledger current_version() + 1, so
  // a committed version is never overwritten (kInvalidArgument otherwise); also refuses an empty
  // hash, non-empty broadcast bytes at v0,
  // and an invalid set (count mismatch, empty or duplicate name, undefined tensor). An orphan
  // folder of the same version (a round being redone) is replaced.
  Status write_version(int64_t version, const std::string& hash, const std::string& parent_hash,
                       const TensorSet& weights, const TensorSet& outer_state, const std::string& broadcast_bytes);

  // Reads a version folder, checking that every file is there with the size and xxh3 that
  // meta.json records and that meta.json names this version. Fails kNotFound when the folder is
  // missing, kDataLoss (naming the file) when it is incomplete or corrupt.
  Result<VersionRecord> load_version(int64_t version) const;

  // The bytes of the delta version-1 -> version (checked as load_version checks them).
  Result<std::string> load_broadcast(int64_t version) const;

  // versions/ folder names of complete versions, ascending (committed or orphans not yet cleaned).
  std::vector<int64_t> list_versions() const;

  // Spool: `key` is an UpdateKey::str() (any [A-Za-z0-9._%-] name, not starting with '.', at most
  // 200 bytes). spool_update returns once the bytes are fsynced under their final name.
  Status spool_update(const std::string& key, const std::string& bytes);
  Result<std::string> read_spooled(const std::string& key) const;  // kNotFound when absent
  Status remove_spooled(const std::string& key);                   // ok when already absent

  std::filesystem::path version_dir(int64_t version) const;  // RUN_DIR/versions/v-NNNNNN

 private:
  struct Impl;
  explicit RunStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Safetensors helpers used by RunStore, exposed for tests and tools: write a set keeping its order
// (metadata "meshrl.names"), read it back in that order. Files without the key are read in the
// file's own order.
Status write_tensor_set(const std::filesystem::path& path, const TensorSet& set);
Result<TensorSet> read_tensor_set(const std::filesystem::path& path);

}  // namespace meshrl::store

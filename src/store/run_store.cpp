#include "store/run_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <unordered_set>

#include "core/fault_point.h"
#include "core/file_io.h"
#include "model/safetensors.h"
#include "model/safetensors_torch.h"

namespace meshrl::store {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kLedgerFile = "ledger.sqlite";
constexpr const char* kLockFile = ".lock";
constexpr const char* kWeights = "weights.safetensors";
constexpr const char* kOuterState = "outer_state.safetensors";
constexpr const char* kBroadcast = "broadcast.bin";
constexpr const char* kMeta = "meta.json";
constexpr const char* kNamesKey = "meshrl.names";
constexpr size_t kMaxSpoolKeyBytes = 200;

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string xxh3_hex(std::string_view bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, static_cast<uint64_t>(XXH3_64bits(bytes.data(), bytes.size())));
  return buf;
}

// Makes a rename or a new entry in `dir` durable.
Status fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("[store] cannot open directory " + dir.string() + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return io_error("[store] fsync of directory " + dir.string() + " failed");
  return Status::ok();
}

std::string version_name(int64_t version) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "v-%06" PRId64, version);
  return buf;
}

// "v-000042" -> 42; nullopt for anything else.
std::optional<int64_t> parse_version_name(const std::string& name) {
  if (name.size() < 3 || name.compare(0, 2, "v-") != 0 || name.size() > 2 + 18) return std::nullopt;
  int64_t v = 0;
  for (size_t i = 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::optional<int64_t> json_int(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
  return j[key].get<int64_t>();
}
std::optional<std::string> json_string(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return std::nullopt;
  return j[key].get<std::string>();
}
std::string json_field(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) ? j[key].dump() : std::string("(absent)");
}

Status check_set(const TensorSet& set, const std::string& what) {
  if (set.names.size() != set.tensors.size())
    return invalid_argument("[store] " + what + ": " + std::to_string(set.names.size()) + " names for " +
                            std::to_string(set.tensors.size()) + " tensors");
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < set.names.size(); ++i) {
    if (set.names[i].empty()) return invalid_argument("[store] " + what + ": tensor " + std::to_string(i) + " has an empty name");
    if (!seen.insert(set.names[i]).second) return invalid_argument("[store] " + what + ": duplicate name '" + set.names[i] + "'");
    if (!set.tensors[i].defined()) return invalid_argument("[store] " + what + ": tensor '" + set.names[i] + "' is undefined");
  }
  return Status::ok();
}

Result<std::string> tensor_set_bytes(const TensorSet& set) {
  std::vector<std::pair<std::string, torch::Tensor>> pairs;
  pairs.reserve(set.names.size());
  for (size_t i = 0; i < set.names.size(); ++i) pairs.emplace_back(set.names[i], set.tensors[i]);
  return model::safetensors_bytes(pairs, {{kNamesKey, nlohmann::json(set.names).dump()}});
}

Result<TensorSet> parse_tensor_set(std::string_view bytes, const std::string& source) {
  MESHRL_ASSIGN_OR_RETURN(auto header, model::parse_safetensors(bytes, source));
  std::map<std::string, const model::TensorEntry*> by_name;
  std::vector<std::string> order;
  for (const auto& e : header.tensors) {
    by_name[e.name] = &e;
    order.push_back(e.name);
  }
  if (auto it = header.metadata.find(kNamesKey); it != header.metadata.end()) {
    auto j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (!j.is_array()) return data_loss("[store] " + source + ": metadata '" + kNamesKey + "' is not a JSON array");
    order.clear();
    for (const auto& n : j) {
      if (!n.is_string()) return data_loss("[store] " + source + ": metadata '" + kNamesKey + "' holds a non-string");
      order.push_back(n.get<std::string>());
    }
    std::set<std::string> listed(order.begin(), order.end());
    if (listed.size() != order.size() || order.size() != by_name.size())
      return data_loss("[store] " + source + ": metadata '" + kNamesKey + "' lists " + std::to_string(order.size()) +
                       " names for " + std::to_string(by_name.size()) + " tensors");
  }
  TensorSet out;
  const char* data = bytes.data() + header.data_offset;
  for (const auto& name : order) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      return data_loss("[store] " + source + ": metadata '" + kNamesKey + "' names '" + name + "', which the file lacks");
    const auto& e = *it->second;
    if (e.dtype == model::Dtype::BOOL)
      for (uint64_t i = 0; i < e.n_bytes(); ++i)
        if (static_cast<unsigned char>(data[e.begin + i]) > 1)
          return data_loss("[store] " + source + ": tensor '" + name + "' has a BOOL byte other than 0/1");
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(model::dtype_to_torch(e.dtype)));
    if (e.n_bytes() > 0) std::memcpy(t.data_ptr(), data + e.begin, e.n_bytes());
    out.names.push_back(name);
    out.tensors.push_back(std::move(t));
  }
  return out;
}

Status check_spool_key(const std::string& key) {
  bool ok = !key.empty() && key.size() <= kMaxSpoolKeyBytes && key[0] != '.';
  for (char c : key)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-' || c == '%');
  if (!ok)
    return invalid_argument("[store] spool key '" + key + "' is not a safe file name ([A-Za-z0-9._%-], at most " +
                            std::to_string(kMaxSpoolKeyBytes) + " bytes, no leading '.'); use UpdateKey::str()");
  return Status::ok();
}

// An exclusive advisory lock on RUN_DIR/.lock for the store's lifetime: two coordinators on one
// run directory would interleave versions. The kernel drops it when the process dies.
Result<int> lock_run_dir(const fs::path& dir) {
  const auto file = dir / kLockFile;
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("[store] cannot open " + file.string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return invalid_argument("[store] " + dir.string() + " is in use by another coordinator (" + file.string() +
                            " is locked); stop it first");
  }
  return fd;
}

}  // namespace

Status write_tensor_set(const fs::path& path, const TensorSet& set) {
  MESHRL_RETURN_IF_ERROR(check_set(set, path.string()));
  MESHRL_ASSIGN_OR_RETURN(auto bytes, tensor_set_bytes(set));
  return write_file_atomic(path, bytes);
}

Result<TensorSet> read_tensor_set(const fs::path& path) {
  MESHRL_ASSIGN_OR_RETURN(auto bytes, read_file(path));
  return parse_tensor_set(bytes, path.string());
}

struct RunStore::Impl {
  fs::path dir;
  nlohmann::json manifest;
  Ledger ledger;
  int lock_fd = -1;

  Impl(fs::path d, Ledger l, int fd) : dir(std::move(d)), ledger(std::move(l)), lock_fd(fd) {}
  ~Impl() {
    if (lock_fd >= 0) ::close(lock_fd);
  }
  fs::path versions() const { return dir / "versions"; }
  fs::path spool() const { return dir / "spool"; }

  // meta.json of a version folder, checked to name `version`.
  Result<nlohmann::json> read_meta(int64_t version) const {
    const auto vdir = versions() / version_name(version);
    std::error_code ec;
    if (!fs::is_directory(vdir, ec))
      return not_found("[store] version " + std::to_string(version) + " has no folder " + vdir.string());
    const auto file = vdir / kMeta;
    auto bytes = read_file(file, 1 << 20);
    if (!bytes.is_ok()) return data_loss("[store] " + file.string() + " is missing or unreadable: incomplete version folder");
    auto meta = nlohmann::json::parse(bytes.value(), nullptr, /*allow_exceptions=*/false);
    if (!json_int(meta, "version") || !json_string(meta, "hash") || !meta.contains("files") || !meta["files"].is_object())
      return data_loss("[store] " + file.string() + " is not a valid version meta.json");
    if (json_int(meta, "format_version") != kRunDirFormatVersion)
      return data_loss("[store] " + file.string() + " has format_version " + json_field(meta, "format_version") +
                       ", expected " + std::to_string(kRunDirFormatVersion));
    if (*json_int(meta, "version") != version)
      return data_loss("[store] " + file.string() + " says version " + meta["version"].dump() + ", expected " +
                       std::to_string(version));
    return meta;
  }

  // One file of a version folder, checked against meta.json's size and xxh3.
  Result<std::string> read_checked(int64_t version, const nlohmann::json& meta, const std::string& name) const {
    const auto file = versions() / version_name(version) / name;
    if (!meta["files"].contains(name))
      return data_loss("[store] " + (versions() / version_name(version) / kMeta).string() + " does not list " + name);
    const auto& entry = meta["files"][name];
    auto bytes = read_file(file);
    if (!bytes.is_ok()) return data_loss("[store] " + file.string() + " is missing or unreadable: incomplete version folder");
    if (json_int(entry, "bytes") != static_cast<int64_t>(bytes.value().size()) ||
        json_string(entry, "xxh3") != xxh3_hex(bytes.value()))
      return data_loss("[store] " + file.string() + " does not match the size and xxh3 in meta.json: corrupt");
    return std::move(bytes).value();
  }
};

RunStore::RunStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;
RunStore::~RunStore() = default;

const nlohmann::json& RunStore::manifest() const { return impl_->manifest; }
const fs::path& RunStore::dir() const { return impl_->dir; }
Ledger& RunStore::ledger() { return impl_->ledger; }
const Ledger& RunStore::ledger() const { return impl_->ledger; }
fs::path RunStore::version_dir(int64_t version) const { return impl_->versions() / version_name(version); }

Result<RunStore> RunStore::create(const fs::path& dir, const nlohmann::json& manifest) {
  if (!manifest.is_object()) return invalid_argument("[store] the manifest must be a JSON object, got " + manifest.dump());
  std::error_code ec;
  for (const char* f : {kManifest, kLedgerFile})
    if (fs::exists(dir / f, ec))
      return invalid_argument("[store] " + dir.string() + " already holds a run (" + (dir / f).string() +
                              " exists); resume it with open(), or pick a new directory");
  fs::create_directories(dir / "versions", ec);
  if (!ec) fs::create_directories(dir / "spool", ec);
  if (ec) return io_error("[store] cannot create " + dir.string() + ": " + ec.message());
  MESHRL_ASSIGN_OR_RETURN(int fd, lock_run_dir(dir));
  auto ledger = Ledger::open(dir / kLedgerFile);
  if (!ledger.is_ok()) {
    ::close(fd);
    return ledger.status();
  }
  auto impl = std::make_unique<Impl>(dir, std::move(ledger).value(), fd);
  nlohmann::json m = manifest;
  m["format"] = "meshrl-run";
  m["format_version"] = kRunDirFormatVersion;
  if (!m.contains("run_id")) {
    std::random_device rd;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    m["run_id"] = buf;
  }
  if (!m.contains("created_at")) m["created_at"] = now_s();
  // The manifest goes last: it is what marks the folder a complete run.
  MESHRL_RETURN_IF_ERROR(write_file_atomic(dir / kManifest, m.dump(2) + "\n"));
  auto parent = fs::absolute(dir, ec).parent_path();
  if (!ec) MESHRL_RETURN_IF_ERROR(fsync_dir(parent));
  impl->manifest = std::move(m);
  return RunStore(std::move(impl));
}

Result<RunStore> RunStore::open(const fs::path& dir) {
  std::error_code ec;
  const auto manifest_file = dir / kManifest;
  if (!fs::exists(manifest_file, ec))
    return not_found("[store] " + manifest_file.string() + " is missing: " + dir.string() +
                     " is not a meshrl run directory (or its creation did not finish)");
  MESHRL_ASSIGN_OR_RETURN(auto text, read_file(manifest_file, 16 << 20));
  auto manifest = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json_string(manifest, "format") != "meshrl-run")
    return data_loss("[store] " + manifest_file.string() + " is corrupt: not a JSON object with \"format\": \"meshrl-run\"");
  if (json_int(manifest, "format_version") != kRunDirFormatVersion)
    return invalid_argument("[store] " + manifest_file.string() + " has format_version " +
                            json_field(manifest, "format_version") + ", this meshrl reads " +
                            std::to_string(kRunDirFormatVersion));
  const auto ledger_file = dir / kLedgerFile;
  if (!fs::exists(ledger_file, ec)) return not_found("[store] " + ledger_file.string() + " is missing: cannot resume the run");
  MESHRL_ASSIGN_OR_RETURN(int fd, lock_run_dir(dir));
  auto ledger = Ledger::open(ledger_file);
  if (!ledger.is_ok()) {
    ::close(fd);
    return ledger.status();
  }
  auto impl = std::make_unique<Impl>(dir, std::move(ledger).value(), fd);
  impl->manifest = std::move(manifest);

  // Clean what a crash left: folders being written, and complete folders the ledger never
  // committed (the round is redone from the pending updates).
  const bool has_initial = impl->ledger.has_initial();
  const int64_t current = impl->ledger.current_version();
  fs::create_directories(impl->versions(), ec);
  fs::create_directories(impl->spool(), ec);
  std::vector<fs::path> leftovers;
  for (const auto& e : fs::directory_iterator(impl->versions(), ec)) {
    const auto name = e.path().filename().string();
    auto v = parse_version_name(name);
    if (name.rfind(".tmp-", 0) == 0 || (v && (!has_initial || *v > current))) leftovers.push_back(e.path());
  }
  if (ec) return io_error("[store] cannot list " + impl->versions().string() + ": " + ec.message());
  for (const auto& p : leftovers) {
    fs::remove_all(p, ec);
    if (ec) return io_error("[store] cannot remove leftover " + p.string() + ": " + ec.message());
  }
  if (!leftovers.empty()) MESHRL_RETURN_IF_ERROR(fsync_dir(impl->versions()));
  leftovers.clear();
  for (const auto& e : fs::directory_iterator(impl->spool(), ec))
    if (e.path().extension() == ".tmp") leftovers.push_back(e.path());
  for (const auto& p : leftovers) fs::remove(p, ec);

  if (has_initial) {
    MESHRL_ASSIGN_OR_RETURN(auto meta, impl->read_meta(current));
    if (meta["hash"].get<std::string>() != impl->ledger.current_hash())
      return data_loss("[store] " + (impl->versions() / version_name(current) / kMeta).string() + " has hash " +
                       meta["hash"].get<std::string>() + " but " + ledger_file.string() + " committed " +
                       impl->ledger.current_hash() + " for version " + std::to_string(current));
  }
  return RunStore(std::move(impl));
}

Status RunStore::write_version(int64_t version, const std::string& hash, const std::string& parent_hash,
                               const TensorSet& weights, const TensorSet& outer_state, const std::string& broadcast_bytes) {
  const std::string where = "[store] write_version " + std::to_string(version) + ": ";
  const bool has_initial = impl_->ledger.has_initial();
  const int64_t expected = has_initial ? impl_->ledger.current_version() + 1 : 0;
  if (version != expected)
    return invalid_argument(where + "the ledger's current version is " +
                            (has_initial ? std::to_string(expected - 1) : std::string("none (no v0 yet)")) +
                            ", so the next version to write is " + std::to_string(expected) +
                            " (committed versions are never overwritten)");
  if (hash.empty()) return invalid_argument(where + "empty hash");
  if (version == 0 && !broadcast_bytes.empty()) return invalid_argument(where + "version 0 has no broadcast delta");
  MESHRL_RETURN_IF_ERROR(check_set(weights, "write_version weights"));
  MESHRL_RETURN_IF_ERROR(check_set(outer_state, "write_version outer_state"));

  const auto final_dir = version_dir(version);
  const auto tmp_dir = impl_->versions() / (".tmp-" + version_name(version));
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  fs::create_directories(tmp_dir, ec);
  if (ec) return io_error(where + "cannot create " + tmp_dir.string() + ": " + ec.message());

  nlohmann::json files = nlohmann::json::object();
  auto put = [&](const char* name, const std::string& bytes) -> Status {
    MESHRL_RETURN_IF_ERROR(write_file_atomic(tmp_dir / name, bytes));
    files[name] = {{"bytes", bytes.size()}, {"xxh3", xxh3_hex(bytes)}};
    return Status::ok();
  };
  {
    MESHRL_ASSIGN_OR_RETURN(auto w, tensor_set_bytes(weights));
    MESHRL_RETURN_IF_ERROR(put(kWeights, w));
  }
  fault_point("mid_persist", version);  // test-only: core/fault_point.h
  {
    MESHRL_ASSIGN_OR_RETURN(auto o, tensor_set_bytes(outer_state));
    MESHRL_RETURN_IF_ERROR(put(kOuterState, o));
  }
  if (version > 0) MESHRL_RETURN_IF_ERROR(put(kBroadcast, broadcast_bytes));
  nlohmann::json meta = {{"format_version", kRunDirFormatVersion},
                         {"version", version},
                         {"hash", hash},
                         {"parent_hash", parent_hash},
                         {"created_at", now_s()},
                         {"files", files}};
  MESHRL_RETURN_IF_ERROR(write_file_atomic(tmp_dir / kMeta, meta.dump(2) + "\n"));
  MESHRL_RETURN_IF_ERROR(fsync_dir(tmp_dir));
  fs::remove_all(final_dir, ec);  // an orphan of an earlier try at this round
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) return io_error(where + "rename " + tmp_dir.string() + " -> " + final_dir.string() + ": " + ec.message());
  return fsync_dir(impl_->versions());
}

Result<VersionRecord> RunStore::load_version(int64_t version) const {
  MESHRL_ASSIGN_OR_RETURN(auto meta, impl_->read_meta(version));
  VersionRecord r;
  r.version = version;
  r.hash = meta["hash"].get<std::string>();
  r.parent_hash = json_string(meta, "parent_hash").value_or("");
  const auto vdir = version_dir(version);
  {
    MESHRL_ASSIGN_OR_RETURN(auto bytes, impl_->read_checked(version, meta, kWeights));
    MESHRL_ASSIGN_OR_RETURN(r.weights, parse_tensor_set(bytes, (vdir / kWeights).string()));
  }
  {
    MESHRL_ASSIGN_OR_RETURN(auto bytes, impl_->read_checked(version, meta, kOuterState));
    MESHRL_ASSIGN_OR_RETURN(r.outer_state, parse_tensor_set(bytes, (vdir / kOuterState).string()));
  }
  if (version > 0) MESHRL_RETURN_IF_ERROR(impl_->read_checked(version, meta, kBroadcast).status());
  return r;
}

Result<std::string> RunStore::load_broadcast(int64_t version) const {
  if (version <= 0) return invalid_argument("[store] load_broadcast: version " + std::to_string(version) + " has no broadcast delta");
  MESHRL_ASSIGN_OR_RETURN(auto meta, impl_->read_meta(version));
  return impl_->read_checked(version, meta, kBroadcast);
}

std::vector<int64_t> RunStore::list_versions() const {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(impl_->versions(), ec))
    if (auto v = parse_version_name(e.path().filename().string())) out.push_back(*v);
  std::sort(out.begin(), out.end());
  return out;
}

Status RunStore::spool_update(const std::string& key, const std::string& bytes) {
  MESHRL_RETURN_IF_ERROR(check_spool_key(key));
  return write_file_atomic(impl_->spool() / (key + ".bin"), bytes);
}

Result<std::string> RunStore::read_spooled(const std::string& key) const {
  MESHRL_RETURN_IF_ERROR(check_spool_key(key));
  const auto file = impl_->spool() / (key + ".bin");
  std::error_code ec;
  if (!fs::exists(file, ec)) return not_found("[store] no spooled update " + file.string());
  return read_file(file);
}

Status RunStore::remove_spooled(const std::string& key) {
  MESHRL_RETURN_IF_ERROR(check_spool_key(key));
  const auto file = impl_->spool() / (key + ".bin");
  std::error_code ec;
  fs::remove(file, ec);
  if (ec) return io_error("[store] cannot remove " + file.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace meshrl::store

#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file_io.h"

namespace meshrl::model {
namespace {

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  size_t size;
  int hf_rank;  // position in the reference library's Dtype enum; its writer sorts by it (desc)
};

constexpr DtypeInfo kDtypes[] = {
    {Dtype::F32, "F32", 4, 11},  {Dtype::F16, "F16", 2, 7}, {Dtype::BF16, "BF16", 2, 8}, {Dtype::F64, "F64", 8, 12},
    {Dtype::I64, "I64", 8, 13},  {Dtype::I32, "I32", 4, 9}, {Dtype::I16, "I16", 2, 5},   {Dtype::I8, "I8", 1, 2},
    {Dtype::U8, "U8", 1, 1},     {Dtype::BOOL, "BOOL", 1, 0},
};

const DtypeInfo& info(Dtype d) {
  for (const auto& i : kDtypes)
    if (i.dtype == d) return i;
  return kDtypes[0];  // unreachable: every enumerator is in the table
}

std::string le_u64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

uint64_t read_le_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// nlohmann::json keeps the last of duplicate keys silently; a file with two tensors of the same
// name is ambiguous, so the parser callback records the first duplicate it sees at any depth.
struct DuplicateFinder {
  struct Frame {
    std::set<std::string> keys;
    std::string current;
  };
  std::vector<Frame> frames;
  std::string duplicate;  // path of the first duplicate key, empty if none
  bool top_level = false;

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      frames.emplace_back();
    } else if (event == E::object_end) {
      if (!frames.empty()) frames.pop_back();
    } else if (event == E::key && !frames.empty() && parsed.is_string()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!frames.back().keys.insert(k).second && duplicate.empty()) {
        top_level = frames.size() == 1;
        for (size_t i = 0; i + 1 < frames.size(); ++i) duplicate += frames[i].current + ".";
        duplicate += k;
      }
      frames.back().current = k;
    }
    return true;
  }
};

std::string printable(const std::string& s) {
  // Names come from hostile files: keep error messages printable and short.
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

Status bad(const std::string& source, const std::string& what) {
  return data_loss("[safetensors] " + source + ": " + what);
}

Status bad_field(const std::string& source, const std::string& tensor, const std::string& field,
                 const std::string& what) {
  return bad(source, "tensor " + printable(tensor) + ", field '" + field + "': " + what);
}

// Non-negative integer from JSON that fits in uint64; nullopt for floats, negatives, others.
std::optional<uint64_t> as_u64(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

Result<TensorEntry> parse_entry(const std::string& source, const std::string& name, const nlohmann::json& j,
                                uint64_t data_size) {
  if (name.empty()) return bad(source, "a tensor has an empty name");
  if (!j.is_object()) return bad(source, "tensor " + printable(name) + ": entry must be an object, got " + j.type_name());
  for (const auto& [k, v] : j.items()) {
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      return bad_field(source, name, k, "unknown field (expected dtype, shape, data_offsets)");
  }
  for (const char* f : {"dtype", "shape", "data_offsets"})
    if (!j.contains(f)) return bad_field(source, name, f, "missing");

  TensorEntry e;
  e.name = name;
  const auto& jd = j.at("dtype");
  if (!jd.is_string()) return bad_field(source, name, "dtype", std::string("must be a string, got ") + jd.type_name());
  auto d = dtype_from_name(jd.get_ref<const std::string&>());
  if (!d)
    return bad_field(source, name, "dtype",
                     "unknown or unsupported dtype " + printable(jd.get<std::string>()) +
                         " (supported: F32 F16 BF16 F64 I64 I32 I16 I8 U8 BOOL)");
  e.dtype = *d;

  const auto& js = j.at("shape");
  if (!js.is_array()) return bad_field(source, name, "shape", std::string("must be a list, got ") + js.type_name());
  if (js.size() > kMaxSafetensorsRank)
    return bad_field(source, name, "shape",
                     "rank " + std::to_string(js.size()) + " is over the limit of " +
                         std::to_string(kMaxSafetensorsRank));
  uint64_t numel = 1;
  for (const auto& dim : js) {
    auto v = as_u64(dim);
    if (!v || *v > static_cast<uint64_t>(INT64_MAX))
      return bad_field(source, name, "shape", "must be a list of non-negative integers, got " + js.dump());
    e.shape.push_back(static_cast<int64_t>(*v));
    if (__builtin_mul_overflow(numel, *v, &numel))
      return bad_field(source, name, "shape", "element count of " + js.dump() + " overflows");
  }
  uint64_t n_bytes = 0;
  if (numel > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, info(e.dtype).size, &n_bytes) ||
      n_bytes > static_cast<uint64_t>(INT64_MAX))
    return bad_field(source, name, "shape", "byte size of " + js.dump() + " overflows");

  const auto& jo = j.at("data_offsets");
  std::optional<uint64_t> b, en;
  if (jo.is_array() && jo.size() == 2) {
    b = as_u64(jo[0]);
    en = as_u64(jo[1]);
  }
  if (!b || !en) return bad_field(source, name, "data_offsets", "must be [begin, end] non-negative integers, got " + jo.dump());
  if (*b > *en) return bad_field(source, name, "data_offsets", "begin > end in " + jo.dump());
  if (*en > data_size)
    return bad_field(source, name, "data_offsets",
                     "end " + std::to_string(*en) + " is beyond the data section of " + std::to_string(data_size) +
                         " bytes (file truncated?)");
  if (*en - *b != n_bytes)
    return bad_field(source, name, "data_offsets",
                     "span of " + std::to_string(*en - *b) + " bytes does not match shape " + js.dump() + " x " +
                         std::to_string(info(e.dtype).size) + " bytes = " + std::to_string(n_bytes));
  e.begin = *b;
  e.end = *en;
  return e;
}

}  // namespace

size_t dtype_size(Dtype dtype) { return info(dtype).size; }
std::string_view dtype_name(Dtype dtype) { return info(dtype).name; }

std::optional<Dtype> dtype_from_name(std::string_view name) {
  for (const auto& i : kDtypes)
    if (i.name == name) return i.dtype;
  return std::nullopt;
}

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated not to overflow by the parser / builder
  return n;
}

Result<SafetensorsHeader> parse_safetensors(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8)
    return bad(source, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  uint64_t header_len = read_le_u64(bytes.data());
  if (header_len > kMaxSafetensorsHeaderBytes)
    return bad(source, "header length " + std::to_string(header_len) + " is over the limit of " +
                           std::to_string(kMaxSafetensorsHeaderBytes) + " bytes (not a safetensors file?)");
  if (header_len > bytes.size() - 8)
    return bad(source, "header length " + std::to_string(header_len) + " is beyond the end of the file (" +
                           std::to_string(bytes.size()) + " bytes; truncated?)");
  std::string_view text = bytes.substr(8, header_len);

  DuplicateFinder dups;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end(), std::ref(dups), /*allow_exceptions=*/true,
                                   /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    return bad(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) return bad(source, std::string("header must be a JSON object, got ") + header.type_name());
  if (!dups.duplicate.empty())
    return bad(source, dups.top_level ? "duplicate tensor name " + printable(dups.duplicate)
                                      : "duplicate key " + printable(dups.duplicate));

  SafetensorsHeader out;
  out.data_offset = 8 + header_len;
  uint64_t data_size = bytes.size() - out.data_offset;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object())
        return bad(source, std::string("__metadata__ must be an object of strings, got ") + value.type_name());
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          return bad(source, "__metadata__ field " + printable(k) + " must be a string, got " + v.type_name());
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    MESHRL_ASSIGN_OR_RETURN(auto entry, parse_entry(source, name, value, data_size));
    out.tensors.push_back(std::move(entry));
  }

  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < out.tensors.size(); ++i) {
    const auto& prev = out.tensors[i - 1];
    const auto& cur = out.tensors[i];
    if (cur.begin < prev.end)
      return bad(source, "tensor " + printable(cur.name) + ", field 'data_offsets': bytes [" + std::to_string(cur.begin) +
                             ", " + std::to_string(cur.end) + ") overlap tensor " + printable(prev.name) + " [" +
                             std::to_string(prev.begin) + ", " + std::to_string(prev.end) + ")");
  }
  return out;
}

std::string serialize_safetensors_header(const std::vector<TensorEntry>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps insertion order, which is the reference writer's order.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = h["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  for (const auto& t : tensors) {
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = std::string(dtype_name(t.dtype));
    e["shape"] = t.shape;
    e["data_offsets"] = {t.begin, t.end};
    h[t.name] = std::move(e);
  }
  // Invalid UTF-8 is replaced rather than thrown here; build_safetensors_file refuses such names.
  std::string text = h.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  return le_u64(text.size()) + text;
}

Result<std::string> build_safetensors_file(const std::vector<TensorBytes>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  try {
    (void)nlohmann::json(metadata).dump();
  } catch (const nlohmann::json::exception&) {
    return invalid_argument("[safetensors] metadata is not valid UTF-8");
  }
  std::vector<const TensorBytes*> order;
  std::set<std::string_view> names;
  for (const auto& t : tensors) {
    if (t.name.empty()) return invalid_argument("[safetensors] cannot write a tensor with an empty name");
    if (t.name == "__metadata__") return invalid_argument("[safetensors] '__metadata__' is reserved, not a tensor name");
    if (!names.insert(t.name).second) return invalid_argument("[safetensors] duplicate tensor name " + printable(t.name));
    try {
      (void)nlohmann::json(t.name).dump();  // throws on invalid UTF-8, which JSON cannot carry
    } catch (const nlohmann::json::exception&) {
      return invalid_argument("[safetensors] tensor name " + printable(t.name) + " is not valid UTF-8");
    }
    uint64_t numel = 1, n_bytes = 0;
    for (int64_t d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
        return invalid_argument("[safetensors] tensor " + printable(t.name) + " has a bad shape");
    }
    if (t.shape.size() > kMaxSafetensorsRank || __builtin_mul_overflow(numel, dtype_size(t.dtype), &n_bytes) ||
        n_bytes != t.bytes.size())
      return invalid_argument("[safetensors] tensor " + printable(t.name) + ": " + std::to_string(t.bytes.size()) +
                              " bytes do not match its shape and dtype " + std::string(dtype_name(t.dtype)));
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const TensorBytes* a, const TensorBytes* b) {
    int ra = info(a->dtype).hf_rank, rb = info(b->dtype).hf_rank;
    return ra != rb ? ra > rb : a->name < b->name;
  });
  std::vector<TensorEntry> entries;
  uint64_t offset = 0;
  for (const auto* t : order) {
    entries.push_back({t->name, t->dtype, t->shape, offset, offset + t->bytes.size()});
    offset += t->bytes.size();
  }
  std::string file = serialize_safetensors_header(entries, metadata);
  file.reserve(file.size() + offset);
  for (const auto* t : order) file.append(t->bytes.data(), t->bytes.size());
  return file;
}

Status write_safetensors_raw(const std::filesystem::path& path, const std::vector<TensorBytes>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  MESHRL_ASSIGN_OR_RETURN(auto file, build_safetensors_file(tensors, metadata));
  return write_file_atomic(path, file);
}

}  // namespace meshrl::model

// The [mesh] section and the mesh run file. See mesh_config.h.
#include "mesh/mesh_config.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <variant>

#include <toml++/toml.h>

#include "core/file_io.h"
#include "mesh/update_format.h"
#include "rl/config_field.h"

namespace meshrl::mesh {
namespace {

using rl::FieldRef;
struct Field {
  const char* key;
  FieldRef ref;
};

// The single list of [mesh] keys: parsing, overrides and writing all walk it.
std::vector<Field> fields_of(MeshSection& m) {
  return {
      {"rounds", &m.rounds},           {"inner_steps", &m.inner_steps},
      {"mode", &m.mode},               {"quorum", &m.quorum},
      {"round_deadline_s", &m.round_deadline_s}, {"max_staleness", &m.max_staleness},
      {"outer_lr", &m.outer_lr},       {"outer_momentum", &m.outer_momentum},
      {"outer_nesterov", &m.outer_nesterov}, {"codec", &m.codec},
      {"broadcast_codec", &m.broadcast_codec},
      {"block_size", &m.block_size},   {"zstd_level", &m.zstd_level},
      {"int2_density", &m.int2_density}, {"int2_scale", &m.int2_scale},
      {"broadcast_int2_scale", &m.broadcast_int2_scale},
      {"lease_s", &m.lease_s},         {"heartbeat_s", &m.heartbeat_s},
      {"eval_every_rounds", &m.eval_every_rounds}, {"n_eval", &m.n_eval},
      {"overlap", &m.overlap},         {"seed", &m.seed},
      {"aggregator", &m.aggregator},   {"trim_fraction", &m.trim_fraction},
      {"clip_tau", &m.clip_tau},       {"clip_iters", &m.clip_iters},
      {"norm_bound_factor", &m.norm_bound_factor}, {"norm_window", &m.norm_window},
      {"max_updates_per_minute", &m.max_updates_per_minute},
      {"audit_rate", &m.audit_rate},   {"audit_samples", &m.audit_samples},
      {"audit_exclude_after", &m.audit_exclude_after}, {"audit_tolerance", &m.audit_tolerance},
      {"audit_deadline_s", &m.audit_deadline_s}, {"audit_private", &m.audit_private},
  };
}

std::string where(const std::string& source, const std::string& key) { return source + ": [mesh] " + key; }

Status set_from_toml(const Field& f, const toml::node& n, const std::string& source) {
  return rl::set_field_from_toml(f.ref, n, where(source, f.key));
}

Status set_from_text(const Field& f, const std::string& text, const std::string& source) {
  return rl::set_field_from_text(f.ref, text, where(source, f.key) + " (command line)");
}

}  // namespace

Status validate_mesh_section(const MeshSection& m, const std::string& s) {
  auto bad = [&](const char* key, const std::string& what, const std::string& got) {
    return invalid_argument(where(s, key) + " must be " + what + ", got " + got);
  };
  if (m.rounds < 1 || m.rounds > 1'000'000) return bad("rounds", "in [1, 1000000]", std::to_string(m.rounds));
  if (m.inner_steps < 1 || m.inner_steps > 100'000) return bad("inner_steps", "in [1, 100000]", std::to_string(m.inner_steps));
  if (m.mode != "sync" && m.mode != "async") return bad("mode", "sync or async", "\"" + m.mode + "\"");
  if (!(m.quorum > 0 && m.quorum <= 1)) return bad("quorum", "in (0, 1]", rl::format_double(m.quorum));
  if (!(m.round_deadline_s > 0)) return bad("round_deadline_s", "> 0", rl::format_double(m.round_deadline_s));
  if (m.max_staleness < 0 || m.max_staleness > 1000) return bad("max_staleness", "in [0, 1000]", std::to_string(m.max_staleness));
  if (!(m.outer_lr > 0 && m.outer_lr <= 10)) return bad("outer_lr", "in (0, 10]", rl::format_double(m.outer_lr));
  if (!(m.outer_momentum >= 0 && m.outer_momentum < 1)) return bad("outer_momentum", "in [0, 1)", rl::format_double(m.outer_momentum));
  // The wire format's own list of codec names (update_format.h).
  if (!codec_from_name(m.codec)) return bad("codec", "int8, int4, int2 or fp32", "\"" + m.codec + "\"");
  if (!m.broadcast_codec.empty() && !codec_from_name(m.broadcast_codec))
    return bad("broadcast_codec", "int8, int4, int2, fp32 or \"\" (the codec's)", "\"" + m.broadcast_codec + "\"");
  if (m.block_size < 1 || m.block_size > 65536) return bad("block_size", "in [1, 65536]", std::to_string(m.block_size));
  if (!(m.int2_density >= 0 && m.int2_density <= 1)) return bad("int2_density", "in [0, 1]", rl::format_double(m.int2_density));
  if (m.int2_density > 0 && m.codec != "int2")
    return bad("int2_density", "0 unless codec is \"int2\"", rl::format_double(m.int2_density) + " with codec \"" + m.codec + "\"");
  // int2_scale = "mean" without int2 updates is a mistake in the run file. broadcast_int2_scale
  // defaults to "mean", measured better for every int2 broadcast (quantize.h), so it is only
  // checked by name and is inert for other broadcast codecs.
  if (m.int2_scale != "absmax" && m.int2_scale != "mean") return bad("int2_scale", "absmax or mean", "\"" + m.int2_scale + "\"");
  if (m.int2_scale == "mean" && m.codec != "int2")
    return bad("int2_scale", "absmax unless codec is \"int2\"", "\"mean\" with codec \"" + m.codec + "\"");
  if (m.broadcast_int2_scale != "absmax" && m.broadcast_int2_scale != "mean")
    return bad("broadcast_int2_scale", "mean or absmax", "\"" + m.broadcast_int2_scale + "\"");
  if (m.zstd_level < 0 || m.zstd_level > 19) return bad("zstd_level", "in [0, 19]", std::to_string(m.zstd_level));
  if (!(m.lease_s > 0)) return bad("lease_s", "> 0", rl::format_double(m.lease_s));
  if (!(m.heartbeat_s > 0 && m.heartbeat_s < m.lease_s)) return bad("heartbeat_s", "in (0, lease_s)", rl::format_double(m.heartbeat_s));
  if (m.eval_every_rounds < 0) return bad("eval_every_rounds", ">= 0", std::to_string(m.eval_every_rounds));
  if (m.n_eval < 0 || m.n_eval > 100000) return bad("n_eval", "in [0, 100000]", std::to_string(m.n_eval));
  if (m.aggregator != "mean" && m.aggregator != "trimmed_mean" && m.aggregator != "median" && m.aggregator != "centered_clip")
    return bad("aggregator", "mean, trimmed_mean, median or centered_clip", "\"" + m.aggregator + "\"");
  if (!(m.trim_fraction >= 0 && m.trim_fraction < 0.5)) return bad("trim_fraction", "in [0, 0.5)", rl::format_double(m.trim_fraction));
  if (!(m.clip_tau >= 0 && std::isfinite(m.clip_tau))) return bad("clip_tau", ">= 0", rl::format_double(m.clip_tau));
  if (m.clip_iters < 1 || m.clip_iters > 100) return bad("clip_iters", "in [1, 100]", std::to_string(m.clip_iters));
  if (!(m.norm_bound_factor == 0 || (m.norm_bound_factor >= 1 && std::isfinite(m.norm_bound_factor))))
    return bad("norm_bound_factor", "0 (off) or >= 1", rl::format_double(m.norm_bound_factor));
  if (m.norm_window < 1 || m.norm_window > 100000) return bad("norm_window", "in [1, 100000]", std::to_string(m.norm_window));
  if (m.max_updates_per_minute < 0) return bad("max_updates_per_minute", ">= 0", std::to_string(m.max_updates_per_minute));
  if (!(m.audit_rate >= 0 && m.audit_rate <= 1)) return bad("audit_rate", "in [0, 1]", rl::format_double(m.audit_rate));
  if (m.audit_samples < 1 || m.audit_samples > 64) return bad("audit_samples", "in [1, 64]", std::to_string(m.audit_samples));
  if (m.audit_exclude_after < 1) return bad("audit_exclude_after", ">= 1", std::to_string(m.audit_exclude_after));
  if (!(m.audit_tolerance >= 0 && std::isfinite(m.audit_tolerance)))
    return bad("audit_tolerance", ">= 0", rl::format_double(m.audit_tolerance));
  if (!(m.audit_deadline_s > 0 && std::isfinite(m.audit_deadline_s)))
    return bad("audit_deadline_s", "> 0", rl::format_double(m.audit_deadline_s));
  return Status::ok();
}

Result<MeshRunConfig> parse_mesh_run_config(const std::string& text, const std::string& source,
                                            const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return invalid_argument(source + ":" + std::to_string(e.source().begin.line) + ":" +
                            std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  MeshRunConfig c;
  auto fields = fields_of(c.mesh);
  if (const toml::node* mesh = root.get("mesh")) {
    if (!mesh->is_table()) return invalid_argument(source + ": 'mesh' must be a [mesh] section table");
    for (auto&& [k, v] : *mesh->as_table()) {
      const std::string key(k.str());
      const Field* f = nullptr;
      for (const Field& x : fields)
        if (key == x.key) f = &x;
      if (!f) return invalid_argument(source + ": [mesh] unknown key '" + key + "'; see configs/README.md");
      MESHRL_RETURN_IF_ERROR(set_from_toml(*f, v, source));
    }
    root.erase("mesh");
  }
  // Split overrides: --mesh.* here, the rest to the run config.
  std::vector<std::string> run_overrides;
  for (size_t i = 0; i < overrides.size(); ++i) {
    std::string a = overrides[i];
    if (!rl::is_valid_utf8(a)) return invalid_argument("command line: an override is not valid UTF-8");
    if (a.rfind("--", 0) == 0) a = a.substr(2);
    if (a.rfind("mesh.", 0) != 0) {
      run_overrides.push_back(overrides[i]);
      continue;
    }
    const size_t eq = a.find('=');
    if (eq == std::string::npos) return invalid_argument("command line: '" + overrides[i] + "' is not an override; write --mesh.key=value");
    const std::string key = a.substr(5, eq - 5), value = a.substr(eq + 1);
    const Field* f = nullptr;
    for (const Field& x : fields)
      if (key == x.key) f = &x;
    if (!f) return invalid_argument(source + ": [mesh] unknown key '" + key + "' (command line); see configs/README.md");
    MESHRL_RETURN_IF_ERROR(set_from_text(*f, value, source));
  }
  MESHRL_RETURN_IF_ERROR(validate_mesh_section(c.mesh, source));
  // The rest is an ordinary run file; re-serialising it loses line numbers only for range errors,
  // which name section and key anyway (syntax errors were reported above with their line).
  std::ostringstream os;
  // Basic strings only (no flags): toml++'s default would write "\n" as a multi-line literal whose
  // first newline TOML readers trim (see rl/run_config.cpp), so a stop string would not read back.
  os << toml::toml_formatter(root, toml::format_flags::none);
  MESHRL_ASSIGN_OR_RETURN(c.run, rl::parse_run_config(os.str(), source, run_overrides));
  return c;
}

Result<MeshRunConfig> load_mesh_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  auto text = read_file(path, uint64_t{1} << 20);
  if (!text.is_ok()) return Status(text.status().code(), "[run config] " + text.status().message());
  return parse_mesh_run_config(text.value(), path.filename().string(), overrides);
}

nlohmann::json mesh_section_to_json(const MeshSection& m) {
  MeshSection copy = m;
  nlohmann::json j = nlohmann::json::object();
  for (const Field& f : fields_of(copy)) std::visit([&](auto* p) { j[f.key] = *p; }, f.ref);
  return j;
}

std::string mesh_run_config_to_toml(const MeshRunConfig& c) {
  std::ostringstream os;
  os << rl::run_config_to_toml(c.run) << "\n[mesh]\n";
  MeshSection copy = c.mesh;
  for (const Field& f : fields_of(copy)) {
    os << f.key << " = ";
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, std::string>) os << nlohmann::json(*p).dump();
          else if constexpr (std::is_same_v<T, bool>) os << (*p ? "true" : "false");
          else if constexpr (std::is_same_v<T, double>) {
            std::string d = rl::format_double(*p);
            if (d.find_first_of(".eEn") == std::string::npos) d += ".0";
            os << d;
          } else os << *p;
        },
        f.ref);
    os << "\n";
  }
  return os.str();
}

}  // namespace meshrl::mesh

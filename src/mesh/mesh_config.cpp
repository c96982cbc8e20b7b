// The [mesh] section and the mesh run file. See mesh_config.h.
#include "mesh/mesh_config.h"

#include <cmath>
#include <sstream>

#include "core/file_io.h"
#include "core/toml_document.h"
#include "mesh/update_format.h"

namespace meshrl::mesh {
namespace {

using config::above;
using config::at_least;
using config::closed;
using config::closed_open;
using config::Field;
using config::open_closed;

// The single list of [mesh] keys: parsing, overrides, checks and writing all walk it. Its order is
// the order of the [mesh] lines in a manifest's run_config_toml (section_lines), which is hashed.
config::Section mesh_section(MeshSection& m) {
  return {
      "mesh",
      {
          Field("rounds", &m.rounds, "versions the coordinator publishes after the initial one").in(closed(1, 1'000'000)),
          Field("inner_steps", &m.inner_steps, "H: GRPO steps a node runs between two updates").in(closed(1, 100'000)),
          Field("mode", &m.mode, "sync: rounds close at quorum or deadline; async: every update applied on arrival").values({"sync", "async"}),
          Field("quorum", &m.quorum, "sync: share of online nodes whose fresh update closes a round").in(open_closed(0, 1)),
          Field("round_deadline_s", &m.round_deadline_s, "sync: close with what has arrived this long after the round opened").in(above(0)),
          Field("max_staleness", &m.max_staleness, "updates on base versions older than current - max_staleness are rejected").in(closed(0, 1000)),
          Field("outer_lr", &m.outer_lr, "outer Nesterov SGD learning rate").in(open_closed(0, 10)),
          Field("outer_momentum", &m.outer_momentum, "outer Nesterov SGD momentum").in(closed_open(0, 1)),
          Field("outer_nesterov", &m.outer_nesterov, "Nesterov momentum in the outer step"),
          Field("codec", &m.codec, "pseudo-gradients and broadcasts: int8 | int4 | int2 | fp32"),
          Field("broadcast_codec", &m.broadcast_codec, "the broadcast's own codec when set; "" = codec"),
          Field("block_size", &m.block_size, "values per quantisation scale").in(closed(1, 65536)),
          Field("zstd_level", &m.zstd_level, "0 = no zstd").in(closed(0, 19)),
          Field("int2_density", &m.int2_density, "int2: 0 = absmax ternary; (0, 1] = each block's largest share only").in(closed(0, 1)),
          Field("int2_scale", &m.int2_scale, "int2 updates: absmax | mean").values({"absmax", "mean"}),
          Field("broadcast_int2_scale", &m.broadcast_int2_scale, "int2 broadcasts: mean | absmax").values({"mean", "absmax"}),
          Field("lease_s", &m.lease_s, "a node silent this long is dropped").in(above(0)),
          Field("heartbeat_s", &m.heartbeat_s, "how often nodes renew their lease, in (0, lease_s)"),
          Field("eval_every_rounds", &m.eval_every_rounds, "coordinator evaluates held-out pass@1 every N versions; 0 = never").in(at_least(0)),
          Field("n_eval", &m.n_eval, "problems in those evaluations; 0 = [eval] n_eval").in(closed(0, 100000)),
          Field("overlap", &m.overlap, "async: nodes keep training while an update is in flight"),
          Field("seed", &m.seed, "run seed: node seeds derive from (seed, node index)"),
          Field("aggregator", &m.aggregator, "mean | trimmed_mean | median | centered_clip").values({"mean", "trimmed_mean", "median", "centered_clip"}),
          Field("trim_fraction", &m.trim_fraction, "trimmed_mean: share dropped at each end per coordinate").in(closed_open(0, 0.5)),
          Field("clip_tau", &m.clip_tau, "centered_clip: radius; 0 = the median distance to the center").in(at_least(0)),
          Field("clip_iters", &m.clip_iters, "centered_clip: iterations").in(closed(1, 100)),
          Field("norm_bound_factor", &m.norm_bound_factor, "refuse an update with norm > factor x the recent median; 0 = off"),
          Field("norm_window", &m.norm_window, "recent accepted norms that median is over").in(closed(1, 100000)),
          Field("max_updates_per_minute", &m.max_updates_per_minute, "per node; 0 = no limit").in(at_least(0)),
          Field("audit_rate", &m.audit_rate, "share of updates whose claimed rewards are re-scored; 0 = off").in(closed(0, 1)),
          Field("audit_samples", &m.audit_samples, "rollouts re-scored per audit").in(closed(1, 64)),
          Field("audit_exclude_after", &m.audit_exclude_after, "failed audits after which a node's updates are refused").in(at_least(1)),
          Field("audit_tolerance", &m.audit_tolerance, "|claimed - re-scored reward| allowed").in(at_least(0)),
          Field("audit_deadline_s", &m.audit_deadline_s, "an audit unanswered this long counts as failed").in(above(0)),
          Field("audit_private", &m.audit_private, "also audit jsonl/command tasks (every node must hold the same file)"),
      },
      "; see configs/README.md",
  };
}

}  // namespace

Status validate_mesh_section(const MeshSection& section, const std::string& source) {
  MeshSection m = section;  // the table needs mutable pointers; checking a copy keeps `section` const
  const config::Scope scope{source, "mesh"};
  MESHRL_RETURN_IF_ERROR(config::check_fields(mesh_section(m), scope));
  // What a range cannot say: names owned by the wire format, and relations between keys.
  auto bad = [&](const char* key, const std::string& what, const std::string& got) {
    return invalid_argument(scope.name(key) + " must be " + what + ", got " + got);
  };
  // The wire format's own list of codec names (update_format.h).
  if (!codec_from_name(m.codec)) return bad("codec", "int8, int4, int2 or fp32", "\"" + m.codec + "\"");
  if (!m.broadcast_codec.empty() && !codec_from_name(m.broadcast_codec))
    return bad("broadcast_codec", "int8, int4, int2, fp32 or \"\" (the codec's)", "\"" + m.broadcast_codec + "\"");
  if (m.int2_density > 0 && m.codec != "int2")
    return bad("int2_density", "0 unless codec is \"int2\"", config::format_number(m.int2_density) + " with codec \"" + m.codec + "\"");
  // int2_scale = "mean" without int2 updates is a mistake in the run file. broadcast_int2_scale
  // defaults to "mean", measured better for every int2 broadcast (quantize.h), so it is only
  // checked by name and is inert for other broadcast codecs.
  if (m.int2_scale == "mean" && m.codec != "int2")
    return bad("int2_scale", "absmax unless codec is \"int2\"", "\"mean\" with codec \"" + m.codec + "\"");
  if (!(m.heartbeat_s > 0 && m.heartbeat_s < m.lease_s)) return bad("heartbeat_s", "in (0, lease_s)", config::format_number(m.heartbeat_s));
  if (!(m.norm_bound_factor == 0 || m.norm_bound_factor >= 1))
    return bad("norm_bound_factor", "0 (off) or >= 1", config::format_number(m.norm_bound_factor));
  return Status::ok();
}

Result<MeshRunConfig> parse_mesh_run_config(const std::string& text, const std::string& source,
                                            const std::vector<std::string>& overrides) {
  // One document: the run file's sections and [mesh] are read from the same parse, and an
  // override of any of them goes to its own table.
  MeshRunConfig c;
  std::vector<config::Section> sections = rl::run_sections(c.run);
  sections.push_back(mesh_section(c.mesh));
  MESHRL_RETURN_IF_ERROR(config::read_config(text, source, overrides, sections));
  MESHRL_RETURN_IF_ERROR(rl::validate_run_config(c.run, source));
  MESHRL_RETURN_IF_ERROR(validate_mesh_section(c.mesh, source));
  return c;
}

Result<MeshRunConfig> load_mesh_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  auto text = read_file(path, uint64_t{1} << 20);
  if (!text.is_ok()) return Status(text.status().code(), "[run config] " + text.status().message());
  return parse_mesh_run_config(text.value(), path.filename().string(), overrides);
}

nlohmann::json mesh_section_to_json(const MeshSection& m) {
  MeshSection copy = m;
  return config::to_json(mesh_section(copy));
}

std::string mesh_run_config_to_toml(const MeshRunConfig& c) {
  MeshSection copy = c.mesh;
  return rl::run_config_to_toml(c.run) + "\n" + config::section_lines(mesh_section(copy));
}

}  // namespace meshrl::mesh

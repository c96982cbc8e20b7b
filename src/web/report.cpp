#include "web/report.h"

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "mesh/mesh_config.h"
#include "store/ledger.h"
#include "web/coordinator_snapshot.h"
#include "web/embedded_assets.h"
#include "web/ledger_snapshot.h"
#include "web/report_charts.h"
#include "web/state_json.h"
#include "web/version_log.h"

namespace meshrl::web {

namespace fs = std::filesystem;

namespace {

// Replaces the one occurrence of `marker` in the template; a missing marker is a build mistake.
Status fill(std::string& html, const std::string& marker, const std::string& with) {
  const size_t at = html.find(marker);
  if (at == std::string::npos) return Status(StatusCode::kInternal, "[report] template lacks " + marker);
  html.replace(at, marker.size(), with);
  return Status::ok();
}

// Text inside <script>: "</" would end the element early (a node named "</script>" in the JSON).
std::string script_safe(std::string s) {
  for (size_t at = 0; (at = s.find("</", at)) != std::string::npos; at += 3) s.replace(at, 2, "<\\/");
  return s;
}

Result<nlohmann::json> read_json(const fs::path& file) {
  MESHRL_ASSIGN_OR_RETURN(std::string text, read_file(file, 64u << 20));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid_argument("[report] " + file.string() + " is not JSON");
  return j;
}

}  // namespace

Result<ReportFiles> write_report(const fs::path& run_dir, fs::path out) {
  fs::path coord = run_dir;
  if (!fs::exists(coord / "ledger.sqlite") && fs::exists(run_dir / "coordinator" / "ledger.sqlite")) coord = run_dir / "coordinator";
  if (!fs::exists(coord / "ledger.sqlite"))
    return invalid_argument("[report] " + run_dir.string() + " has no ledger.sqlite (nor coordinator/ledger.sqlite): is it a run directory?");
  MESHRL_ASSIGN_OR_RETURN(nlohmann::json manifest, read_json(coord / "manifest.json"));
  if (!manifest.contains("run_config_toml") || !manifest["run_config_toml"].is_string())
    return invalid_argument("[report] " + (coord / "manifest.json").string() + " lacks run_config_toml");
  MESHRL_ASSIGN_OR_RETURN(mesh::MeshRunConfig cfg, mesh::parse_mesh_run_config(manifest["run_config_toml"].get<std::string>(),
                                                                               (coord / "manifest.json").string()));
  MESHRL_ASSIGN_OR_RETURN(store::Ledger ledger, store::Ledger::open(coord / "ledger.sqlite"));
  const VersionLog log(coord / "metrics.jsonl");
  // Every version: the report is written once, and its charts show the whole run.
  RunSnapshot s = ledger_snapshot(ledger, run_shape(cfg.mesh, manifest.value("param_count", int64_t{0})), log.points());
  s.run_id = manifest.value("run_id", "");

  nlohmann::json summary;
  for (const fs::path& f : {run_dir / "summary.json", coord / "summary.json"}) {
    if (!fs::exists(f)) continue;
    MESHRL_ASSIGN_OR_RETURN(summary, read_json(f));
    break;
  }
  const nlohmann::json report = {{"state", state_json(s)},
                                 {"summary", summary},
                                 {"settings", {{"mesh", mesh::mesh_section_to_json(cfg.mesh)},
                                               {"run_config_toml", manifest["run_config_toml"]},
                                               {"model_spec", manifest.value("model_spec", "")},
                                               {"param_count", s.param_count}}}};

  std::string html(find_asset("report.html")->text());
  MESHRL_RETURN_IF_ERROR(fill(html, "/*@UPLOT_CSS@*/", std::string(find_asset("uPlot.min.css")->text())));
  MESHRL_RETURN_IF_ERROR(fill(html, "/*@DASHBOARD_CSS@*/", std::string(find_asset("dashboard.css")->text())));
  MESHRL_RETURN_IF_ERROR(fill(html, "/*@UPLOT_JS@*/", script_safe(std::string(find_asset("uPlot.iife.min.js")->text()))));
  MESHRL_RETURN_IF_ERROR(fill(html, "/*@CHARTS_JS@*/", script_safe(std::string(find_asset("charts.js")->text()))));
  MESHRL_RETURN_IF_ERROR(fill(html, "/*@REPORT_JSON@*/null", script_safe(report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))));
  if (out.empty()) out = run_dir / "report.html";
  MESHRL_RETURN_IF_ERROR(write_file_atomic(out, html));
  ReportFiles files{out, {}};
  for (const ReportChart& c : report_charts(s)) {
    fs::path svg = out.parent_path() / (out.stem().string() + "-" + c.key + ".svg");
    MESHRL_RETURN_IF_ERROR(write_file_atomic(svg, c.svg));
    files.svgs.push_back(std::move(svg));
  }
  return files;
}

}  // namespace meshrl::web

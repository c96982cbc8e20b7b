// `meshrl report RUN_DIR [--out FILE]`
// Writes a self-contained HTML report of a run (charts, settings, nodes, before/after pass@1)
// from its run directory: a coordinator's (--run-dir) or a demo's, and its charts as SVG files
// beside it. See src/web/report.h.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "web/report.h"

namespace meshrl::cli {

namespace {

struct ReportArgs {
  std::string run_dir;
  std::string out;
};

}  // namespace

void add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "write a self-contained HTML report of a run directory, and its charts as SVG");
  cmd->add_option("run_dir", a->run_dir, "coordinator or demo run directory")->required();
  cmd->add_option("--out", a->out, "output file (default RUN_DIR/report.html)");
  cmd->callback([a] {
    const auto files = web::write_report(a->run_dir, a->out).value();
    std::printf("report: %s\n", files.html.c_str());
    for (const auto& svg : files.svgs) std::printf("chart: %s\n", svg.c_str());
  });
}

}  // namespace meshrl::cli

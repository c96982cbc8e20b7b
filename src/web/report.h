// `meshrl report RUN_DIR`: one self-contained HTML file (no network, no files beside it: the chart
// library, styles and data are inlined) with the dashboard's charts, the run's settings, its
// nodes and, when the run wrote a summary.json, held-out pass@1 before and after. RUN_DIR is a
// coordinator's run directory (ledger.sqlite) or a demo's (its coordinator/ folder is used).
// Beside it, the same charts as SVG files (report_charts.h): report-reward.svg, report-pass_at_1.svg,
// report-bytes.svg, report-staleness.svg (named after the HTML file's stem).
// Reads the ledger, metrics.jsonl, manifest.json and summary.json; writes only the report files.
#pragma once

#include <filesystem>
#include <vector>

#include "core/status.h"

namespace meshrl::web {

struct ReportFiles {
  std::filesystem::path html;
  std::vector<std::filesystem::path> svgs;
};

// Writes the report to `out` (empty: RUN_DIR/report.html) and its SVG charts beside it.
Result<ReportFiles> write_report(const std::filesystem::path& run_dir, std::filesystem::path out = {});

}  // namespace meshrl::web

// `meshrl report RUN_DIR`: one self-contained HTML file (no network, no files beside it: the chart
// library, styles and data are inlined) with the dashboard's charts, the run's settings, its
// nodes and, when the run wrote a summary.json, held-out pass@1 before and after. RUN_DIR is a
// coordinator's run directory (ledger.sqlite) or a demo's (its coordinator/ folder is used).
// Reads the ledger, metrics.jsonl, manifest.json and summary.json; writes only the report.
#pragma once

#include <filesystem>

#include "core/status.h"

namespace meshrl::web {

// Writes the report to `out` (empty: RUN_DIR/report.html) and returns its path.
Result<std::filesystem::path> write_report(const std::filesystem::path& run_dir, std::filesystem::path out = {});

}  // namespace meshrl::web

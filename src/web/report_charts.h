// The charts of `meshrl report` as SVG files (svg_chart.h), for pasting into a paper, a README or
// a slide where the HTML report's interactive charts cannot go: reward per version, held-out
// pass@1, bytes on the wire against the fp32 data-parallel equivalent (cumulative, log scale) and
// the staleness histogram. The same series as the dashboard's (web/src/charts.js): committed
// versions (>= 1) on x; pass@1 only where the run evaluated. Knows nothing about files.
#pragma once

#include <string>
#include <vector>

#include "web/run_snapshot.h"

namespace meshrl::web {

struct ReportChart {
  std::string key;  // reward | pass_at_1 | bytes | staleness (the file is <stem>-<key>.svg)
  std::string svg;
};

std::vector<ReportChart> report_charts(const RunSnapshot& s);

}  // namespace meshrl::web

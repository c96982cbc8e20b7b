// Renders a RunSnapshot in the Prometheus text exposition format (version 0.0.4): counters end in
// _total, bytes are in bytes, every family has HELP and TYPE lines, label values are escaped.
// The counters are read from the ledger where it has them, so a scrape agrees with ledger.sqlite.
#pragma once

#include <string>

#include "web/prometheus_family.h"
#include "web/run_snapshot.h"

namespace meshrl::web {

std::string prometheus_text(const RunSnapshot& s);

}  // namespace meshrl::web

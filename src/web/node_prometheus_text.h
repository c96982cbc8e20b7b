// A node's /metrics (`meshrl node --http PORT`): its NodeMetrics counters in the Prometheus text
// format, every sample labelled node="NAME" so that scrapes of several nodes sum and compare.
// Names are the node's view (uploaded = sent to the coordinator, downloaded = received from it),
// distinct from the coordinator's meshrl_node_bytes_sent_total{node} (sent *to* the node).
#pragma once

#include <string>

#include "mesh/node_metrics.h"

namespace meshrl::web {

std::string node_prometheus_text(const mesh::NodeCounters& c);

}  // namespace meshrl::web

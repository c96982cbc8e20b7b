// A RunSnapshot written out by hand (two rounds, six updates, two nodes, one name needing
// escapes), for the tests of what src/web renders from a snapshot.
#pragma once

#include "web/run_snapshot.h"

namespace meshrl::web::testing {

inline RunSnapshot two_round_snapshot() {
  RunSnapshot s;
  s.run_id = "run-1";
  s.mode = "sync";
  s.version = 2;
  s.rounds_by_closed_by = {{"quorum", 1}, {"deadline", 1}};
  s.updates = {{{"applied", ""}, 5}, {{"rejected", "stale"}, 1}};
  s.ledger_update_bytes = 6000;
  s.staleness_le = {0, 1};
  s.staleness_bucket_counts = {3, 1, 1};  // staleness 0, 0, 0, 1, 4
  s.staleness_sum = 5;
  s.staleness_count = 5;
  NodeView a;
  a.name = "pa\"ris";
  a.state = "online";
  a.version_held = 2;
  NodeView b;
  b.name = "dublin";
  b.state = "dropped";
  s.nodes = {a, b};
  return s;
}

}  // namespace meshrl::web::testing

// The part of a RunSnapshot that the ledger alone knows: committed rounds, every update and what
// became of it (counters, staleness histogram, per-node counts), the data-parallel equivalent per
// version, the latest node events. Used live (coordinator_snapshot.h adds membership and byte
// counts) and after the fact (`meshrl report` on a run directory). Read-only.
//
// Bounded whatever the run's length: counts come from SQL aggregates (store::Ledger's tallies),
// never from reading every row, only the latest kEventsShown events are read, and every text from
// the ledger is cut to kTextShownBytes. What grows is the number of nodes and the versions the
// caller passes in (coordinator_snapshot.h thins those).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/ledger.h"
#include "web/run_snapshot.h"

namespace meshrl::web {

inline constexpr int64_t kEventsShown = 40;
inline constexpr size_t kTextShownBytes = 256;

// What the snapshot needs of the run's [mesh] section and model.
struct RunShape {
  std::string mode;
  int64_t rounds = 0;
  double lease_s = 0;
  int64_t inner_steps = 0;  // H per update
  int64_t param_count = 0;
};

// versions: the run's VersionLog points, ascending (their bytes_dataparallel is filled here). Nodes get a
// state from their last ledger event (leave -> left, lease_expired -> dropped, else online); a
// live caller overrides it from the coordinator's leases.
RunSnapshot ledger_snapshot(const store::Ledger& ledger, const RunShape& run, std::vector<VersionPoint> versions);

// A short label from a fixed set for a rejection reason (free text with numbers in it): its typed
// code (replay, rate_limited, audit_failed, ...; "finished" is run_finished) when it starts with
// one, else stale, future_base, run_finished, bad_samples, lost_payload or invalid_payload by its
// words. The same rules classify in SQL (update_reason_classes), so both always agree.
std::string update_reason_class(const std::string& reason);
const store::Ledger::ReasonClasses& update_reason_classes();

// `s` cut to at most max_bytes on a UTF-8 character boundary, "..." marking a cut.
std::string bounded_text(std::string s, size_t max_bytes = kTextShownBytes);

}  // namespace meshrl::web

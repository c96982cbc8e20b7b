// TEST-ONLY crash injection. With MESHRL_FAULT="PHASE:ROUND" in its environment a process
// SIGKILLs itself (no cleanup, no flush, no destructors: what an OOM kill or a power cut leaves)
// the first time it reaches fault_point(PHASE, ROUND). The fault-injection tests
// (tests/integration/test_faults.py) crash the coordinator at exact points of its commit sequence
// and check what `meshrl coordinator --resume` recovers. Unset, which is every real run, a call
// costs one load of a cached flag and a not-taken branch.
//
// The coordinator's phases for round R (the round that builds version R), in the order it meets them:
//   mid_upload      an update on base R-1: its header and first chunk read, the rest not, nothing
//                   decoded or stored (src/rpc; the tiny model's update is one chunk, so "the rest"
//                   is then the end of the stream and the submit)
//   after_ack       the round is about to close: its updates are spooled, in the ledger as
//                   received and acknowledged, none aggregated into a version yet
//   mid_aggregate   the round's updates averaged and applied to the in-memory weights, nothing
//                   of it on disk
//   before_persist  version R's weights and hash computed, its folder not started
//   mid_persist     versions/.tmp-v-R/weights.safetensors written, meta.json and the rename not
//                   (src/store)
//   before_commit   versions/v-R complete and renamed into place, the ledger not told (an orphan)
//   after_commit    the ledger made R current; spool cleanup, broadcast and announcement not done
// Before after_commit a resumed coordinator must restart at R-1 and redo the round from the spool;
// from after_commit on, at R.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace meshrl {

namespace fault_detail {
// Checks the PHASE:ROUND spec (a malformed one or an unknown phase ends the process with a
// message: a typo must not silently test nothing) and raises SIGKILL when it names this point.
void reached(const char* phase, int64_t round);
inline bool armed() {
  static const bool a = std::getenv("MESHRL_FAULT") != nullptr;
  return a;
}
}  // namespace fault_detail

inline void fault_point(const char* phase, int64_t round) {
  if (fault_detail::armed()) [[unlikely]]
    fault_detail::reached(phase, round);
}

}  // namespace meshrl

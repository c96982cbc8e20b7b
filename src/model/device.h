// Device and thread selection for libtorch. Knows nothing about models.
#pragma once

#include <string>

#include "core/status.h"

namespace c10 { struct Device; }

namespace meshrl::model {

// "auto" picks cuda, then mps, then cpu, as this libtorch build supports them; "cpu", "cuda",
// "mps" ask for one and fail with a clear message when this build or machine lacks it.
Result<std::string> resolve_device(const std::string& requested);

// Sets libtorch's intra-op threads (n >= 1). Use 1 when several meshrl processes share a machine:
// OpenMP threads spin-wait, and two busy processes on two cores run 6-20x slower at 2 threads.
void set_threads(int n_threads);

}  // namespace meshrl::model

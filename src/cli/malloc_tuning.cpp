// See malloc_tuning.h.
#include "cli/malloc_tuning.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace meshrl::cli {

void tune_malloc_for_training() {
#if defined(__GLIBC__)
  const char* off = std::getenv("MESHRL_MALLOC_TUNE");
  if (off && std::strcmp(off, "0") == 0) return;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) return;
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  mallopt(M_TOP_PAD, 64 * 1024 * 1024);  // grow the heap in large steps: fewer brk calls and faults
#endif
}

}  // namespace meshrl::cli

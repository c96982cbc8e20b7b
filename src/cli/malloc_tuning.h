// glibc's malloc serves blocks above a dynamic threshold (128 KiB up to 32 MiB) with mmap and gives
// them back with munmap on free, and trims the heap's top above 128 KiB. A training step allocates
// and frees the same activation-sized tensors (hundreds of KiB to tens of MiB) every step, so each
// step faulted them in again: ~15% of a `tiny` train step's cycles were in the kernel's page-fault
// path (BENCHMARKS.md, "train"). Keeping them in the heap removes that.
#pragma once

namespace meshrl::cli {

// On glibc: blocks up to 32 MiB (glibc's largest mmap threshold) come from the heap, and the heap
// keeps up to 1 GiB of freed memory instead of trimming it (RSS stays at the step's peak, which
// the next step needs again). Skipped when MESHRL_MALLOC_TUNE=0 or when the user set glibc's own
// MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_. Elsewhere a no-op.
void tune_malloc_for_training();

}  // namespace meshrl::cli

// OpenBLAS picks its kernels from the CPU model when it loads. Releases older than the CPU
// (Debian 12's 0.3.21 on Sapphire Rapids, reported as a generic "Intel Xeon Processor") fall back
// to the Prescott (SSE3) kernels, 5x slower for sgemm than the CPU can do (BENCHMARKS.md, "train").
// OPENBLAS_CORETYPE fixes that but is read before main, so the only way for the binary to apply it
// is to re-exec itself once with the variable set. Linux + OpenBLAS only; elsewhere a no-op.
#pragma once

namespace meshrl::cli {

// When OpenBLAS reports a generic fallback core (Prescott, Core2, ...) while the CPU supports
// AVX-512 (-> SkylakeX) or AVX2 + FMA (-> Haswell), sets OPENBLAS_CORETYPE and re-execs
// /proc/self/exe with the same argv (returns only if that is not needed or fails). On by default;
// MESHRL_BLAS_AUTO=0 turns it off; a user's own OPENBLAS_CORETYPE wins.
void reexec_with_better_blas_kernels(char** argv);

}  // namespace meshrl::cli

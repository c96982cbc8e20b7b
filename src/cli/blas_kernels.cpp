#include "cli/blas_kernels.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
#include <dlfcn.h>
#include <unistd.h>
#define MESHRL_BLAS_REEXEC 1
#endif

namespace meshrl::cli {

void reexec_with_better_blas_kernels(char** argv) {
#ifdef MESHRL_BLAS_REEXEC
  // MESHRL_BLAS_AUTO=0 keeps whatever kernels OpenBLAS picked (to measure the difference).
  const char* want = std::getenv("MESHRL_BLAS_AUTO");
  if (want && std::strcmp(want, "0") == 0) return;
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  using CoreName = char* (*)();
  auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!corename) return;  // not OpenBLAS (MKL, reference BLAS): nothing to fix
  const char* core = corename();
  if (!core) return;
  // OpenBLAS's names for the generic fallbacks it uses on a CPU it does not know.
  const std::string_view c(core);
  const bool fallback = c == "Prescott" || c == "prescott" || c == "Core2" || c == "core2" || c == "Penryn" || c == "Nehalem" ||
                        c == "nehalem" || c == "Katmai" || c == "Coppermine" || c == "Northwood";
  if (!fallback) return;
  __builtin_cpu_init();
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  if (!better) return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the slow kernels
  unsetenv("OPENBLAS_CORETYPE");
#else
  (void)argv;
#endif
}

}  // namespace meshrl::cli

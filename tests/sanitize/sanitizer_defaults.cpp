// Default runtime options of the sanitizer builds (MESHRL_SANITIZE), compiled into every executable
// of such a build (cmake/sanitize.cmake). Built in rather than set by the test runner so that every
// way of starting a sanitized binary gets them: ctest, the Python integration harnesses (which build
// their children's environment themselves) and a person at a shell. ASAN_OPTIONS, UBSAN_OPTIONS,
// LSAN_OPTIONS and TSAN_OPTIONS in the environment are parsed after these and win.
//
// MESHRL_SANITIZE_DIR is tests/sanitize/ (absolute), where the suppression files live.

#ifndef MESHRL_SANITIZE_DIR
#error "sanitizer_defaults.cpp is compiled only by sanitize builds, which define MESHRL_SANITIZE_DIR"
#endif

extern "C" {

#if defined(__SANITIZE_ADDRESS__)
// check_initialization_order / strict_init_order: catch static-init order bugs across our libraries.
// detect_stack_use_after_return stays off: it doubles stack use in the torch-heavy tests for a bug
// class our code (no returned pointers to locals in async callbacks) has not shown.
const char* __asan_default_options() {
  return "check_initialization_order=1:strict_init_order=1:detect_leaks=1:halt_on_error=1";
}
const char* __lsan_default_options() { return "suppressions=" MESHRL_SANITIZE_DIR "/lsan.supp:print_suppressions=0"; }
#endif

#if defined(__SANITIZE_ADDRESS__)  // UBSan always comes with ASan here (address,undefined)
// The build already makes UB fatal (-fno-sanitize-recover); the stack says where it happened.
const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
#endif

#if defined(__SANITIZE_THREAD__)
// second_deadlock_stack: lock-order reports show both acquisitions, not only the second.
// ignore_noninstrumented_modules: memcpy, read() and other intercepted calls made from inside the
// prebuilt libraries (gRPC, protobuf, abseil, OpenSSL, torch) are not tracked. Their own locking is
// invisible to TSan, so every message buffer gRPC filled and protobuf copied looked like a race;
// reporting and suppressing each one slowed a 1 MiB download enough to time out every TLS test.
const char* __tsan_default_options() {
  return "suppressions=" MESHRL_SANITIZE_DIR
         "/tsan.supp:second_deadlock_stack=1:halt_on_error=1:print_suppressions=0:ignore_noninstrumented_modules=1";
}
#endif

}  // extern "C"

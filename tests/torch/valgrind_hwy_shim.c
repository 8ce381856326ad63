/*
 * valgrind_hwy_shim.c — preloaded only by run_sanitized.sh --valgrind.
 * Debian's libhwy (pulled into every torch process through libtorch_cpu's
 * image libraries) measures its timer with rdtscp in a static initialiser.
 * This VM's CPU runs rdtscp but does not advertise it, so valgrind, which
 * emulates only what cpuid reports, stops the process with SIGILL before
 * torch is imported.  The timer resolution is only a benchmarking hint for
 * highway; a fixed value is harmless for the tests.
 */
#include <stdint.h>

uint64_t _ZN3hwy8platform15TimerResolutionEv(void); /* hwy::platform::TimerResolution() */

uint64_t _ZN3hwy8platform15TimerResolutionEv(void) {
  return 100;
}

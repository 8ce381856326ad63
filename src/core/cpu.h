/*
 * cpu.h — telling the processor that this thread spins: on x86 the pause
 * lets the sibling hyperthread run and leaves the spin loop without a
 * memory-order flush; on ARM the yield hint.
 */
#ifndef LOOM_CORE_CPU_H
#define LOOM_CORE_CPU_H

static inline void loom_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif

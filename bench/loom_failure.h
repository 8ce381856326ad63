/*
 * loom_failure.h — how Loom's tools (loom-perf, loom-ddp) say that a Loom
 * call failed: once per rank, in words.
 *
 * The library has already logged its detailed message where it first saw
 * the error (a "LOOM WARN" line naming the rank, the peer and the call;
 * LOOM_DEBUG, LOOM_DEBUG_FILE), and loomGetLastError holds the same text.
 * Repeating it made every error appear twice per rank, so the tool's own
 * line says only which call failed and the kind of failure.
 */
#ifndef LOOM_BENCH_FAILURE_H
#define LOOM_BENCH_FAILURE_H

#include "loom.h"

/* Prints "PROG: rank R: CALL failed (KIND; Loom's message is above)" on
 * stderr.  call_text may be the call's source text ("loomAllReduce(s, r,
 * ...)"): only the function's name is printed.  rank < 0: not known yet. */
void bench_report_loom_failure(const char *prog, int rank, const char *call_text,
                               loomResult_t res);

#endif

/*
 * api_test.h — what api_test's files share: this process's rank and the rank
 * count, FAIL/CHECK_LOOM (rankcheck.h, printing as "api_test"), the helpers
 * defined in api_common.c, and one function per case for main to run.
 */
#ifndef LOOM_TESTS_API_TEST_H
#define LOOM_TESTS_API_TEST_H

#include "loom.h"

#include <stddef.h>

extern int rank, nranks;

#define TEST_NAME "api_test"
#include "rankcheck.h"

/* api_common.c */
double now_s(void);
void *xmalloc(size_t bytes);
loomComm_t world_init(int timeout_ms);
loomComm_t dup_comm(loomComm_t parent, int timeout_ms, const char *name);
void close_comm(loomComm_t c);

/* api_groups.c */
void group_p2p(void);
void group_fusion(void);
/* api_streams.c */
void streams(void);
/* api_comms.c */
void split(void);
void initall(void);
void abort_case(void);
/* api_errors.c */
void mismatch_calls(void);
void mismatch_root(void);
void mismatch_root_big(void);
void bad_args(void);
/* api_mismatch.c */
void mismatch_matrix(void);
/* api_anysource.c */
void any_source(void);
/* api_straggler.c */
void straggler(void);

#endif

/*
 * perf_coll.h — the collectives loom-perf measures and how nccl-tests
 * measures each: which take -o and -r, how the size maps to the count, the
 * in-place form and the bus bandwidth factor.
 */
#ifndef PERF_COLL_H
#define PERF_COLL_H

typedef enum {
  COLL_ALLREDUCE,
  COLL_ALLGATHER,
  COLL_REDUCESCATTER,
  COLL_BROADCAST,
  COLL_REDUCE,
  COLL_ALLTOALL,
  COLL_GATHER,
  COLL_SCATTER,
  COLL_SENDRECV,
  COLL_BARRIER,
  COLL_COUNT
} coll_t;

/* A size of S bytes is the largest buffer of the call; "per_rank"
 * collectives move S/nranks bytes per rank and pass count = S/nranks/elem. */
typedef struct {
  const char *name;  /* as -C names it */
  int reduces;       /* takes -o */
  int rooted;        /* takes -r */
  int per_rank;      /* count = size/nranks/elem */
  int in_place;      /* 0: no in-place form (in-place columns print N/A) */
  int check_inplace; /* the in-place result is defined and checked */
} coll_info_t;

/* Indexed by coll_t. */
extern const coll_info_t coll_info[COLL_COUNT];

/* The collective -C names; 0 when unknown. */
int coll_by_name(const char *name, coll_t *out);

/* nccl-tests' bus bandwidth factor: busbw = algbw * factor on n ranks. */
double bus_factor(coll_t c, int n);

#endif /* PERF_COLL_H */

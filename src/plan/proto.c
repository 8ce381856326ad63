/*
 * proto.c — protocol names and LOOM_PROTO.
 */
#include "plan/plan.h"

static const char *const proto_names[LOOM_PROTO_COUNT] = {"auto", "LL", "Simple"};

const char *loom_proto_name(enum loom_proto proto) {
  return (unsigned)proto < LOOM_PROTO_COUNT ? proto_names[proto] : "?";
}

/* The collectives with a choice of algorithm forward data through steps,
 * so they have a choice of slice size too. */
static unsigned coll_protos(int coll) {
  for (int a = LOOM_ALGO_RING; a < LOOM_ALGO_COUNT; a++)
    if (loom_algo_applies((enum loom_coll)coll, (enum loom_algo)a))
      return 1u << LOOM_PROTO_LL | 1u << LOOM_PROTO_SIMPLE;
  return 0;
}

static const struct loom_choice_kind proto_kind = {
    .var = "LOOM_PROTO",
    .what = "protocol",
    .names = proto_names,
    .first = LOOM_PROTO_LL,
    .count = LOOM_PROTO_COUNT,
    .coll_mask = coll_protos,
    .list = "LL, Simple",
};

int loom_proto_parse(const char *spec, unsigned allowed[LOOM_COLL_COUNT], char *err,
                     size_t errlen) {
  return loom_choice_parse(&proto_kind, spec, allowed, err, errlen);
}

/*
 * check_trace.c — the flight recorder's ring on its own: what a call's
 * entry holds at each state, the bytes per peer worked out from a plan,
 * and the dump showing only what the state says is there.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/coll.h"
#include "sched/schedule.h"
#include "trace/trace.h"
#include "check_run.h"

static struct loom_trace *recorder(int cap) {
  static const uint8_t secret[32] = {1, 2, 3};
  return loom_trace_create(cap, secret, sizeof secret, "check", 0, 4);
}

static const struct loom_trace_entry *entry_of(const struct loom_trace *t, uint64_t id) {
  return &t->entries[(id - 1) & t->mask];
}

/* Peers in the order the plan first meets them, bytes summed per peer,
 * and those past LOOM_TRACE_PEERS together. */
START_TEST(peers_of_a_plan) {
  struct loom_step st[7];
  struct loom_schedule s;
  loom_sched_init(&s, st, 7);
  const int send_to[] = {1, 2, 1, 3, 4, 5, -1};
  const int recv_from[] = {1, -1, 2, 3, 4, 6, 7};
  for (int i = 0; i < 7; i++) {
    struct loom_step *x = loom_sched_add(&s);
    x->send_peer = send_to[i];
    x->send_count = 10u * (unsigned)(i + 1);
    x->recv_peer = recv_from[i];
    x->recv_count = 100u * (unsigned)(i + 1);
  }
  struct loom_trace_peers p;
  loom_trace_peers_of(&s, 4, &p);
  ck_assert_int_eq(p.n, LOOM_TRACE_PEERS);
  const int32_t peer[] = {1, 2, 3, 4};
  const uint64_t sent[] = {4 * (10 + 30), 4 * 20, 4 * 40, 4 * 50};
  const uint64_t received[] = {4 * 100, 4 * 300, 4 * 400, 4 * 500};
  for (int i = 0; i < LOOM_TRACE_PEERS; i++) {
    ck_assert_int_eq(p.peer[i], peer[i]);
    ck_assert_uint_eq(p.sent[i], sent[i]);
    ck_assert_uint_eq(p.received[i], received[i]);
  }
  ck_assert_uint_eq(p.other_sent, 4 * 60);                 /* to 5 */
  ck_assert_uint_eq(p.other_received, 4 * (600 + 700));    /* from 6 and 7 */
  loom_trace_peers_of(NULL, 4, &p);
  ck_assert_int_eq(p.n, 0);
}
END_TEST

/* The coarse clock has moved on after this: it is read until it shows a
 * later time than at entry.  A fixed sleep of three of its ticks was not
 * enough: in a busy CI VM the coarse clock stood still over it (its
 * timekeeping vCPU not running, presumably), and a check of "ended after
 * started" failed. */
static void a_few_ticks(void) {
  struct timespec at, now;
  clock_gettime(CLOCK_REALTIME_COARSE, &at);
  for (int waited_ms = 0; waited_ms < 10000; waited_ms++) {
    usleep(1000);
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (now.tv_sec > at.tv_sec || (now.tv_sec == at.tv_sec && now.tv_nsec > at.tv_nsec))
      return;
  }
  ck_abort_msg("CLOCK_REALTIME_COARSE did not move in 10 s");
}

/* A queued call: recorded, started later (its own clock reading) with its
 * plan and the calls sharing its task, ended. */
START_TEST(queued_call) {
  struct loom_trace *t = recorder(4);
  ck_assert_ptr_nonnull(t);
  struct loom_trace_call c = {.coll = LOOM_COLL_ALLREDUCE, .op = 0, .datatype = 7, .root = -1,
                              .count = 2, .on_stream = 1, .small = 1};
  struct loom_trace_peers peers = {.n = 1, .peer = {1}, .sent = {8}, .received = {8}};
  uint64_t id = loom_trace_record(t, &c, 0, 0);
  ck_assert_uint_eq(id, 1);
  const struct loom_trace_entry *en = entry_of(t, id);
  ck_assert_int_eq(atomic_load(&en->state), LOOM_TRACE_QUEUED);
  ck_assert_uint_gt(atomic_load(&en->t_queued), 0);
  a_few_ticks();
  uint64_t plan = loom_trace_plan_add(t, "ring", 1, NULL, 0, &peers);
  ck_assert_uint_eq(plan, 1);
  loom_trace_started(t, id, plan, 3);
  ck_assert_int_eq(atomic_load(&en->state), LOOM_TRACE_STARTED);
  ck_assert_uint_gt(atomic_load(&en->t_started), atomic_load(&en->t_queued));
  ck_assert_uint_eq(en->plan, plan);
  ck_assert_int_eq(en->fused, 3);
  const struct loom_trace_plan *pl = &t->plans[plan - 1];
  ck_assert_int_eq(memcmp(&pl->peers, &peers, sizeof peers), 0);
  ck_assert_str_eq(pl->algo, "ring");
  ck_assert_int_eq(pl->ll, 1);
  loom_trace_ended(t, id, loomSuccess, -1, 1);
  ck_assert_int_eq(atomic_load(&en->state), LOOM_TRACE_FINISHED);
  ck_assert_uint_ge(atomic_load(&en->t_ended), atomic_load(&en->t_started));
  loom_trace_free(t);
}
END_TEST

/* A small call run at once: recorded started, with its plan, in one pass;
 * ended with no clock reading when it ends a moment after it started;
 * the clock is read for a failure, a call not small, or one whose task
 * says it took time. */
START_TEST(states_and_times) {
  struct loom_trace *t = recorder(4);
  ck_assert_ptr_nonnull(t);
  struct loom_trace_call c = {.coll = LOOM_COLL_ALLREDUCE, .op = 0, .datatype = 7, .root = -1,
                              .count = 2, .small = 1};
  struct loom_trace_peers peers = {.n = 1, .peer = {1}, .sent = {8}, .received = {8}};
  uint64_t plan = loom_trace_plan_add(t, "ring", 1, NULL, 0, &peers);
  uint64_t id = loom_trace_record(t, &c, 1, plan);
  ck_assert_uint_eq(id, 1);
  const struct loom_trace_entry *en = entry_of(t, id);
  ck_assert_int_eq(atomic_load(&en->state), LOOM_TRACE_STARTED);
  ck_assert_uint_gt(atomic_load(&en->t_queued), 0);
  ck_assert_uint_eq(atomic_load(&en->t_started), atomic_load(&en->t_queued));
  ck_assert_uint_eq(en->plan, plan);
  ck_assert_int_eq(en->fused, 1);
  loom_trace_ended(t, id, loomSuccess, 3, 0);
  ck_assert_int_eq(atomic_load(&en->state), LOOM_TRACE_FINISHED);
  ck_assert_uint_eq(atomic_load(&en->t_ended), atomic_load(&en->t_started));
  /* a failure: the clock is read, and the blamed rank kept */
  id = loom_trace_record(t, &c, 1, plan);
  en = entry_of(t, id);
  a_few_ticks();
  loom_trace_ended(t, id, loomRemoteError, 3, 0);
  ck_assert_int_eq(atomic_load(&en->state), LOOM_TRACE_FAILED);
  ck_assert_int_eq(atomic_load(&en->result), loomRemoteError);
  ck_assert_int_eq(atomic_load(&en->blamed), 3);
  ck_assert_uint_gt(atomic_load(&en->t_ended), atomic_load(&en->t_started));
  /* a call whose task took time (timed), and a call not small */
  for (int big = 0; big < 2; big++) {
    c.small = (uint8_t)!big;
    id = loom_trace_record(t, &c, 1, 0);
    en = entry_of(t, id);
    ck_assert_uint_eq(en->plan, 0);
    a_few_ticks();
    loom_trace_ended(t, id, loomSuccess, -1, !big);
    ck_assert_uint_gt(atomic_load(&en->t_ended), atomic_load(&en->t_started));
  }
  loom_trace_free(t);
}
END_TEST

/* The dump of t, as text (in buf of len bytes). */
static const char *dump_text(const struct loom_trace *t, char *buf, size_t len) {
  char path[] = "/tmp/check_trace.XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(loom_trace_write(t, fd, "request", NULL), 0);
  ssize_t n = pread(fd, buf, len - 1, 0);
  close(fd);
  unlink(path);
  ck_assert_int_gt(n, 0);
  buf[n] = '\0';
  return buf;
}

/* A call's plan is shown while the plan ring holds it; once overwritten,
 * the call is shown without one (never with another call's). */
START_TEST(dump_shows_kept_plans_only) {
  struct loom_trace *t = recorder(2);
  struct loom_trace_call c = {.coll = LOOM_COLL_ALLREDUCE, .op = 0, .datatype = 7, .root = -1,
                              .count = 2, .small = 1};
  struct loom_trace_peers peers = {.n = 1, .peer = {3}, .sent = {8}, .received = {16}};
  uint64_t plan = loom_trace_plan_add(t, "ring", 1, NULL, 0, &peers);
  loom_trace_ended(t, loom_trace_record(t, &c, 1, plan), loomSuccess, -1, 0);
  char text[8192];
  dump_text(t, text, sizeof text);
  ck_assert_ptr_nonnull(strstr(text, "\"algo\": \"ring\", \"proto\": \"LL\""));
  ck_assert_ptr_nonnull(strstr(text, "\"peers\": [{\"rank\": 3, \"sent\": 8, \"received\": 16}]"));
  ck_assert(loom_trace_plan_kept(t, plan));
  loom_trace_plan_add(t, "tree", 0, NULL, 0, NULL);
  loom_trace_plan_add(t, "tree", 0, NULL, 0, NULL); /* plan's slot, reused */
  ck_assert(!loom_trace_plan_kept(t, plan));
  dump_text(t, text, sizeof text);
  ck_assert_ptr_nonnull(strstr(text, "\"state\": \"finished\""));
  ck_assert_ptr_null(strstr(text, "\"algo\""));
  loom_trace_free(t);
}
END_TEST

/* The ring's slots are reused: a queued call there shows none of the
 * older call's start, end or plan in the dump. */
START_TEST(dump_shows_what_the_state_says) {
  struct loom_trace *t = recorder(1);
  struct loom_trace_call c = {.coll = LOOM_COLL_ALLREDUCE, .op = 0, .datatype = 7, .root = -1,
                              .count = 2};
  struct loom_trace_peers peers = {.n = 1, .peer = {1}, .sent = {8}, .received = {8}};
  uint64_t id = loom_trace_record(t, &c, 1, loom_trace_plan_add(t, "ring", 0, NULL, 0, &peers));
  loom_trace_ended(t, id, loomSuccess, -1, 1);
  id = loom_trace_record(t, &c, 0, 0); /* the same slot, queued */
  ck_assert_uint_eq(id, 2);
  char text[8192];
  dump_text(t, text, sizeof text);
  ck_assert_ptr_nonnull(strstr(text, "\"state\": \"queued\""));
  ck_assert_ptr_null(strstr(text, "\"algo\""));
  ck_assert_ptr_null(strstr(text, "\"peers\""));
  ck_assert_ptr_nonnull(strstr(text, "\"started_ns\": 0,"));
  ck_assert_ptr_nonnull(strstr(text, "\"ended_ns\": 0}"));
  loom_trace_free(t);
}
END_TEST

/* Field `name` of entry `id` in dump text (-1: not there). */
static long long dump_field(const char *text, uint64_t id, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "{\"id\": %llu,", (unsigned long long)id);
  const char *en = strstr(text, key);
  if (en == NULL)
    return -1;
  const char *end = strchr(en, '}');
  snprintf(key, sizeof key, "\"%s\": ", name);
  const char *f = strstr(en, key);
  return f != NULL && f < end ? atoll(f + strlen(key)) : -1;
}

/* A send's or receive's plan is reused for the next call of the same
 * peer, direction and size while the plan ring holds it; any difference,
 * or the ring moving past it, makes a new one with the call's own bytes. */
START_TEST(p2p_plans_reused_by_shape) {
  struct loom_trace *t = recorder(4);
  uint64_t send = loom_trace_p2p_plan(t, 1, 1, 64);
  ck_assert_uint_gt(send, 0);
  ck_assert_uint_eq(loom_trace_p2p_plan(t, 1, 1, 64), send);
  uint64_t recv = loom_trace_p2p_plan(t, 1, 0, 64);
  uint64_t other_peer = loom_trace_p2p_plan(t, 2, 1, 64);
  uint64_t other_bytes = loom_trace_p2p_plan(t, 1, 1, 8);
  ck_assert(recv != send && other_peer != send && other_bytes != send);
  ck_assert(recv != other_peer && recv != other_bytes && other_peer != other_bytes);
  const struct loom_trace_plan *pl = loom_trace_plan_slot(t, recv);
  ck_assert_str_eq(pl->algo, "p2p");
  ck_assert_int_eq(pl->peers.n, 1);
  ck_assert_int_eq(pl->peers.peer[0], 1);
  ck_assert_uint_eq(pl->peers.sent[0], 0);
  ck_assert_uint_eq(pl->peers.received[0], 64);
  /* peer 9 shares peer 1's memo slot: each replaces the other */
  uint64_t nine = loom_trace_p2p_plan(t, 9, 1, 8);
  ck_assert(nine != other_bytes);
  ck_assert_uint_eq(loom_trace_plan_slot(t, nine)->peers.peer[0], 9);
  uint64_t again = loom_trace_p2p_plan(t, 1, 1, 8);
  ck_assert(again != other_bytes && again != nine);
  ck_assert_uint_eq(loom_trace_plan_slot(t, again)->peers.sent[0], 8);
  /* four more plans overwrite the ring's 4 slots: a new plan, not a stale id */
  for (int i = 0; i < 4; i++)
    loom_trace_plan_add(t, "ring", 0, NULL, 0, NULL);
  ck_assert(!loom_trace_plan_kept(t, recv));
  uint64_t fresh = loom_trace_p2p_plan(t, 1, 0, 64);
  ck_assert(fresh != recv);
  ck_assert(loom_trace_plan_kept(t, fresh));
  ck_assert_uint_eq(loom_trace_plan_slot(t, fresh)->peers.received[0], 64);
  ck_assert_str_eq(loom_trace_plan_slot(t, fresh)->algo, "p2p");
  ck_assert_uint_eq(loom_trace_p2p_plan(NULL, 1, 1, 8), 0);
  loom_trace_free(t);
}
END_TEST

/* The calls of one task share one clock reading for their start and one
 * for their end. */
START_TEST(a_task_reads_the_clock_once) {
  struct loom_trace *t = recorder(4);
  struct loom_trace_call c = {.coll = LOOM_COLL_SENDRECV, .op = -1, .datatype = 0, .root = 1,
                              .count = 8, .small = 1};
  uint64_t a = loom_trace_record(t, &c, 0, 0), b = loom_trace_record(t, &c, 0, 0);
  uint64_t now = 0;
  loom_trace_started_at(t, a, 1, 2, &now);
  ck_assert_uint_gt(now, 0);
  uint64_t start = now;
  a_few_ticks();
  loom_trace_started_at(t, b, 1, 2, &now);
  ck_assert_uint_eq(atomic_load(&entry_of(t, b)->t_started), start);
  now = 0;
  loom_trace_ended_at(t, a, loomSuccess, -1, 1, &now);
  uint64_t end = now;
  ck_assert_uint_gt(end, start);
  a_few_ticks();
  loom_trace_ended_at(t, b, loomSuccess, -1, 1, &now);
  ck_assert_uint_eq(atomic_load(&entry_of(t, a)->t_ended), end);
  ck_assert_uint_eq(atomic_load(&entry_of(t, b)->t_ended), end);
  loom_trace_free(t);
}
END_TEST

/* Small calls run at once share readings while the clock does not tick:
 * never more than LOOM_TRACE_CLOCK_SHARES in a row, never a queued call
 * or one not small; the dump bounds a shared call's time by the next
 * reading, even when that came much later. */
START_TEST(small_calls_share_clock_readings) {
  struct loom_trace *t = recorder(64);
  struct loom_trace_call c = {.coll = LOOM_COLL_ALLREDUCE, .op = 0, .datatype = 7, .root = -1,
                              .count = 2, .small = 1};
  uint64_t shared = 0;
  unsigned run = 0, longest = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t id = loom_trace_record(t, &c, 1, 0);
    loom_trace_ended(t, id, loomSuccess, -1, 0);
    const struct loom_trace_entry *en = entry_of(t, id);
    run = en->clock_shared ? run + 1 : 0;
    longest = run > longest ? run : longest;
    if (en->clock_shared && shared == 0) {
      shared = id;
      ck_assert_uint_eq(atomic_load(&en->t_started), atomic_load(&entry_of(t, id - 1)->t_queued));
    }
  }
  ck_assert_uint_gt(shared, 0);
  ck_assert_uint_eq(longest, LOOM_TRACE_CLOCK_SHARES);
  ck_assert_uint_gt(t->clock_ns, 0);
  /* neither a queued call nor a call not small shares */
  ck_assert(!entry_of(t, loom_trace_record(t, &c, 0, 0))->clock_shared);
  c.small = 0;
  ck_assert(!entry_of(t, loom_trace_record(t, &c, 1, 0))->clock_shared);
  /* sharing again (within a tick or two), the next small call shares too,
   * even after a pause; the dump bounds it by the clock at the dump, then
   * by the next call's reading */
  c.small = 1;
  int again = 0;
  for (int i = 0; i < 1000 && !again; i++)
    again = entry_of(t, loom_trace_record(t, &c, 1, 0))->clock_shared;
  ck_assert(again);
  uint64_t before = t->clock_ns;
  a_few_ticks();
  uint64_t late = loom_trace_record(t, &c, 1, 0);
  ck_assert(entry_of(t, late)->clock_shared);
  ck_assert_uint_eq(atomic_load(&entry_of(t, late)->t_started), before);
  loom_trace_ended(t, late, loomSuccess, -1, 0);
  char text[65536];
  dump_text(t, text, sizeof text);
  ck_assert_int_gt(dump_field(text, late, "done_by_ns"), (long long)before);
  ck_assert_ptr_nonnull(strstr(text, "\"clock\": \"shared\""));
  c.small = 0;
  uint64_t next = loom_trace_record(t, &c, 1, 0);
  dump_text(t, text, sizeof text);
  ck_assert_int_eq(dump_field(text, late, "done_by_ns"),
                   (long long)atomic_load(&entry_of(t, next)->t_queued));
  ck_assert_int_eq(dump_field(text, next, "done_by_ns"), -1);
  /* the clock ticked between the last two readings: the next call reads */
  c.small = 1;
  ck_assert(!entry_of(t, loom_trace_record(t, &c, 1, 0))->clock_shared);
  loom_trace_free(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("trace");
  TCase *tc = tcase_create("trace");
  tcase_add_test(tc, peers_of_a_plan);
  tcase_add_test(tc, queued_call);
  tcase_add_test(tc, states_and_times);
  tcase_add_test(tc, dump_shows_what_the_state_says);
  tcase_add_test(tc, dump_shows_kept_plans_only);
  tcase_add_test(tc, small_calls_share_clock_readings);
  tcase_add_test(tc, p2p_plans_reused_by_shape);
  tcase_add_test(tc, a_task_reads_the_clock_once);
  suite_add_tcase(s, tc);
  return check_run(s);
}

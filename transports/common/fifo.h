/*
 * fifo.h — a growable FIFO of fixed-size records, the queues of every
 * transport (posted sends and receives, parts on a socket, rendezvous in
 * flight), with access by position so that a queue can be walked from its
 * head.  The capacity is a power of two: positions wrap with a mask, not a
 * division, as these run for every message.
 */
#ifndef LOOM_TRANSPORT_COMMON_FIFO_H
#define LOOM_TRANSPORT_COMMON_FIFO_H

#include <stddef.h>
#include <string.h>

struct loom_fifo {
  char *items;
  size_t elem, head, count, cap; /* cap: 0 or a power of two */
};

void loom_fifo_init(struct loom_fifo *q, size_t elem);
/* Doubles the capacity; 0, or -1 when out of memory. */
int loom_fifo_grow(struct loom_fifo *q);
void loom_fifo_free(struct loom_fifo *q);

/* The i-th record from the head (i < count), or NULL. */
static inline void *loom_fifo_at(const struct loom_fifo *q, size_t i) {
  return i < q->count ? q->items + ((q->head + i) & (q->cap - 1)) * q->elem : NULL;
}

/* Copies *item to the tail; 0, or -1 when out of memory. */
static inline int loom_fifo_push(struct loom_fifo *q, const void *item) {
  if (q->count == q->cap && loom_fifo_grow(q) != 0)
    return -1;
  memcpy(q->items + ((q->head + q->count) & (q->cap - 1)) * q->elem, item, q->elem);
  q->count++;
  return 0;
}

static inline void loom_fifo_pop(struct loom_fifo *q) {
  if (q->count == 0)
    return;
  q->head = (q->head + 1) & (q->cap - 1);
  q->count--;
}

#endif

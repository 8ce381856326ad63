/*
 * ib_fifo.h — a growable FIFO of fixed-size records (the posted sends and
 * receives of a connection, the rendezvous in flight), with access by
 * position so that a queue can be walked from its head.
 */
#ifndef LOOM_TRANSPORT_IB_FIFO_H
#define LOOM_TRANSPORT_IB_FIFO_H

#include <stddef.h>

struct ib_fifo {
  char *items;
  size_t elem, head, count, cap;
};

void ib_fifo_init(struct ib_fifo *q, size_t elem);
/* Copies *item to the tail; 0, or -1 when out of memory. */
int ib_fifo_push(struct ib_fifo *q, const void *item);
/* The i-th record from the head (i < count), or NULL. */
void *ib_fifo_at(const struct ib_fifo *q, size_t i);
void ib_fifo_pop(struct ib_fifo *q);
void ib_fifo_free(struct ib_fifo *q);

#endif

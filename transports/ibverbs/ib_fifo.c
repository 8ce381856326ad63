/*
 * ib_fifo.c — the FIFO of ib_fifo.h: a ring buffer that doubles when full.
 */
#include "ib_fifo.h"

#include <stdlib.h>
#include <string.h>

void ib_fifo_init(struct ib_fifo *q, size_t elem) {
  memset(q, 0, sizeof *q);
  q->elem = elem;
}

int ib_fifo_push(struct ib_fifo *q, const void *item) {
  if (q->count == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 32;
    char *items = malloc(cap * q->elem);
    if (items == NULL)
      return -1;
    for (size_t i = 0; i < q->count; i++)
      memcpy(items + i * q->elem, q->items + ((q->head + i) % q->cap) * q->elem, q->elem);
    free(q->items);
    q->items = items;
    q->head = 0;
    q->cap = cap;
  }
  memcpy(q->items + ((q->head + q->count) % q->cap) * q->elem, item, q->elem);
  q->count++;
  return 0;
}

void *ib_fifo_at(const struct ib_fifo *q, size_t i) {
  return i < q->count ? q->items + ((q->head + i) % q->cap) * q->elem : NULL;
}

void ib_fifo_pop(struct ib_fifo *q) {
  if (q->count == 0)
    return;
  q->head = (q->head + 1) % q->cap;
  q->count--;
}

void ib_fifo_free(struct ib_fifo *q) {
  free(q->items);
  q->items = NULL;
  q->head = q->count = q->cap = 0;
}

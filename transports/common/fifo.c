/*
 * fifo.c — growth and release of the FIFO of fifo.h (a ring buffer that
 * doubles when full, keeping its records in order).
 */
#include "common/fifo.h"

#include <stdlib.h>

void loom_fifo_init(struct loom_fifo *q, size_t elem) {
  *q = (struct loom_fifo){.elem = elem};
}

int loom_fifo_grow(struct loom_fifo *q) {
  size_t cap = q->cap ? q->cap * 2 : 32;
  char *items = malloc(cap * q->elem);
  if (items == NULL)
    return -1;
  for (size_t i = 0; i < q->count; i++)
    memcpy(items + i * q->elem, loom_fifo_at(q, i), q->elem);
  free(q->items);
  q->items = items;
  q->head = 0;
  q->cap = cap;
  return 0;
}

void loom_fifo_free(struct loom_fifo *q) {
  free(q->items);
  *q = (struct loom_fifo){.elem = q->elem};
}

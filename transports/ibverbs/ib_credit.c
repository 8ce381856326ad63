/*
 * ib_credit.c — the credit state machines of ib_credit.h.
 */
#include "ib_credit.h"
#include "net/bytes.h"

#include <stddef.h>

int ib_credit_tx_init(struct ib_credit_tx *tx, uint32_t nslots, uint32_t credits) {
  if (!loom_is_pow2_u32(nslots) || credits > nslots)
    return -1;
  tx->nslots = nslots;
  tx->credits = credits;
  tx->next = 0;
  return 0;
}

void ib_credit_tx_init_at(struct ib_credit_tx *tx, uint32_t start) { tx->next = start; }

int ib_credit_tx_take(struct ib_credit_tx *tx, uint32_t *slot) {
  if (tx->credits == 0)
    return -1;
  tx->credits--;
  *slot = tx->next++ & (tx->nslots - 1);
  return 0;
}

int ib_credit_tx_give(struct ib_credit_tx *tx, uint32_t n) {
  if (n > tx->nslots - tx->credits)
    return -1;
  tx->credits += n;
  return 0;
}

int ib_credit_rx_init(struct ib_credit_rx *rx, uint32_t nslots, uint32_t batch) {
  if (!loom_is_pow2_u32(nslots) || batch == 0 || batch > nslots)
    return -1;
  rx->nslots = nslots;
  rx->batch = batch;
  rx->arrived = rx->released = rx->returned = 0;
  return 0;
}

void ib_credit_rx_init_at(struct ib_credit_rx *rx, uint32_t start) {
  rx->arrived = rx->released = rx->returned = start;
}

int ib_credit_rx_arrive(struct ib_credit_rx *rx, uint32_t slot) {
  /* Unsigned differences stay right across the 2^32 wrap. */
  if ((uint32_t)(rx->arrived - rx->returned) >= rx->nslots)
    return -1; /* every slot is held or not yet returned: no credit existed */
  if (slot != (rx->arrived & (rx->nslots - 1)))
    return -1;
  rx->arrived++;
  return 0;
}

uint32_t ib_credit_rx_pending(const struct ib_credit_rx *rx, uint32_t *slot) {
  if (slot != NULL)
    *slot = rx->released & (rx->nslots - 1);
  return rx->arrived - rx->released;
}

int ib_credit_rx_release(struct ib_credit_rx *rx) {
  if (rx->arrived == rx->released)
    return -1;
  rx->released++;
  return 0;
}

uint32_t ib_credit_rx_due(const struct ib_credit_rx *rx, int force) {
  uint32_t n = rx->released - rx->returned;
  return n >= rx->batch || (force && n > 0) ? n : 0;
}

int ib_credit_rx_returned(struct ib_credit_rx *rx, uint32_t n) {
  if (n > (uint32_t)(rx->released - rx->returned))
    return -1;
  rx->returned += n;
  return 0;
}

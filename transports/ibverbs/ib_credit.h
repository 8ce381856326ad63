/*
 * ib_credit.h — credit accounting for a receiver's pre-registered ring of
 * slots.  Pure state machines, one per side of a direction:
 *
 *   sender (tx):   one credit per slot it may fill; taking one names the
 *                  slot (slots are filled in ring order); credits come
 *                  back from the receiver
 *   receiver (rx): slots arrive in ring order and are released in the
 *                  same order once consumed; released slots are returned
 *                  to the sender in batches (or all at once when a header
 *                  is going back anyway and can carry them)
 *
 * Counters are 32-bit and wrap; slot = counter mod nslots, so nslots must
 * be a power of two.  Every function that could let the sender overrun
 * the ring, or the receiver over-return, refuses (-1): that is a protocol
 * error the caller reports.
 */
#ifndef LOOM_TRANSPORT_IB_CREDIT_H
#define LOOM_TRANSPORT_IB_CREDIT_H

#include <stdint.h>

struct ib_credit_tx {
  uint32_t nslots;  /* ring size */
  uint32_t credits; /* slots this sender may fill now */
  uint32_t next;    /* slots filled so far */
};

struct ib_credit_rx {
  uint32_t nslots, batch;
  uint32_t arrived;  /* slots filled by the sender so far */
  uint32_t released; /* slots consumed, in order */
  uint32_t returned; /* credits given back to the sender */
};

/* 0, or -1 when nslots is not a power of two, or credits > nslots. */
int ib_credit_tx_init(struct ib_credit_tx *tx, uint32_t nslots, uint32_t credits);
/* Takes a credit: *slot is the slot to fill.  -1 when none is left. */
int ib_credit_tx_take(struct ib_credit_tx *tx, uint32_t *slot);
/* Credits returned by the receiver; -1 (nothing changed) if that would
 * give this sender more than the ring holds. */
int ib_credit_tx_give(struct ib_credit_tx *tx, uint32_t n);

/* batch: return credits once this many are pending (1..nslots). */
int ib_credit_rx_init(struct ib_credit_rx *rx, uint32_t nslots, uint32_t batch);
/* Starts all counters at `start` (tests: wrap-around). */
void ib_credit_rx_init_at(struct ib_credit_rx *rx, uint32_t start);
void ib_credit_tx_init_at(struct ib_credit_tx *tx, uint32_t start);
/* The sender filled `slot`: -1 when it is not the next slot in ring order
 * or the sender had no credit for it (the ring would overflow). */
int ib_credit_rx_arrive(struct ib_credit_rx *rx, uint32_t slot);
/* Slots arrived but not yet released; the oldest is *slot (if any). */
uint32_t ib_credit_rx_pending(const struct ib_credit_rx *rx, uint32_t *slot);
/* Releases the oldest arrived slot; -1 when none has arrived. */
int ib_credit_rx_release(struct ib_credit_rx *rx);
/* Credits due now: all released-but-unreturned slots when at least
 * `batch` of them (or any, with force); 0 otherwise.  Nothing is committed
 * until ib_credit_rx_returned(n) says they were sent. */
uint32_t ib_credit_rx_due(const struct ib_credit_rx *rx, int force);
/* -1 when n is more than released-but-unreturned. */
int ib_credit_rx_returned(struct ib_credit_rx *rx, uint32_t n);

#endif

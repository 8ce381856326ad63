/*
 * ib_verbs.c — the ibverbs side of a connection: its completion queue and
 * queue pair, the NIC operations ib_ep.c asks for (RDMA writes with or
 * without immediate, receives for immediates), completions handed back to
 * the endpoint, CQ notifications for poll_fds, and memory registration
 * for the cache.
 */
#include "ib.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- NIC operations for ib_ep ------------------------------------------------------ */

static int verbs_write(void *qpv, uint64_t wr_id, const void *local, size_t len, uint32_t lkey,
                       uint64_t raddr, uint32_t rkey, int with_imm, uint32_t imm) {
  struct ibv_qp *qp = qpv;
  struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)local, .length = (uint32_t)len, .lkey = lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wr_id;
  wr.sg_list = len > 0 ? &sge : NULL;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

static int verbs_post_recvs(void *qpv, int n) {
  struct ibv_qp *qp = qpv;
  /* Immediates need no buffer: receives without scatter entries. */
  struct ibv_recv_wr wrs[32], *bad = NULL;
  while (n > 0) {
    int k = n < 32 ? n : 32;
    for (int i = 0; i < k; i++) {
      memset(&wrs[i], 0, sizeof wrs[i]);
      wrs[i].next = i + 1 < k ? &wrs[i + 1] : NULL;
    }
    int rc = ibv_post_recv(qp, wrs, &bad);
    if (rc != 0)
      return rc;
    n -= k;
  }
  return 0;
}

const struct ib_nic_ops ib_verbs_nic = {.write = verbs_write, .post_recvs = verbs_post_recvs};

/* ---- memory registration for the cache ---------------------------------------------- */

static int verbs_reg(void *arg, void *addr, size_t len, struct loom_mr_keys *out) {
  struct ib_ctx *ctx = arg;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  struct ibv_mr *mr = NULL;
  if (ctx->dev.odp)
    mr = ibv_reg_mr(ctx->pd, addr, len, access | IBV_ACCESS_ON_DEMAND);
  out->follows_mapping = mr != NULL;
  if (mr == NULL)
    mr = ibv_reg_mr(ctx->pd, addr, len, access);
  if (mr == NULL)
    return errno != 0 ? errno : ENOMEM;
  out->handle = mr;
  out->lkey = mr->lkey;
  out->rkey = mr->rkey;
  return 0;
}

static void verbs_dereg(void *arg, void *handle) {
  (void)arg;
  ibv_dereg_mr(handle);
}

/* No unmap monitor: only registrations that follow the mapping stay
 * cached while idle (common/mr_cache.h). */
static int verbs_watch(void *arg, void *addr, size_t len) {
  (void)arg, (void)addr, (void)len;
  return -1;
}

const struct loom_mr_ops ib_verbs_mr_ops_template = {
    .reg = verbs_reg, .dereg = verbs_dereg, .watch = verbs_watch};

/* ---- a connection's CQ and QP ---------------------------------------------------------- */

/* Set-up failures are recorded as the detail only: the connection's
 * failure (ib_connect.c) names the ranks. */
static loomResult_t setup_fail(struct ib_conn *c, const char *call, int err) {
  (void)c;
  return loom_error_record(loomSystemError, "%s failed: %s%s", call, strerror(err),
                           err == ENOMEM || err == EPERM
                               ? " (raise the locked-memory limit: ulimit -l unlimited)"
                               : "");
}

loomResult_t ib_conn_setup_qp(struct ib_conn *c) {
  struct ib_ctx *ctx = c->ctx;
  if (c->id->verbs != ctx->verbs)
    return loom_error_record(loomSystemError,
                             "rdma_cm routes it over device %s, not %s port %d (LOOM_IB_HCA): "
                             "give both ranks addresses on the same fabric",
                             c->id->verbs ? ibv_get_device_name(c->id->verbs->device) : "none",
                             ctx->dev.dev, ctx->dev.port);
  uint32_t sq = ib_ep_sq_depth(IB_EP_NSLOTS, IB_EP_RDV_SLOTS);
  uint32_t rq = ib_ep_rq_depth(IB_EP_NSLOTS, IB_EP_RDV_SLOTS);
  if (c->in == NULL) {
    c->region_bytes = ib_ep_region_bytes(IB_EP_NSLOTS, IB_EP_SLOT_BYTES, IB_EP_RDV_SLOTS);
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096;
    if (posix_memalign((void **)&c->in, align, c->region_bytes) != 0 ||
        posix_memalign((void **)&c->out, align, c->region_bytes) != 0)
      return setup_fail(c, "allocating the receive ring", ENOMEM);
    memset(c->in, 0, c->region_bytes);
    memset(c->out, 0, c->region_bytes);
    c->in_mr = ibv_reg_mr(ctx->pd, c->in, c->region_bytes,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (c->in_mr == NULL)
      return setup_fail(c, "ibv_reg_mr (receive ring)", errno);
    c->out_mr = ibv_reg_mr(ctx->pd, c->out, c->region_bytes, IBV_ACCESS_LOCAL_WRITE);
    if (c->out_mr == NULL)
      return setup_fail(c, "ibv_reg_mr (send staging)", errno);
  }
  c->cq = ibv_create_cq(ctx->verbs, (int)(sq + rq), c, ctx->channel, 0);
  if (c->cq == NULL)
    return setup_fail(c, "ibv_create_cq", errno);
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = c->cq;
  qa.recv_cq = c->cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = sq;
  qa.cap.max_recv_wr = rq;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  if (rdma_create_qp(c->id, ctx->pd, &qa) != 0)
    return setup_fail(c, "rdma_create_qp", errno);
  c->qp = c->id->qp;
  struct ib_ep_config cfg = {.rank = ctx->rank,
                             .peer = c->peer,
                             .nslots = IB_EP_NSLOTS,
                             .slot_bytes = IB_EP_SLOT_BYTES,
                             .rdv_slots = IB_EP_RDV_SLOTS,
                             .in = c->in,
                             .out = c->out,
                             .out_lkey = c->out_mr->lkey,
                             .credits = IB_EP_NSLOTS,
                             .max_write = ctx->dev.max_msg ? ctx->dev.max_msg : (size_t)1 << 30,
                             .nic = &ib_verbs_nic,
                             .qp = c->qp,
                             .mrs = &ctx->mrs};
  if (cfg.max_write > ((size_t)1 << 30))
    cfg.max_write = (size_t)1 << 30;
  LOOM_CHECK(ib_ep_init(&c->ep, &cfg));
  c->ep_ready = 1;
  /* Receives first: the peer may write as soon as the connection is up. */
  return ib_ep_start(&c->ep);
}

/* Tears down what ib_conn_setup_qp made for one attempt (the regions stay). */
void ib_conn_teardown_qp(struct ib_conn *c) {
  if (c->ep_ready) {
    ib_ep_fini(&c->ep);
    c->ep_ready = 0;
  }
  if (c->qp != NULL) {
    rdma_destroy_qp(c->id);
    c->qp = NULL;
  }
  if (c->cq != NULL) {
    ibv_destroy_cq(c->cq);
    c->cq = NULL;
  }
  c->cq_armed = 0;
  c->nstash = 0;
}

/* ---- completions ------------------------------------------------------------------ */

static loomResult_t wc_error(struct ib_conn *c, const struct ibv_wc *wc) {
  const char *hint = "";
  if (wc->status == IBV_WC_RETRY_EXC_ERR)
    hint = " - rank stopped answering (did the process exit, or the link go down?); "
           "LOOM_IB_TIMEOUT and LOOM_IB_RETRY_CNT set how long it is waited for";
  else if (wc->status == IBV_WC_REM_ACCESS_ERR)
    hint = " - the peer refused the write (a registration went stale?)";
  else if (wc->status == IBV_WC_RNR_RETRY_EXC_ERR)
    hint = " - the peer posted no receive (internal error)";
  return ib_ep_fail(&c->ep, loomRemoteError,
                    "work completion error on %s: %s (status %d, vendor error 0x%x)%s",
                    wc->wr_id == 0 ? "a receive" : "an RDMA write", /* receives: wr_id 0 */
                    ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err, hint);
}

static loomResult_t handle_wc(struct ib_conn *c, const struct ibv_wc *wc) {
  if (wc->status != IBV_WC_SUCCESS)
    return wc_error(c, wc);
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
    return ib_ep_recv_imm(&c->ep, ntohl(wc->imm_data));
  return ib_ep_send_done(&c->ep, wc->wr_id);
}

loomResult_t ib_conn_poll_cq(struct ib_conn *c, int *progressed) {
  if (c->ep.failed != loomSuccess)
    return c->ep.failed;
  for (int i = 0; i < c->nstash; i++) {
    *progressed = 1;
    LOOM_CHECK(handle_wc(c, &c->stash[i]));
  }
  c->nstash = 0;
  for (;;) {
    struct ibv_wc wc[IB_POLL_BATCH];
    int n = ibv_poll_cq(c->cq, IB_POLL_BATCH, wc);
    if (n < 0)
      return ib_ep_fail(&c->ep, loomSystemError, "ibv_poll_cq failed (%d)", n);
    if (n > 0)
      *progressed = 1;
    for (int i = 0; i < n; i++)
      LOOM_CHECK(handle_wc(c, &wc[i]));
    if (n < IB_POLL_BATCH)
      return loomSuccess;
  }
}

int ib_arm_cqs(struct ib_ctx *ctx) {
  /* Notifications that fired: those CQs are disarmed now. */
  struct ibv_cq *cq;
  void *cq_ctx;
  while (ibv_get_cq_event(ctx->channel, &cq, &cq_ctx) == 0) {
    ((struct ib_conn *)cq_ctx)->cq_armed = 0;
    ibv_ack_cq_events(cq, 1);
  }
  int waiting = 0;
  for (int i = 0; i < ctx->nopen; i++) {
    struct ib_conn *c = ctx->open[i];
    if (c->cq == NULL || c->state != IB_CONN_ESTABLISHED)
      continue;
    if (!c->cq_armed && ibv_req_notify_cq(c->cq, 0) == 0)
      c->cq_armed = 1;
    /* A completion that arrived before arming raises no event: look. */
    if (c->nstash < IB_POLL_BATCH) {
      int n = ibv_poll_cq(c->cq, IB_POLL_BATCH - c->nstash, c->stash + c->nstash);
      if (n > 0)
        c->nstash += n;
    }
    waiting |= c->nstash > 0;
  }
  return waiting;
}

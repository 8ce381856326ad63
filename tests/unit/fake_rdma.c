/*
 * fake_rdma.c — an in-process stand-in for the parts of libibverbs and
 * librdmacm that the ibverbs transport calls, so that its device code
 * (ib.c, ib_device.c, ib_connect.c, ib_verbs.c) runs where no RDMA device
 * exists: linked into the transport conformance suite (tests/transport/)
 * instead of the real libraries (tests/transport/conformance_ib_fake).
 *
 * One device, "fake0", one active RoCE port whose only address is
 * 127.0.0.1.  rdma_cm ids, listeners and connections live in this process
 * and talk through real pipes (the channels' fds work with poll).  An RDMA
 * write is carried out when posted: the local and remote keys must cover
 * the ranges (else an error completion), a write with immediate consumes a
 * posted receive of the peer (none: an RNR error completion), and every
 * completion goes to its CQ, raising the channel's event when armed.
 *
 * It enforces the rules a real stack would punish, by aborting: a CQ
 * overrun, a PD freed with registrations, a CQ destroyed with events
 * unacknowledged or a QP still on it, a comp channel destroyed with CQs,
 * an id destroyed with events unacknowledged, more receives posted than
 * the QP holds.
 *
 * FAKE_RDMA_NONE=1: no device.  FAKE_RDMA_ODP=1: the device offers
 * On-Demand Paging (registrations with IBV_ACCESS_ON_DEMAND accepted).
 * FAKE_RDMA_FAIL_CQ=1: ibv_create_cq fails with ENOMEM.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#undef ibv_query_port
#undef ibv_reg_mr

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void violation(const char *what) {
  fprintf(stderr, "fake_rdma: %s\n", what);
  abort();
}

/* ---- the device --------------------------------------------------------------- */

static struct ibv_device dev = {.node_type = IBV_NODE_CA,
                                .transport_type = IBV_TRANSPORT_IB,
                                .name = "fake0"};
/* An extended context: ibv_query_device_ex (inline) reaches the fake's
 * query_device_ex only through it. */
static struct verbs_context vctx;
static int fake_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
                                struct ibv_device_attr_ex *a, size_t size);
static int fake_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a,
                           size_t size);

static struct ibv_context *the_context(void) {
  if (vctx.sz == 0) {
    vctx.sz = sizeof vctx;
    vctx.query_device_ex = fake_query_device_ex;
    vctx.query_port = fake_query_port;
    vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
    vctx.context.device = &dev;
  }
  return &vctx.context;
}

static int odp(void) { return getenv("FAKE_RDMA_ODP") && atoi(getenv("FAKE_RDMA_ODP")); }

struct ibv_device **ibv_get_device_list(int *num) {
  struct ibv_device **list = calloc(2, sizeof *list);
  int none = getenv("FAKE_RDMA_NONE") && atoi(getenv("FAKE_RDMA_NONE"));
  if (!none)
    list[0] = &dev;
  if (num != NULL)
    *num = none ? 0 : 1;
  return list;
}

void ibv_free_device_list(struct ibv_device **list) { free(list); }

const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a) {
  (void)c;
  memset(a, 0, sizeof *a);
  a->phys_port_cnt = 1;
  a->max_qp_wr = 16384;
  a->max_cqe = 65536;
  return 0;
}

static int fake_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
                                struct ibv_device_attr_ex *a, size_t size) {
  (void)in;
  memset(a, 0, size);
  ibv_query_device(c, &a->orig_attr);
  if (odp()) {
    a->odp_caps.general_caps = IBV_ODP_SUPPORT;
    a->odp_caps.per_transport_caps.rc_odp_caps =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
  }
  return 0;
}

static int fake_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a,
                           size_t size) {
  (void)c;
  if (port != 1)
    return EINVAL;
  memset(a, 0, size);
  a->state = IBV_PORT_ACTIVE;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->max_msg_sz = 1u << 31;
  return 0;
}

/* The legacy entry point (the inline ibv_query_port falls back to it on a
 * context that is not extended; ours is, but the reference must resolve). */
int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *compat) {
  return fake_query_port(c, port, (struct ibv_port_attr *)compat, sizeof(struct ibv_port_attr));
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid) {
  (void)c;
  if (port != 1 || index != 0)
    return EINVAL;
  static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  memcpy(gid->raw, v4, 16);
  return 0;
}

const char *ibv_wc_status_str(enum ibv_wc_status s) {
  switch (s) {
  case IBV_WC_SUCCESS:
    return "success";
  case IBV_WC_LOC_PROT_ERR:
    return "local protection error";
  case IBV_WC_WR_FLUSH_ERR:
    return "Work Request Flushed Error";
  case IBV_WC_REM_ACCESS_ERR:
    return "remote access error";
  case IBV_WC_RETRY_EXC_ERR:
    return "transport retry counter exceeded";
  case IBV_WC_RNR_RETRY_EXC_ERR:
    return "RNR retry counter exceeded";
  default:
    return "unknown";
  }
}

/* ---- protection domain, registrations ------------------------------------------------ */

struct fake_mr {
  struct ibv_mr mr;
  int access;
  struct fake_mr *next;
};
static struct fake_mr *mrs;
static uint32_t next_key = 100;
static int pds;

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) {
  struct ibv_pd *pd = calloc(1, sizeof *pd);
  pd->context = c;
  pthread_mutex_lock(&lock);
  pds++;
  pthread_mutex_unlock(&lock);
  return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd) {
  pthread_mutex_lock(&lock);
  for (struct fake_mr *m = mrs; m != NULL; m = m->next)
    if (m->mr.pd == pd)
      violation("ibv_dealloc_pd with memory still registered");
  pds--;
  pthread_mutex_unlock(&lock);
  free(pd);
  return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                unsigned int access) {
  (void)iova;
  if ((access & IBV_ACCESS_ON_DEMAND) && !odp()) {
    errno = EINVAL;
    return NULL;
  }
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return NULL;
  }
  struct fake_mr *m = calloc(1, sizeof *m);
  pthread_mutex_lock(&lock);
  m->mr = (struct ibv_mr){.context = pd->context, .pd = pd, .addr = addr, .length = len,
                          .lkey = next_key, .rkey = next_key + 1};
  next_key += 2;
  m->access = (int)access;
  m->next = mrs;
  mrs = m;
  pthread_mutex_unlock(&lock);
  return &m->mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
  return ibv_reg_mr_iova2(pd, addr, len, (uintptr_t)addr, (unsigned)access);
}

int ibv_dereg_mr(struct ibv_mr *mr) {
  pthread_mutex_lock(&lock);
  for (struct fake_mr **p = &mrs; *p != NULL; p = &(*p)->next)
    if (&(*p)->mr == mr) {
      struct fake_mr *m = *p;
      *p = m->next;
      pthread_mutex_unlock(&lock);
      free(m);
      return 0;
    }
  violation("ibv_dereg_mr of an unknown registration");
  return EINVAL;
}

/* A registration covering [addr, addr+len) under key (lkey or rkey). */
static struct fake_mr *find_mr(uint32_t key, int remote, uint64_t addr, size_t len) {
  for (struct fake_mr *m = mrs; m != NULL; m = m->next) {
    uint64_t a = (uintptr_t)m->mr.addr;
    if ((remote ? m->mr.rkey : m->mr.lkey) == key && a <= addr && addr + len <= a + m->mr.length)
      return m;
  }
  return NULL;
}

/* ---- completion channels and CQs ---------------------------------------------------- */

#define MAX_CQS 256

struct fake_comp {
  struct ibv_comp_channel ch;
  int wfd;
  struct ibv_cq *fired[MAX_CQS]; /* CQs whose event waits to be read */
  int nfired;
  int ncqs;
};

struct fake_cq {
  struct ibv_cq cq;
  struct ibv_wc *q;
  int head, count;
  int armed;
  int unacked;
  int users; /* QPs on it */
};

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c) {
  struct fake_comp *f = calloc(1, sizeof *f);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    free(f);
    return NULL;
  }
  f->ch.context = c;
  f->ch.fd = fds[0];
  f->wfd = fds[1];
  return &f->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch) {
  struct fake_comp *f = (struct fake_comp *)ch;
  if (f->ncqs != 0)
    violation("ibv_destroy_comp_channel with CQs still on it");
  close(f->ch.fd);
  close(f->wfd);
  free(f);
  return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  struct fake_cq *f = (struct fake_cq *)cq;
  pthread_mutex_lock(&lock);
  int k = 0;
  while (k < n && f->count > 0) {
    wc[k++] = f->q[f->head];
    f->head = (f->head + 1) % cq->cqe;
    f->count--;
  }
  pthread_mutex_unlock(&lock);
  return k;
}

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited) {
  (void)solicited;
  pthread_mutex_lock(&lock);
  ((struct fake_cq *)cq)->armed = 1;
  pthread_mutex_unlock(&lock);
  return 0;
}

/* With the lock held. */
static void push_wc(struct ibv_cq *cq, const struct ibv_wc *wc) {
  struct fake_cq *f = (struct fake_cq *)cq;
  if (f->count == cq->cqe)
    violation("CQ overrun (a CQ smaller than the work it completes)");
  f->q[(f->head + f->count++) % cq->cqe] = *wc;
  if (f->armed && cq->channel != NULL) {
    struct fake_comp *ch = (struct fake_comp *)cq->channel;
    f->armed = 0;
    ch->fired[ch->nfired++] = cq;
    char b = 1;
    if (write(ch->wfd, &b, 1) != 1)
      violation("comp channel pipe full");
  }
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context) {
  struct fake_comp *f = (struct fake_comp *)ch;
  char b;
  if (read(ch->fd, &b, 1) != 1)
    return -1; /* errno from read: EAGAIN when non-blocking */
  pthread_mutex_lock(&lock);
  *cq = f->fired[0];
  memmove(f->fired, f->fired + 1, sizeof f->fired[0] * (size_t)--f->nfired);
  *cq_context = (*cq)->cq_context;
  ((struct fake_cq *)*cq)->unacked++;
  pthread_mutex_unlock(&lock);
  return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n) {
  pthread_mutex_lock(&lock);
  ((struct fake_cq *)cq)->unacked -= (int)n;
  pthread_mutex_unlock(&lock);
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int vec) {
  (void)vec;
  if (getenv("FAKE_RDMA_FAIL_CQ") && atoi(getenv("FAKE_RDMA_FAIL_CQ"))) {
    errno = ENOMEM;
    return NULL;
  }
  struct fake_cq *f = calloc(1, sizeof *f);
  f->q = calloc((size_t)cqe, sizeof *f->q);
  f->cq.context = c;
  f->cq.channel = channel;
  f->cq.cq_context = cq_context;
  f->cq.cqe = cqe;
  pthread_mutex_lock(&lock);
  c->ops.poll_cq = fake_poll_cq;
  c->ops.req_notify_cq = fake_req_notify_cq;
  c->ops.post_send = fake_post_send;
  c->ops.post_recv = fake_post_recv;
  if (channel != NULL)
    ((struct fake_comp *)channel)->ncqs++;
  pthread_mutex_unlock(&lock);
  return &f->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq) {
  struct fake_cq *f = (struct fake_cq *)cq;
  pthread_mutex_lock(&lock);
  if (f->users != 0)
    violation("ibv_destroy_cq with a QP still on it");
  if (f->unacked != 0)
    violation("ibv_destroy_cq with events not acknowledged (would block for ever)");
  if (cq->channel != NULL) {
    struct fake_comp *ch = (struct fake_comp *)cq->channel;
    ch->ncqs--;
    for (int i = 0; i < ch->nfired; i++) /* an event fired but never read */
      if (ch->fired[i] == cq) {
        memmove(ch->fired + i, ch->fired + i + 1, sizeof ch->fired[0] * (size_t)(ch->nfired - i - 1));
        ch->nfired--;
        char b;
        if (read(ch->ch.fd, &b, 1) != 1)
          violation("comp channel out of step");
        i--;
      }
  }
  pthread_mutex_unlock(&lock);
  free(f->q);
  free(f);
  return 0;
}

/* ---- queue pairs ------------------------------------------------------------------- */

#define MAX_RECVS 4096

struct fake_qp {
  struct ibv_qp qp;
  struct fake_qp *peer;
  uint64_t recvs[MAX_RECVS];
  int rhead, rcount;
  uint32_t max_recv;
  int sig_all;
};

static uint32_t next_qpn = 0x100;

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct fake_qp *f = (struct fake_qp *)qp;
  pthread_mutex_lock(&lock);
  for (; wr != NULL; wr = wr->next) {
    if ((uint32_t)f->rcount >= f->max_recv) {
      *bad = wr;
      pthread_mutex_unlock(&lock);
      return ENOMEM;
    }
    f->recvs[(f->rhead + f->rcount++) % MAX_RECVS] = wr->wr_id;
  }
  pthread_mutex_unlock(&lock);
  return 0;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct fake_qp *f = (struct fake_qp *)qp;
  (void)bad;
  pthread_mutex_lock(&lock);
  for (; wr != NULL; wr = wr->next) {
    struct ibv_wc wc = {.wr_id = wr->wr_id, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RDMA_WRITE,
                        .qp_num = qp->qp_num};
    size_t len = wr->num_sge ? wr->sg_list[0].length : 0;
    uint64_t local = wr->num_sge ? wr->sg_list[0].addr : 0;
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
      violation("an opcode the fake does not carry");
    if (wr->num_sge > 1)
      violation("more than one scatter entry");
    struct fake_qp *peer = f->peer;
    if (peer == NULL) {
      wc.status = IBV_WC_RETRY_EXC_ERR; /* nobody answers */
    } else if (len > 0 && find_mr(wr->sg_list[0].lkey, 0, local, len) == NULL) {
      wc.status = IBV_WC_LOC_PROT_ERR;
    } else {
      struct fake_mr *r = find_mr(wr->wr.rdma.rkey, 1, wr->wr.rdma.remote_addr, len);
      if (r == NULL || !(r->access & IBV_ACCESS_REMOTE_WRITE)) {
        wc.status = IBV_WC_REM_ACCESS_ERR;
      } else if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && peer->rcount == 0) {
        wc.status = IBV_WC_RNR_RETRY_EXC_ERR;
      } else {
        if (len > 0)
          memcpy((void *)(uintptr_t)wr->wr.rdma.remote_addr, (void *)(uintptr_t)local, len);
        if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
          struct ibv_wc rwc = {.wr_id = peer->recvs[peer->rhead], .status = IBV_WC_SUCCESS,
                               .opcode = IBV_WC_RECV_RDMA_WITH_IMM, .imm_data = wr->imm_data,
                               .wc_flags = IBV_WC_WITH_IMM, .qp_num = peer->qp.qp_num};
          peer->rhead = (peer->rhead + 1) % MAX_RECVS;
          peer->rcount--;
          push_wc(peer->qp.recv_cq, &rwc);
        }
      }
    }
    if (wc.status != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED) || f->sig_all)
      push_wc(qp->send_cq, &wc);
  }
  pthread_mutex_unlock(&lock);
  return 0;
}

/* ---- rdma_cm ------------------------------------------------------------------------ */

struct fake_channel {
  struct rdma_event_channel ch;
  int wfd;
};

struct fake_event {
  struct rdma_cm_event ev;
  uint8_t data[256];
  struct fake_channel *channel;
  struct fake_event *next;
};

struct fake_id {
  struct rdma_cm_id id;
  struct fake_id *peer; /* the other end of a connection (pending or made) */
  int listening, unacked;
};

static struct fake_event *events; /* every channel's, oldest first */
#define MAX_IDS 1024
static struct fake_id *listeners[MAX_IDS];
static int nlisteners;
static int next_port = 40000;

struct rdma_event_channel *rdma_create_event_channel(void) {
  struct fake_channel *f = calloc(1, sizeof *f);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    free(f);
    return NULL;
  }
  f->ch.fd = fds[0];
  f->wfd = fds[1];
  return &f->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *ch) {
  struct fake_channel *f = (struct fake_channel *)ch;
  close(f->ch.fd);
  close(f->wfd);
  free(f);
}

/* With the lock held. */
static void queue_event(struct fake_id *id, enum rdma_cm_event_type type, int status,
                        struct fake_id *listener, const void *data, size_t len) {
  struct fake_event *e = calloc(1, sizeof *e);
  e->ev.id = &id->id;
  e->ev.listen_id = listener ? &listener->id : NULL;
  e->ev.event = type;
  e->ev.status = status;
  if (data != NULL && len > 0) {
    memcpy(e->data, data, len);
    e->ev.param.conn.private_data = e->data;
    e->ev.param.conn.private_data_len = (uint8_t)len;
  }
  struct fake_id *owner = listener ? listener : id;
  e->channel = (struct fake_channel *)owner->id.channel;
  struct fake_event **p = &events;
  while (*p != NULL)
    p = &(*p)->next;
  *p = e;
  char b = 1;
  if (write(e->channel->wfd, &b, 1) != 1)
    violation("event channel pipe full");
}

int rdma_get_cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **out) {
  char b;
  if (read(ch->fd, &b, 1) != 1)
    return -1;
  pthread_mutex_lock(&lock);
  for (struct fake_event **p = &events; *p != NULL; p = &(*p)->next)
    if (&(*p)->channel->ch == ch) {
      struct fake_event *e = *p;
      *p = e->next;
      ((struct fake_id *)e->ev.id)->unacked++;
      *out = &e->ev;
      pthread_mutex_unlock(&lock);
      return 0;
    }
  pthread_mutex_unlock(&lock);
  errno = EAGAIN; /* its event went with its id */
  return -1;
}

int rdma_ack_cm_event(struct rdma_cm_event *ev) {
  pthread_mutex_lock(&lock);
  ((struct fake_id *)ev->id)->unacked--;
  pthread_mutex_unlock(&lock);
  free(ev); /* first member of struct fake_event */
  return 0;
}

int rdma_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **out, void *context,
                   enum rdma_port_space ps) {
  struct fake_id *f = calloc(1, sizeof *f);
  f->id.channel = ch;
  f->id.context = context;
  f->id.ps = ps;
  *out = &f->id;
  return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id) {
  struct fake_id *f = (struct fake_id *)id;
  pthread_mutex_lock(&lock);
  if (f->unacked != 0)
    violation("rdma_destroy_id with events not acknowledged (would block for ever)");
  if (id->qp != NULL)
    violation("rdma_destroy_id with its QP still there");
  for (struct fake_event **p = &events; *p != NULL;) { /* unreported events go */
    if ((*p)->ev.id == id) {
      struct fake_event *e = *p;
      *p = e->next;
      free(e);
    } else {
      p = &(*p)->next;
    }
  }
  if (f->peer != NULL) {
    queue_event(f->peer, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
    f->peer->peer = NULL;
  }
  for (int i = 0; i < nlisteners; i++)
    if (listeners[i] == f)
      listeners[i] = listeners[--nlisteners];
  pthread_mutex_unlock(&lock);
  free(f);
  return 0;
}

static int is_fake_address(const struct sockaddr *a) {
  return a->sa_family == AF_INET &&
         ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr) {
  if (!is_fake_address(addr)) {
    errno = ENODEV;
    return -1;
  }
  pthread_mutex_lock(&lock);
  memcpy(&id->route.addr.src_sin, addr, sizeof(struct sockaddr_in));
  if (id->route.addr.src_sin.sin_port == 0)
    id->route.addr.src_sin.sin_port = htons((uint16_t)next_port++);
  id->verbs = the_context();
  id->port_num = 1;
  pthread_mutex_unlock(&lock);
  return 0;
}

int rdma_listen(struct rdma_cm_id *id, int backlog) {
  (void)backlog;
  pthread_mutex_lock(&lock);
  ((struct fake_id *)id)->listening = 1;
  listeners[nlisteners++] = (struct fake_id *)id;
  pthread_mutex_unlock(&lock);
  return 0;
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                      int timeout_ms) {
  (void)timeout_ms;
  if (src != NULL && rdma_bind_addr(id, src) != 0)
    return -1;
  pthread_mutex_lock(&lock);
  memcpy(&id->route.addr.dst_sin, dst, sizeof(struct sockaddr_in));
  queue_event((struct fake_id *)id,
              is_fake_address(dst) ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ADDR_ERROR,
              is_fake_address(dst) ? 0 : -EHOSTUNREACH, NULL, NULL, 0);
  pthread_mutex_unlock(&lock);
  return 0;
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms) {
  (void)timeout_ms;
  pthread_mutex_lock(&lock);
  queue_event((struct fake_id *)id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, NULL, 0);
  pthread_mutex_unlock(&lock);
  return 0;
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *val, size_t len) {
  (void)id;
  if (level != RDMA_OPTION_ID || optname != RDMA_OPTION_ID_ACK_TIMEOUT || len != 1 ||
      *(uint8_t *)val == 0 || *(uint8_t *)val > 31) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
  if (id->verbs == NULL || attr->qp_type != IBV_QPT_RC) {
    errno = EINVAL;
    return -1;
  }
  struct fake_qp *f = calloc(1, sizeof *f);
  pthread_mutex_lock(&lock);
  f->qp.context = id->verbs;
  f->qp.pd = pd;
  f->qp.send_cq = attr->send_cq;
  f->qp.recv_cq = attr->recv_cq;
  f->qp.qp_num = next_qpn++;
  f->qp.state = IBV_QPS_INIT;
  f->max_recv = attr->cap.max_recv_wr;
  f->sig_all = attr->sq_sig_all;
  if (f->max_recv > MAX_RECVS)
    violation("more receives than the fake holds");
  ((struct fake_cq *)attr->send_cq)->users++;
  ((struct fake_cq *)attr->recv_cq)->users++;
  id->qp = &f->qp;
  pthread_mutex_unlock(&lock);
  return 0;
}

void rdma_destroy_qp(struct rdma_cm_id *id) {
  struct fake_qp *f = (struct fake_qp *)id->qp;
  if (f == NULL)
    return;
  pthread_mutex_lock(&lock);
  if (f->peer != NULL)
    f->peer->peer = NULL;
  ((struct fake_cq *)f->qp.send_cq)->users--;
  ((struct fake_cq *)f->qp.recv_cq)->users--;
  id->qp = NULL;
  pthread_mutex_unlock(&lock);
  free(f);
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param) {
  struct fake_id *f = (struct fake_id *)id;
  if (id->qp == NULL || param->private_data_len > 56) {
    errno = EINVAL;
    return -1;
  }
  pthread_mutex_lock(&lock);
  struct fake_id *listener = NULL;
  for (int i = 0; i < nlisteners; i++)
    if (listeners[i]->id.route.addr.src_sin.sin_port == id->route.addr.dst_sin.sin_port)
      listener = listeners[i];
  if (listener == NULL) {
    queue_event(f, RDMA_CM_EVENT_REJECTED, 8 /* no such service */, NULL, NULL, 0);
  } else {
    struct fake_id *n = calloc(1, sizeof *n);
    n->id.channel = listener->id.channel;
    n->id.context = listener->id.context;
    n->id.verbs = the_context();
    n->id.port_num = 1;
    n->id.ps = id->ps;
    n->id.route.addr.src_sin = listener->id.route.addr.src_sin;
    n->id.route.addr.dst_sin = id->route.addr.src_sin;
    n->peer = f;
    f->peer = n;
    queue_event(n, RDMA_CM_EVENT_CONNECT_REQUEST, 0, listener, param->private_data,
                param->private_data_len);
  }
  pthread_mutex_unlock(&lock);
  return 0;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param) {
  struct fake_id *f = (struct fake_id *)id;
  pthread_mutex_lock(&lock);
  if (f->peer == NULL || id->qp == NULL || f->peer->id.qp == NULL) {
    pthread_mutex_unlock(&lock);
    errno = EINVAL;
    return -1;
  }
  struct fake_qp *a = (struct fake_qp *)id->qp, *b = (struct fake_qp *)f->peer->id.qp;
  a->peer = b;
  b->peer = a;
  queue_event(f->peer, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, param ? param->private_data : NULL,
              param ? param->private_data_len : 0);
  queue_event(f, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, NULL, 0);
  pthread_mutex_unlock(&lock);
  return 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *data, uint8_t len) {
  struct fake_id *f = (struct fake_id *)id;
  pthread_mutex_lock(&lock);
  if (f->peer != NULL) {
    queue_event(f->peer, RDMA_CM_EVENT_REJECTED, 28 /* consumer defined */, NULL, data, len);
    f->peer->peer = NULL;
    f->peer = NULL;
  }
  pthread_mutex_unlock(&lock);
  return 0;
}

struct ibv_context **rdma_get_devices(int *num) {
  struct ibv_context **list = calloc(2, sizeof *list);
  int none = getenv("FAKE_RDMA_NONE") && atoi(getenv("FAKE_RDMA_NONE"));
  if (!none)
    list[0] = the_context();
  if (num != NULL)
    *num = none ? 0 : 1;
  return list;
}

void rdma_free_devices(struct ibv_context **list) { free(list); }

const char *rdma_event_str(enum rdma_cm_event_type e) {
  static const char *names[] = {"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
                                "RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
                                "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
                                "RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
                                "RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
                                "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL"};
  return (unsigned)e < sizeof names / sizeof names[0] ? names[e] : "RDMA_CM_EVENT_OTHER";
}

/*
 * loomrun.c — the single-node launcher: starts N ranks of a program with
 * LOOM_RANK/LOOM_NRANKS/LOOM_LOCAL_RANK/LOOM_COMM_ID set (and torch's
 * RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT),
 * passes their output on line by line (prefixed with "[rank] " under
 * --tag-output, as mpirun's), and ends the whole job when one rank fails.
 *
 * Standalone (does not link libloom): C11 + POSIX.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loomrun_bind.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

#define MAX_RANKS 1024
#define KILL_GRACE_S 3.0   /* SIGTERM -> SIGKILL */
#define DRAIN_GRACE_S 1.0  /* output of leftovers after every rank exited */
#define MAX_LINE (1 << 20) /* a longer line is cut */
#define EXIT_USAGE 2
#define EXIT_INTERNAL 125
#define EXIT_TIMEOUT 124
#define FD_RESERVE 64 /* descriptors besides the ranks' pipes */

struct stream {
  int fd; /* read end of the pipe; -1 when closed */
  char *buf;
  size_t len, cap;
};

struct rank {
  pid_t pid; /* 0 once reaped */
  struct stream out[2]; /* [0] = stdout, [1] = stderr */
};

static struct rank *ranks;
static int nranks;
static int prefix_lines; /* --tag-output */
static pid_t pgid; /* the job's process group (pid of rank 0) */
static int out_dead[2]; /* our own stdout/stderr is gone (EPIPE) */
static int wake_pipe[2] = {-1, -1};
static volatile sig_atomic_t pending_signal;
static struct rlimit orig_nofile;
static cpu_set_t *bind_sets; /* --bind-to: rank r's CPUs; NULL: not bound */
static int merge_stderr; /* too few descriptors: a rank's stderr joins its stdout pipe */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_signal(int sig) {
  int saved = errno;
  if (sig != SIGCHLD)
    pending_signal = sig;
  ssize_t r = write(wake_pipe[1], "x", 1);
  (void)r;
  errno = saved;
}

/* Writes everything (our output must not be cut mid-line). */
static void write_all(int which, const char *data, size_t len) {
  int fd = which == 0 ? STDOUT_FILENO : STDERR_FILENO;
  while (len > 0 && !out_dead[which]) {
    ssize_t w = write(fd, data, len);
    if (w > 0) {
      data += w;
      len -= (size_t)w;
    } else if (w < 0 && errno == EAGAIN) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      poll(&p, 1, 100);
    } else if (w < 0 && errno != EINTR) {
      out_dead[which] = 1; /* EPIPE etc.: discard from now on */
    }
  }
}

static void emit_line(int rank, int which, const char *line, size_t len) {
  static char *tmp;
  static size_t tmp_cap;
  size_t need = len + 24;
  if (need > tmp_cap) {
    char *n = realloc(tmp, need);
    if (n == NULL) { /* fall back to unprefixed pieces */
      write_all(which, line, len);
      write_all(which, "\n", 1);
      return;
    }
    tmp = n;
    tmp_cap = need;
  }
  size_t o = prefix_lines ? (size_t)snprintf(tmp, tmp_cap, "[%d] ", rank) : 0;
  memcpy(tmp + o, line, len);
  o += len;
  tmp[o++] = '\n';
  write_all(which, tmp, o);
}

/* Emits the complete lines of a stream's buffer; everything when `all`. */
static void flush_stream(int rank, int which, int all) {
  struct stream *s = &ranks[rank].out[which];
  size_t start = 0;
  if (s->len == 0)
    return;
  for (;;) {
    char *nl = memchr(s->buf + start, '\n', s->len - start);
    if (nl == NULL)
      break;
    emit_line(rank, which, s->buf + start, (size_t)(nl - (s->buf + start)));
    start = (size_t)(nl - s->buf) + 1;
  }
  if (s->len - start >= MAX_LINE || (all && s->len > start)) {
    emit_line(rank, which, s->buf + start, s->len - start);
    start = s->len;
  }
  memmove(s->buf, s->buf + start, s->len - start);
  s->len -= start;
}

static void close_stream(int rank, int which) {
  struct stream *s = &ranks[rank].out[which];
  flush_stream(rank, which, 1);
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
}

static void read_stream(int rank, int which) {
  struct stream *s = &ranks[rank].out[which];
  if (s->cap - s->len < 4096) { /* small at first: there may be 2048 */
    size_t cap = s->cap ? s->cap * 2 : 8192;
    char *n = realloc(s->buf, cap);
    if (n == NULL) {
      fprintf(stderr, "loomrun: out of memory\n");
      close_stream(rank, which);
      return;
    }
    s->buf = n;
    s->cap = cap;
  }
  ssize_t r = read(s->fd, s->buf + s->len, s->cap - s->len);
  if (r > 0) {
    s->len += (size_t)r;
    flush_stream(rank, which, 0);
  } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
    close_stream(rank, which);
  }
}

static void kill_job(int sig) {
  if (pgid > 0)
    kill(-pgid, sig);
}

/* Whether port is free on 127.0.0.1 now: 1, 0 when taken, -1 (errno set)
 * on another failure; with port 0, *got is the kernel's choice. */
static int port_free(int port, int *got) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sin;
  int ok = bind(fd, (struct sockaddr *)&sin, len) == 0 &&
           getsockname(fd, (struct sockaddr *)&sin, &len) == 0;
  int err = errno;
  close(fd);
  errno = err;
  if (ok)
    *got = ntohs(sin.sin_port);
  return ok ? 1 : err == EADDRINUSE ? 0 : -1;
}

/* A free port below the kernel's ephemeral range, or 0 when none is found
 * in a few tries.  A port the kernel handed out (bind to port 0) and got
 * back can be handed out again before rank 0 binds it, to a rank's own
 * listener or outgoing socket (seen: "cannot listen on 127.0.0.1:36763:
 * Address already in use" in the suite); the kernel never hands out ports
 * below its range. */
static int pick_unassigned_port(void) {
  int eph_lo = 32768, eph_hi = 60999;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f != NULL) {
    if (fscanf(f, "%d %d", &eph_lo, &eph_hi) != 2)
      eph_lo = 32768;
    fclose(f);
  }
  int lo = 20000, hi = eph_lo - 1; /* below the usual services' ports too */
  if (hi - lo < 1000)
    return 0;
  static unsigned seed; /* one sequence: a second pick differs from the first */
  if (seed == 0)
    seed = ((unsigned)getpid() << 16) ^ (unsigned)time(NULL) ^ 1u;
  for (int tries = 0; tries < 64; tries++) {
    int got = 0, port = lo + (int)(rand_r(&seed) % (unsigned)(hi - lo + 1));
    if (port_free(port, &got) == 1)
      return got;
  }
  return 0;
}

/* Finds a free port on 127.0.0.1 (below the kernel's ephemeral range, else
 * the kernel's choice; or the first free one of LOOM_PORT_RANGE above
 * `after`). -1 on failure. */
static int pick_port_after(int after) {
  int lo = 0, hi = 0;
  char extra;
  const char *range = getenv("LOOM_PORT_RANGE");
  if (range != NULL && *range != '\0' &&
      (sscanf(range, "%d-%d%c", &lo, &hi, &extra) != 2 || lo < 1 || lo > hi ||
       hi > 65535)) {
    fprintf(stderr, "loomrun: LOOM_PORT_RANGE=\"%s\" is not valid (expected lo-hi "
            "with 1 <= lo <= hi <= 65535)\n", range);
    return -1;
  }
  if (lo > 0 && after >= lo && after < hi)
    lo = after + 1;
  if (lo == 0) {
    int port = pick_unassigned_port();
    if (port > 0 && port != after)
      return port;
    for (int tries = 0; tries < 8; tries++) { /* the kernel's choice, not `after` */
      int got = 0;
      if (port_free(0, &got) != 1) {
        fprintf(stderr, "loomrun: bind 127.0.0.1:0: %s\n", strerror(errno));
        return -1;
      }
      if (got != after)
        return got;
    }
    fprintf(stderr, "loomrun: no free port on 127.0.0.1\n");
    return -1;
  }
  for (int port = lo;; port++) {
    int got = 0, free_now = port_free(port, &got);
    if (free_now == 1)
      return got;
    if (free_now == 0 && port < hi)
      continue; /* the next port of the range */
    if (free_now == 0)
      fprintf(stderr, "loomrun: no free port in LOOM_PORT_RANGE=%s\n", range);
    else
      fprintf(stderr, "loomrun: bind 127.0.0.1:%d: %s\n", port, strerror(errno));
    return -1;
  }
}

static void usage(FILE *f) {
  fprintf(f,
          "Usage: loomrun [options] -n N prog [args...]\n"
          "Starts N ranks of prog on this host for Loom.\n\n"
          "  -n, --np N        number of ranks (1..%d)\n"
          "      --timeout SEC kill the job after SEC seconds (exit code 124)\n"
          "      --keep-going  do not kill the other ranks when one fails\n"
          "      --tag-output  prefix every output line with [rank] (as mpirun's)\n"
          "      --bind-to auto|core|numa|none\n"
          "                    run each rank on the hardware threads of its own core\n"
          "                    (core; when ranks outnumber the cores, consecutive\n"
          "                    ranks share one: 0 and 1 on the first of 2 cores for\n"
          "                    4 ranks), of one NUMA node (numa, alike), or wherever\n"
          "                    the kernel puts it (none); auto (the default): core.\n"
          "                    Only CPUs loomrun may use count:\n"
          "                    give two jobs on one host their own CPUs with\n"
          "                    taskset -c (or --bind-to none), as they would both\n"
          "                    start at the first core\n"
          "      --report-bindings  print each rank's CPUs on stderr\n"
          "      --no-prefix   no prefix (the default; kept for older scripts)\n"
          "  -h, --help        show this help\n"
          "      --version     show the version\n\n"
          "Output lines pass through whole, unprefixed unless --tag-output, so\n"
          "loom-perf --json - | python3 -m json.tool works through loomrun.\n"
          "Each rank gets LOOM_RANK, LOOM_NRANKS, LOOM_LOCAL_RANK, LOOM_COMM_ID\n"
          "(127.0.0.1:<free port>, unless already set; LOOM_PORT_RANGE is honoured),\n"
          "and for torch.distributed scripts RANK, WORLD_SIZE, LOCAL_RANK,\n"
          "LOCAL_WORLD_SIZE, and MASTER_ADDR=127.0.0.1 and MASTER_PORT (another free\n"
          "port) unless already set,\n"
          "LOOM_SOCKET_IFNAME=lo (unless already set) and LOOM_COMM_SECRET (32 random\n"
          "bytes for this job, unless already set: only its ranks can join it).\n"
          "Each rank's stdout and stderr are read through pipes; when the open-file\n"
          "limit (raised to the hard one) is too low for two a rank, stderr joins stdout.\n"
          "Exit status: 0 when every rank succeeded, else that of the first rank\n"
          "that failed (128+N for signal N); 124 on timeout; 2 on bad usage;\n"
          "125 when loomrun itself fails.\n",
          MAX_RANKS);
}

/* In the child: becomes rank `r` and execs; never returns. */
static void exec_rank(int r, int out_w, int err_w, char **argv) {
  signal(SIGPIPE, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setrlimit(RLIMIT_NOFILE, &orig_nofile);
  setpgid(0, r == 0 ? 0 : pgid);
  if (bind_sets != NULL && sched_setaffinity(0, sizeof bind_sets[r], &bind_sets[r]) != 0)
    fprintf(stderr, "loomrun: rank %d: cannot bind to its CPUs: %s\n", r, strerror(errno));
  if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0)
    _exit(127);
  /* Only rank 0 reads our stdin, and not a terminal: outside the
   * terminal's foreground group, a read would stop it (SIGTTIN). */
  if (r != 0 || isatty(STDIN_FILENO)) {
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0 && null_fd != STDIN_FILENO) {
      dup2(null_fd, STDIN_FILENO);
      close(null_fd);
    }
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%d", r);
  setenv("LOOM_RANK", buf, 1);
  setenv("LOOM_LOCAL_RANK", buf, 1);
  setenv("RANK", buf, 1); /* torch.distributed's env:// */
  setenv("LOCAL_RANK", buf, 1);
  execvp(argv[0], argv);
  fprintf(stderr, "loomrun: cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

/* The job's state. */
static int keep_going, nalive, exit_code, have_cause;
static double kill_at; /* when to send SIGKILL; 0 = not killing */

static void set_cause(int code) {
  if (!have_cause)
    exit_code = code;
  have_cause = 1;
}

/* SIGTERM (or `sig`) to the whole job now, SIGKILL KILL_GRACE_S later. */
static void start_kill(int sig) {
  kill_job(sig);
  if (kill_at == 0)
    kill_at = now_s() + KILL_GRACE_S;
}

/* Books the end of process `pid` (a rank, or an orphan of one: ignored). */
static void note_exit(pid_t pid, int status) {
  int r = 0;
  while (r < nranks && ranks[r].pid != pid)
    r++;
  if (r == nranks)
    return;
  ranks[r].pid = 0;
  nalive--;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return;
  char what[96];
  int code = WEXITSTATUS(status), sig = WTERMSIG(status);
  if (WIFSIGNALED(status)) {
    snprintf(what, sizeof what, "killed by signal %d (%s)", sig, strsignal(sig));
    code = 128 + sig;
  } else {
    snprintf(what, sizeof what, "exited with status %d", code);
  }
  if (keep_going && kill_at == 0) {
    fprintf(stderr, "loomrun: rank %d (pid %ld) %s\n", r, (long)pid, what);
  } else if (!have_cause) {
    fprintf(stderr, "loomrun: rank %d (pid %ld) %s%s\n", r, (long)pid, what,
            nalive > 0 ? "; killing the other ranks" : "");
    start_kill(SIGTERM);
  }
  set_cause(code);
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
    note_exit(pid, status);
}

/* Starts rank r; -1 (with a message) when it could not be. */
static int start_rank(int r, char **prog) {
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  if (pipe2(po, O_CLOEXEC) != 0 || (!merge_stderr && pipe2(pe, O_CLOEXEC) != 0)) {
    fprintf(stderr, "loomrun: pipe: %s\n", strerror(errno));
    if (po[0] >= 0) {
      close(po[0]);
      close(po[1]);
    }
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0)
    exec_rank(r, po[1], merge_stderr ? po[1] : pe[1], prog);
  close(po[1]);
  if (pe[1] >= 0)
    close(pe[1]);
  ranks[r].out[0].fd = po[0];
  ranks[r].out[1].fd = pe[0]; /* -1 when merged */
  if (pid < 0) {
    fprintf(stderr, "loomrun: fork: %s\n", strerror(errno));
    close_stream(r, 0);
    close_stream(r, 1);
    return -1;
  }
  if (r == 0)
    pgid = pid;
  setpgid(pid, pgid); /* also done in the child: whichever runs first */
  ranks[r].pid = pid;
  nalive++;
  return 0;
}

/* Forwards output and watches the ranks until every rank has exited and
 * its output is drained (or DRAIN_GRACE_S passed: leftovers hold pipes). */
static void supervise(double timeout) {
  struct pollfd *pfds = calloc((size_t)(2 * nranks + 1), sizeof *pfds);
  int *owner = calloc((size_t)(2 * nranks), sizeof *owner);
  if (pfds == NULL || owner == NULL) {
    fprintf(stderr, "loomrun: out of memory\n");
    set_cause(EXIT_INTERNAL);
    free(pfds);
    return;
  }
  double deadline = timeout > 0 ? now_s() + timeout : 0, drain_until = 0;
  for (;;) {
    reap();
    int sig = pending_signal;
    if (sig != 0) { /* SIGINT/SIGTERM to us: forward */
      pending_signal = 0;
      set_cause(128 + sig);
      start_kill(sig);
    }
    double t = now_s();
    if (deadline > 0 && t >= deadline && kill_at == 0) {
      fprintf(stderr, "loomrun: timeout: the job ran longer than %g s; "
              "killing all ranks\n", timeout);
      exit_code = EXIT_TIMEOUT;
      have_cause = 1;
      start_kill(SIGTERM);
    }
    if (kill_at > 0 && t >= kill_at) {
      kill_job(SIGKILL);
      kill_at = t + 3600; /* nothing more to escalate to */
    }
    int n = 0;
    for (int r = 0; r < nranks; r++)
      for (int w = 0; w < 2; w++)
        if (ranks[r].out[w].fd >= 0) {
          pfds[n] = (struct pollfd){.fd = ranks[r].out[w].fd, .events = POLLIN};
          owner[n++] = 2 * r + w;
        }
    if (nalive == 0) {
      if (drain_until == 0)
        drain_until = t + DRAIN_GRACE_S;
      if (n == 0 || t >= drain_until)
        break;
    }
    double next = 3600;
    if (deadline > 0 && kill_at == 0)
      next = deadline - t;
    if (kill_at > 0 && kill_at - t < next)
      next = kill_at - t;
    if (drain_until > 0 && drain_until - t < next)
      next = drain_until - t;
    pfds[n] = (struct pollfd){.fd = wake_pipe[0], .events = POLLIN};
    int ready = poll(pfds, (nfds_t)n + 1, next <= 0 ? 0 : (int)(next * 1000) + 1);
    if (ready < 0 && errno != EINTR) {
      fprintf(stderr, "loomrun: poll: %s\n", strerror(errno));
      set_cause(EXIT_INTERNAL);
      break; /* the caller still kills and reaps */
    }
    if (ready <= 0)
      continue;
    char drain[64];
    if (pfds[n].revents)
      while (read(wake_pipe[0], drain, sizeof drain) > 0) {
      }
    for (int i = 0; i < n; i++)
      if (pfds[i].revents)
        read_stream(owner[i] / 2, owner[i] % 2);
  }
  free(pfds);
  free(owner);
}

/* A fresh random LOOM_COMM_SECRET per job (unless the caller set one):
 * only this job's ranks can then join its bootstrap or connect to its
 * ranks, even if another job reuses the port (docs/security.md). */
static int set_job_secret(void) {
  const char *given = getenv("LOOM_COMM_SECRET");
  if (given != NULL && *given != '\0')
    return 0;
  unsigned char raw[32];
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
    fprintf(stderr, "loomrun: getrandom failed making the job's secret: %s\n", strerror(errno));
    return -1;
  }
  char text[2 * sizeof raw + 1];
  for (size_t i = 0; i < sizeof raw; i++)
    snprintf(text + 2 * i, 3, "%02x", raw[i]);
  setenv("LOOM_COMM_SECRET", text, 1);
  return 0;
}

/* torch.distributed's env:// variables: the world size, and (unless
 * already set) a rendezvous address on a free port other than
 * LOOM_COMM_ID's (rank 0's TCPStore and Loom's root each bind their own). */
static int set_torch_env(const char *nranks_text) {
  setenv("WORLD_SIZE", nranks_text, 1);
  setenv("LOCAL_WORLD_SIZE", nranks_text, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 0);
  const char *set = getenv("MASTER_PORT");
  if (set != NULL && *set != '\0')
    return 0;
  const char *id = getenv("LOOM_COMM_ID");
  const char *colon = id != NULL ? strrchr(id, ':') : NULL;
  int loom_port = colon != NULL ? atoi(colon + 1) : -1;
  for (int tries = 0; tries < 16; tries++) {
    int port = pick_port_after(loom_port);
    if (port < 0)
      return -1;
    if (port != loom_port) {
      char text[16];
      snprintf(text, sizeof text, "%d", port);
      setenv("MASTER_PORT", text, 1);
      return 0;
    }
  }
  fprintf(stderr, "loomrun: no free port for MASTER_PORT besides LOOM_COMM_ID's %d\n",
          loom_port);
  return -1;
}

/* Two pipes per rank (stdout, stderr): raises the soft descriptor limit
 * as far as the hard one allows (children get the original back).  When
 * that is still too few, each rank's stderr goes into its stdout pipe, one
 * descriptor a rank (said once on our stderr); -1 when even that is too
 * many. */
static int fit_descriptors(void) {
  getrlimit(RLIMIT_NOFILE, &orig_nofile);
  struct rlimit raised = orig_nofile;
  rlim_t two = (rlim_t)(2 * nranks + FD_RESERVE), one = (rlim_t)(nranks + FD_RESERVE);
  if (raised.rlim_cur == RLIM_INFINITY || raised.rlim_cur >= two)
    return 0;
  raised.rlim_cur = raised.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
    raised.rlim_cur = orig_nofile.rlim_cur;
  if (raised.rlim_cur == RLIM_INFINITY || raised.rlim_cur >= two)
    return 0;
  if (raised.rlim_cur < one) {
    fprintf(stderr, "loomrun: %d ranks need %llu open files (one pipe each), but the limit is "
            "%llu: raise it (ulimit -n) or start fewer ranks\n",
            nranks, (unsigned long long)one, (unsigned long long)raised.rlim_cur);
    return -1;
  }
  merge_stderr = 1;
  fprintf(stderr, "loomrun: %d ranks need %llu open files for separate stdout and stderr pipes "
          "but the limit is %llu (ulimit -Hn): each rank's stderr goes to its stdout\n",
          nranks, (unsigned long long)two, (unsigned long long)raised.rlim_cur);
  return 0;
}

/* --bind-to: each rank's CPUs into bind_sets (NULL for none), reported on
 * stderr with --report-bindings. */
static int plan_bindings(enum loomrun_bind bind, int report) {
  char why[160];
  int wrapped = 0;
  if (loomrun_bind_plan(&bind, nranks, &bind_sets, &wrapped, why, sizeof why) != 0) {
    fprintf(stderr, "loomrun: --bind-to: %s\n", why);
    return -1;
  }
  if (wrapped && report)
    fprintf(stderr, "loomrun: %d ranks outnumber the %s: some share one\n", nranks,
            bind == LOOMRUN_BIND_CORE ? "cores" : "NUMA nodes");
  for (int r = 0; report && r < nranks; r++) {
    char cpus[256] = "any (not bound)";
    if (bind_sets != NULL)
      loomrun_bind_format(&bind_sets[r], cpus, sizeof cpus);
    fprintf(stderr, "loomrun: rank %d bound to CPUs %s\n", r, cpus);
  }
  return 0;
}

int main(int argc, char **argv) {
  double timeout = 0;
  enum { OPT_TIMEOUT = 256, OPT_KEEP_GOING, OPT_NO_PREFIX, OPT_TAG_OUTPUT, OPT_VERSION,
         OPT_BIND_TO, OPT_REPORT_BINDINGS };
  enum loomrun_bind bind = LOOMRUN_BIND_AUTO;
  int report_bindings = 0;
  static const struct option longopts[] = {
      {"np", required_argument, NULL, 'n'},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"keep-going", no_argument, NULL, OPT_KEEP_GOING},
      {"no-prefix", no_argument, NULL, OPT_NO_PREFIX},
      {"tag-output", no_argument, NULL, OPT_TAG_OUTPUT},
      {"bind-to", required_argument, NULL, OPT_BIND_TO},
      {"report-bindings", no_argument, NULL, OPT_REPORT_BINDINGS},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, OPT_VERSION},
      {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "+n:h", longopts, NULL)) != -1) {
    char *end;
    switch (c) {
    case 'n': {
      errno = 0;
      long v = strtol(optarg, &end, 10);
      if (errno || end == optarg || *end != '\0' || v < 1 || v > MAX_RANKS) {
        fprintf(stderr, "loomrun: -n \"%s\": expected a number of ranks in 1..%d\n",
                optarg, MAX_RANKS);
        return EXIT_USAGE;
      }
      nranks = (int)v;
      break;
    }
    case OPT_TIMEOUT:
      errno = 0;
      timeout = strtod(optarg, &end);
      if (errno || end == optarg || *end != '\0' ||
          !(timeout > 0 && timeout <= 1e9)) {
        fprintf(stderr, "loomrun: --timeout \"%s\": expected seconds > 0\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_KEEP_GOING:
      keep_going = 1;
      break;
    case OPT_NO_PREFIX:
      prefix_lines = 0;
      break;
    case OPT_TAG_OUTPUT:
      prefix_lines = 1;
      break;
    case OPT_BIND_TO:
      if (loomrun_bind_parse(optarg, &bind) != 0) {
        fprintf(stderr, "loomrun: --bind-to \"%s\": expected auto, core, numa or none\n",
                optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_REPORT_BINDINGS:
      report_bindings = 1;
      break;
    case 'h':
      usage(stdout);
      return 0;
    case OPT_VERSION:
      printf("loomrun (Loom) %s\n", PACKAGE_VERSION);
      return 0;
    default:
      fprintf(stderr, "Try 'loomrun --help'.\n");
      return EXIT_USAGE;
    }
  }
  if (nranks == 0 || optind >= argc) {
    fprintf(stderr, "loomrun: %s\nTry 'loomrun --help'.\n",
            nranks == 0 ? "-n N is required" : "no program given");
    return EXIT_USAGE;
  }
  char **prog = argv + optind;
  if (plan_bindings(bind, report_bindings) != 0)
    return EXIT_INTERNAL;

  if (fit_descriptors() != 0)
    return EXIT_INTERNAL;

  /* The job-wide environment. */
  const char *comm_id = getenv("LOOM_COMM_ID");
  if (comm_id == NULL || *comm_id == '\0') {
    int port = pick_port_after(-1);
    if (port < 0)
      return EXIT_INTERNAL;
    char id[64];
    snprintf(id, sizeof id, "127.0.0.1:%d", port);
    setenv("LOOM_COMM_ID", id, 1);
  }
  if (set_job_secret() != 0)
    return EXIT_INTERNAL;
  char nbuf[32];
  snprintf(nbuf, sizeof nbuf, "%d", nranks);
  setenv("LOOM_NRANKS", nbuf, 1);
  setenv("LOOM_SOCKET_IFNAME", "lo", 0);
  if (set_torch_env(nbuf) != 0)
    return EXIT_INTERNAL;

  /* Orphaned children of the ranks come to us: we reap them and can tell
   * when the job's process group is really empty. */
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    fprintf(stderr, "loomrun: pipe: %s\n", strerror(errno));
    return EXIT_INTERNAL;
  }
  struct sigaction sa = {.sa_handler = on_signal,
                         .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  ranks = calloc((size_t)nranks, sizeof *ranks);
  if (ranks == NULL) {
    fprintf(stderr, "loomrun: out of memory\n");
    return EXIT_INTERNAL;
  }
  for (int r = 0; r < nranks; r++)
    ranks[r].out[0].fd = ranks[r].out[1].fd = -1;
  fflush(stdout);
  for (int r = 0; r < nranks; r++)
    if (start_rank(r, prog) != 0) {
      set_cause(EXIT_INTERNAL);
      start_kill(SIGTERM);
      break;
    }
  supervise(timeout);

  /* Flush what is left, then make sure nothing of the job survives: ranks
   * (when supervise stopped early) and whatever they left behind. */
  for (int r = 0; r < nranks; r++)
    for (int w = 0; w < 2; w++) {
      if (ranks[r].out[w].fd >= 0)
        close_stream(r, w);
      free(ranks[r].out[w].buf);
    }
  if (pgid > 0 && kill(-pgid, 0) == 0) {
    kill_job(SIGTERM);
    for (double until = now_s() + KILL_GRACE_S;
         kill(-pgid, 0) == 0 && now_s() < until;) {
      reap();
      nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000}, NULL);
    }
    kill_job(SIGKILL);
  }
  int status;
  pid_t pid;
  while (nalive > 0 && (pid = waitpid(-1, &status, 0)) > 0)
    note_exit(pid, status);
  free(ranks);
  free(bind_sets);
  return exit_code;
}

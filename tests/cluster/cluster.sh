# cluster.sh — several "nodes" on one machine, for multi-node Loom tests
# (bash library; source it).
#
# A node is a network namespace with one veth into a "switch" namespace that
# holds a bridge, so the root namespace's network is never touched: all
# addresses (10.213.0.0/24) exist only inside this cluster.  Every command run
# on a node gets its own UTS namespace with the hostname loom-node-K, so Loom
# (host id = hostname + boot id) sees K as a separate machine: ranks of one
# node share /dev/shm and use shared memory, ranks of different nodes use TCP
# over the veths.
#
#   cluster_up N [RATE]       N nodes; RATE (tc syntax, e.g. 200mbit) shapes
#                             each node's outgoing traffic with tbf.
#                             Returns 77 with a reason when the machine
#                             cannot do it (not root, no netns/veth/bridge).
#   cluster_run K cmd...      runs cmd on node K (its netns and hostname)
#   cluster_ranks NODES RANKS_PER_NODE TIMEOUT prog args...
#                             runs NODES x RANKS_PER_NODE Loom ranks, rank r on
#                             node r / RANKS_PER_NODE; output lines "[r] ..."
#   cluster_rank_pid R        pid of the running rank R (for fault injection)
#   cluster_down              removes everything; idempotent
#
# Names carry the owner's pid and start time (loomc-PID-START-...), so
# cluster_up first removes what earlier runs that were killed (SIGKILL, no
# trap) left, and parallel runs never collide.  cluster_up traps EXIT, INT,
# TERM and HUP to call cluster_down; a caller that needs its own EXIT work
# puts it in CLUSTER_ON_EXIT (a command, run after cluster_down).

CLUSTER_SUBNET=${CLUSTER_SUBNET:-10.213.0}
CLUSTER_IFNAME=veth0         # a node's interface, inside its namespace
CLUSTER_NODES=0
CLUSTER_PREFIX=""
CLUSTER_DIR=""
CLUSTER_RUNS=0
CLUSTER_ACTIVE_RUN=""         # the run in progress, for the trap
CLUSTER_STDERR=""             # fd: stderr as cluster_up found it, for the trap

# Sets the hostname ($1) and execs the rest, as one process: no child (such
# as hostname(1)) that would carry the rank's environment, so the rank is
# the only process with it.
CLUSTER_SET_HOSTNAME='echo "$1" >/proc/sys/kernel/hostname && shift && exec "$@"'

cluster_log() { echo "cluster: $*" >&2; }

# Start time of process $1 in clock ticks since boot (field 22 of
# /proc/PID/stat); empty when it does not run.  With the pid it names one
# process for good, even after the pid is reused.
cluster_proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  local -a f
  read -r -a f <<<"$stat"
  echo "${f[19]}"
}

# Sets CLUSTER_TAG to loomc-PID-START of this shell, the one that runs
# cluster_up and owns the cluster (its trap tears it down).  Not called in
# $(...): that would name the subshell.
cluster_owner_tag() {
  local me=$BASHPID
  CLUSTER_TAG="loomc-$me-$(cluster_proc_start "$me")"
}

# Kills every process in namespace $1 and deletes it.  Deleting a node's
# namespace destroys its veth pair; the switch's takes the bridge with it.
cluster_del_ns() {
  local ns=$1 pids i
  for i in $(seq 1 50); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -z "$pids" ] && break
    kill -9 $pids 2>/dev/null
    sleep 0.1
  done
  [ -n "$pids" ] && cluster_log "processes $pids in $ns did not die within 5 s"
  ip netns del "$ns" 2>/dev/null
}

# Segments in /dev/shm that Loom processes listed in file $1 left behind.
cluster_shm_left() {
  [ -s "$1" ] || return 0
  local pid f
  while read -r pid; do
    for f in /dev/shm/loom-"$pid"-*; do
      [ -e "$f" ] && echo "$f"
    done
  done <"$1"
  return 0
}

# Removes what runs whose owner no longer lives left behind.
cluster_cleanup_stale() {
  local ns owner start live dir
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^loomc-[0-9]*-[0-9]*-'); do
    owner=${ns#loomc-}; start=${owner#*-}; owner=${owner%%-*}; start=${start%%-*}
    live=$(cluster_proc_start "$owner")
    [ "$live" = "$start" ] && continue
    cluster_log "removing $ns, left by pid $owner which no longer runs"
    cluster_del_ns "$ns"
  done
  for dir in /tmp/loomc-[0-9]*-[0-9]*.*; do
    [ -d "$dir" ] || continue
    owner=${dir#/tmp/loomc-}; start=${owner#*-}; owner=${owner%%-*}; start=${start%%.*}
    live=$(cluster_proc_start "$owner")
    [ "$live" = "$start" ] && continue
    rm -f $(cluster_shm_left "$dir/pids")
    rm -rf "$dir"
  done
}

# cluster_probe [RATE] — can this machine do it (and shape to RATE)?
# Prints the reason and returns 77 when not.
cluster_probe() {
  local why="" p rate=${1:-}
  cluster_owner_tag
  p="$CLUSTER_TAG-probe"
  if [ "$(id -u)" != 0 ]; then why="not root (network namespaces need CAP_NET_ADMIN)"
  elif ! command -v ip >/dev/null; then why="no 'ip' command (iproute2)"
  elif ! command -v unshare >/dev/null; then why="no 'unshare' command (util-linux)"
  elif ! ip netns add "$p" 2>/dev/null; then why="'ip netns add' failed: no network namespaces here"
  elif ! ip -n "$p" link add pa type veth peer name pb 2>/dev/null; then why="cannot create a veth pair (no veth support)"
  elif ! ip -n "$p" link add pbr type bridge 2>/dev/null; then why="cannot create a bridge (no bridge support)"
  elif [ "$(ip netns exec "$p" unshare --uts sh -c "$CLUSTER_SET_HOSTNAME" x loom-probe uname -n 2>/dev/null)" != loom-probe ]; then
    why="cannot set a hostname under 'unshare --uts'"
  elif [ -n "$rate" ] && ! command -v tc >/dev/null; then why="no 'tc' command to shape traffic"
  elif [ -n "$rate" ] && ! tc -n "$p" qdisc add dev pa root tbf rate "$rate" burst 256kb latency 50ms 2>/dev/null; then
    why="'tc qdisc add ... tbf rate $rate' failed (no sch_tbf, or a bad rate)"
  fi
  ip netns del "$p" 2>/dev/null
  [ -z "$why" ] && return 0
  echo "SKIP: $why"
  return 77
}

cluster_ns() { echo "$CLUSTER_PREFIX-n$1"; }
cluster_addr() { echo "$CLUSTER_SUBNET.$(($1 + 1))"; }
cluster_hostname() { echo "loom-node-$1"; }

cluster_trap() {
  local sig=$1 code=$2
  trap - EXIT INT TERM HUP
  # Background jobs of this shell (a cluster_ranks run with &) go first.
  local j
  for j in $(jobs -p); do kill -TERM "$j" 2>/dev/null; done
  if [ "$sig" != EXIT ]; then
    # To the stderr cluster_up had: the interrupted command's may be a file.
    {
      cluster_log "caught SIG$sig; tearing the cluster down"
      # Output of the run it interrupted, so that a hang can be diagnosed.
      [ -n "${CLUSTER_ACTIVE_RUN:-}" ] && cluster_print_logs "$CLUSTER_ACTIVE_RUN" 1024
    } >&"${CLUSTER_STDERR:-2}" 2>&1
  fi
  cluster_down
  [ -n "${CLUSTER_ON_EXIT:-}" ] && eval "$CLUSTER_ON_EXIT"
  exit "$code"
}

# cluster_up N [RATE]
cluster_up() {
  local n=${1:-} rate=${2:-} k sw ns i state
  case $n in ''|*[!0-9]*) cluster_log "cluster_up: expected a node count, got '$n'"; return 2 ;; esac
  if [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then cluster_log "cluster_up: $n nodes: expected 1..250"; return 2; fi
  if [ -n "$CLUSTER_PREFIX" ]; then cluster_log "cluster_up: a cluster is already up ($CLUSTER_PREFIX)"; return 2; fi
  cluster_probe "$rate" || return $?
  cluster_cleanup_stale
  cluster_owner_tag
  CLUSTER_PREFIX=$CLUSTER_TAG
  CLUSTER_DIR=$(mktemp -d "/tmp/$CLUSTER_PREFIX.XXXXXX") || return 1
  : >"$CLUSTER_DIR/pids"
  exec {CLUSTER_STDERR}>&2
  trap 'cluster_trap EXIT $?' EXIT
  trap 'cluster_trap INT 130' INT
  trap 'cluster_trap TERM 143' TERM
  trap 'cluster_trap HUP 129' HUP
  CLUSTER_NODES=$n
  sw="$CLUSTER_PREFIX-sw"
  # Both ends of each veth are created inside namespaces: nothing ever
  # appears in the root namespace.
  ip netns add "$sw" &&
    ip -n "$sw" link add br0 type bridge &&
    ip -n "$sw" link set br0 up || { cluster_log "cannot build the switch namespace $sw"; cluster_down; return 1; }
  for k in $(seq 0 $((n - 1))); do
    ns=$(cluster_ns "$k")
    ip netns add "$ns" &&
      ip -n "$sw" link add "p$k" type veth peer name "$CLUSTER_IFNAME" netns "$ns" &&
      ip -n "$sw" link set "p$k" master br0 &&
      ip -n "$sw" link set "p$k" up &&
      ip -n "$ns" link set lo up &&
      ip -n "$ns" addr add "$(cluster_addr "$k")/24" dev "$CLUSTER_IFNAME" &&
      ip -n "$ns" link set "$CLUSTER_IFNAME" up || { cluster_log "cannot build node $k ($ns)"; cluster_down; return 1; }
    if [ -n "$rate" ]; then
      # burst: at least one 64 KiB GSO packet and ~10 ms of traffic.
      tc -n "$ns" qdisc add dev "$CLUSTER_IFNAME" root tbf rate "$rate" burst 256kb latency 50ms ||
        { cluster_log "cannot shape node $k with 'tc qdisc add ... tbf rate $rate'"; cluster_down; return 1; }
    fi
  done
  # Bridge ports forward once their state is 3 (no STP: at once, normally).
  for k in $(seq 0 $((n - 1))); do
    for i in $(seq 1 50); do
      state=$(ip netns exec "$sw" cat "/sys/class/net/p$k/brport/state" 2>/dev/null)
      [ "$state" = 3 ] && break
      sleep 0.1
    done
    [ "$state" = 3 ] || { cluster_log "bridge port p$k never forwards (state '$state')"; cluster_down; return 1; }
  done
  cluster_log "up: $n node(s) $CLUSTER_PREFIX-n0..$((n - 1)), $CLUSTER_SUBNET.1..$n on $CLUSTER_IFNAME${rate:+, tbf rate $rate}"
}

# cluster_run K cmd... — runs cmd in node K's namespace under its hostname;
# its pid is recorded so cluster_down can find its shared-memory segments.
cluster_run() {
  local k=$1; shift
  if [ -z "$CLUSTER_PREFIX" ] || [ "$k" -ge "$CLUSTER_NODES" ] 2>/dev/null; then
    cluster_log "cluster_run: no node $k (cluster of $CLUSTER_NODES)"; return 2
  fi
  (
    echo "$BASHPID" >>"$CLUSTER_DIR/pids"
    exec ip netns exec "$(cluster_ns "$k")" unshare --uts \
      sh -c "$CLUSTER_SET_HOSTNAME" loom-cluster "$(cluster_hostname "$k")" "$@"
  )
}

# Processes in the cluster's node namespaces; with $1, only those whose
# environment holds LOOM_CLUSTER_RUN=$1 (a run's ranks and their children).
cluster_pids() {
  local k pid
  for k in $(seq 0 $((CLUSTER_NODES - 1))); do
    for pid in $(ip netns pids "$(cluster_ns "$k")" 2>/dev/null); do
      if [ -z "${1:-}" ] || tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "LOOM_CLUSTER_RUN=$1"; then
        echo "$pid"
      fi
    done
  done
}

# cluster_rank_pid R — pid of running rank R of the current cluster_ranks.
cluster_rank_pid() {
  local pid
  for pid in $(cluster_pids); do
    if tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "LOOM_RANK=$1"; then
      echo "$pid"; return 0
    fi
  done
  return 1
}

# A port nothing in node 0's namespace uses (not even in TIME_WAIT).
cluster_free_port() {
  local port=$((29500 + CLUSTER_RUNS)) used
  used=$(ip netns exec "$(cluster_ns 0)" ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://')
  while printf '%s\n' "$used" | grep -qx "$port"; do port=$((port + 1)); done
  echo "$port"
}

cluster_describe_status() { # status -> words, as loomrun says them
  if [ "$1" -gt 128 ]; then
    echo "killed by signal $(($1 - 128)) ($(kill -l $(($1 - 128)) 2>/dev/null))"
  else
    echo "exited with status $1"
  fi
}

# cluster_print_logs DIR N — the ranks' output, each line prefixed "[r] ".
cluster_print_logs() {
  local r
  for ((r = 0; r < $2; r++)); do
    # (awk, not sed: a last line without a newline still gets one)
    [ -f "$1/rank$r.log" ] && awk -v p="[$r] " '{ print p $0 }' "$1/rank$r.log"
  done
  return 0
}

# cluster_signal_ranks SIG pid... — pids of 0 are ranks already reaped.
cluster_signal_ranks() {
  local sig=$1 p; shift
  for p in "$@"; do
    [ "$p" != 0 ] && kill "-$sig" "$p" 2>/dev/null
  done
  return 0
}

# cluster_ranks NODES RANKS_PER_NODE TIMEOUT prog args...
# Environment of each rank: LOOM_COMM_ID (node 0's address, a free port;
# rank 0 hosts the root there), LOOM_RANK, LOOM_NRANKS, LOOM_LOCAL_RANK,
# LOOM_SOCKET_IFNAME==veth0 (CLUSTER_SOCKET_IFNAME, when set, replaces
# it: to test what a wrong choice does).  When a rank fails the others get SIGTERM, and
# SIGKILL 3 s later; CLUSTER_KEEP_GOING=1 lets them run on (to see how they
# fail).  After TIMEOUT seconds every rank is killed and the status is 124.
# Status: 0 when every rank exited 0, else the first failure's (128+signal
# for a signal).  No process of the run outlives the call.
cluster_ranks() {
  if [ $# -lt 4 ]; then cluster_log "usage: cluster_ranks NODES RANKS_PER_NODE TIMEOUT prog args..."; return 2; fi
  local nodes=$1 rpn=$2 timeout_s=$3; shift 3
  local v
  for v in "$nodes" "$rpn" "$timeout_s"; do
    case $v in ''|*[!0-9]*|0) cluster_log "cluster_ranks: '$v' is not a positive integer"; return 2 ;; esac
  done
  if [ -z "$CLUSTER_PREFIX" ] || [ "$nodes" -gt "$CLUSTER_NODES" ]; then
    cluster_log "cluster_ranks: $nodes node(s) wanted, the cluster has $CLUSTER_NODES"; return 2
  fi
  # Counted from the directories: a call inside $(...) cannot update a variable.
  CLUSTER_RUNS=$(($(ls -d "$CLUSTER_DIR"/run* 2>/dev/null | wc -l) + 1))
  local n=$((nodes * rpn)) dir="$CLUSTER_DIR/run$CLUSTER_RUNS"
  local marker="$CLUSTER_PREFIX-run$CLUSTER_RUNS" port r k
  port=$(cluster_free_port)
  mkdir -p "$dir"
  local -a pid rank_pid
  for ((r = 0; r < n; r++)); do
    k=$((r / rpn))
    (
      export LOOM_COMM_ID="$(cluster_addr 0):$port" LOOM_RANK=$r LOOM_NRANKS=$n \
        LOOM_LOCAL_RANK=$((r % rpn)) LOOM_SOCKET_IFNAME="${CLUSTER_SOCKET_IFNAME-=$CLUSTER_IFNAME}" \
        LOOM_CLUSTER_RUN="$marker"
      exec ip netns exec "$(cluster_ns "$k")" unshare --uts \
        sh -c "$CLUSTER_SET_HOSTNAME" loom-cluster "$(cluster_hostname "$k")" "$@"
    ) <"/dev/null" >"$dir/rank$r.log" 2>&1 &
    pid[r]=$!
    rank_pid[r]=${pid[r]}
    echo "${pid[r]}" >>"$CLUSTER_DIR/pids"
  done
  CLUSTER_ACTIVE_RUN="$dir"
  local alive=$n rc=0 st deadline=$((SECONDS + timeout_s)) kill_at=0 what
  local -a done_now
  while [ "$alive" -gt 0 ]; do
    done_now=()
    for ((r = 0; r < n; r++)); do
      [ "${pid[r]}" = 0 ] && continue
      kill -0 "${pid[r]}" 2>/dev/null && continue
      # (stderr: no "Killed" job notice from bash; the line below says it)
      wait "${pid[r]}" 2>/dev/null; st=$?
      alive=$((alive - 1))
      pid[r]=0
      [ "$st" = 0 ] && continue
      # A rank killed by a signal is the likelier cause than the ranks
      # that failed in the same tick because of it: report it first.
      if [ "$st" -gt 128 ]; then done_now=("$r:$st" "${done_now[@]}"); else done_now+=("$r:$st"); fi
    done
    for what in "${done_now[@]}"; do
      r=${what%%:*}; st=${what#*:}
      what="rank $r (pid ${rank_pid[r]} on $(cluster_hostname $((r / rpn)))) $(cluster_describe_status "$st")"
      if [ "$rc" = 0 ]; then # the first failure: the run's status
        rc=$st
        if [ "${CLUSTER_KEEP_GOING:-0}" = 1 ]; then
          cluster_log "$what"
        else
          [ "$alive" -gt 0 ] && what="$what; killing the other ranks"
          cluster_log "$what"
          cluster_signal_ranks TERM "${pid[@]}"
          kill_at=$((SECONDS + 3))
        fi
      elif [ "${CLUSTER_KEEP_GOING:-0}" = 1 ] && [ "$kill_at" = 0 ]; then
        cluster_log "$what"
      fi
    done
    [ "$alive" -eq 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ] && [ "$kill_at" = 0 ]; then
      cluster_log "timeout: the job ran longer than $timeout_s s; killing all ranks"
      rc=124
      cluster_signal_ranks TERM "${pid[@]}"
      kill_at=$((SECONDS + 3))
    fi
    if [ "$kill_at" != 0 ] && [ "$SECONDS" -ge "$kill_at" ]; then
      cluster_signal_ranks KILL "${pid[@]}"
      kill_at=$((SECONDS + 3600))
    fi
    sleep 0.1
  done
  # Anything a rank started (it carries the run's marker) goes too.
  local left i
  for i in $(seq 1 50); do
    left=$(cluster_pids "$marker")
    [ -z "$left" ] && break
    kill -9 $left 2>/dev/null
    sleep 0.1
  done
  [ -n "$left" ] && { cluster_log "processes $left of the run would not die"; [ "$rc" = 0 ] && rc=1; }
  cluster_print_logs "$dir" "$n"
  CLUSTER_ACTIVE_RUN=""
  return "$rc"
}

# cluster_down — kills every process on the nodes, deletes the namespaces
# (with them the veths and the bridge), removes shared-memory segments that
# the cluster's ranks left (saying so) and the run directory.  Idempotent.
cluster_down() {
  local k left
  [ -z "$CLUSTER_PREFIX" ] && return 0
  for k in $(seq 0 $((CLUSTER_NODES - 1))); do
    cluster_del_ns "$(cluster_ns "$k")"
  done
  cluster_del_ns "$CLUSTER_PREFIX-sw"
  # Leftovers of a cluster_up that failed half-way.
  for k in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$CLUSTER_PREFIX-"); do
    cluster_del_ns "$k"
  done
  if [ -n "$CLUSTER_DIR" ]; then
    left=$(cluster_shm_left "$CLUSTER_DIR/pids")
    if [ -n "$left" ]; then
      cluster_log "removing shared memory left by the cluster's ranks:" $left
      rm -f $left
    fi
    rm -rf "$CLUSTER_DIR"
  fi
  CLUSTER_PREFIX="" CLUSTER_DIR="" CLUSTER_NODES=0
}

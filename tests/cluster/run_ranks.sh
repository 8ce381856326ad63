#!/bin/bash
# run_ranks.sh NODES RANKS_PER_NODE TIMEOUT prog args...
#
# Makes a cluster of NODES nodes (network namespaces + hostnames, see
# cluster.sh), runs NODES x RANKS_PER_NODE Loom ranks on it (rank r on node
# r / RANKS_PER_NODE), prints their output as "[r] line", and tears the
# cluster down however it ends.  Environment:
#   CLUSTER_RATE=200mbit   shape each node's outgoing traffic (tc tbf)
#   CLUSTER_KEEP_GOING=1   a failed rank does not end the others
# Exit status: 0 when every rank exited 0; the first failed rank's status
# (128+signal when killed); 124 after TIMEOUT seconds; 77 when this machine
# cannot make the cluster (with the reason); 2 on a usage error.
#
#   tests/cluster/run_ranks.sh 2 2 120 build/tests/ranks/coll_test
. "$(dirname "$0")/cluster.sh"

if [ $# -lt 4 ]; then
  echo "usage: $0 NODES RANKS_PER_NODE TIMEOUT prog args..." >&2
  exit 2
fi
for v in "$1" "$2" "$3"; do
  case $v in ''|*[!0-9]*|0) echo "$0: '$v' is not a positive integer" >&2; exit 2 ;; esac
done
cluster_up "$1" "${CLUSTER_RATE:-}" || exit $?
cluster_ranks "$@"
# (the EXIT trap tears the cluster down and keeps this status)

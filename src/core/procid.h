/*
 * procid.h — how the node's other ranks can tell whether this process's
 * pid means the same process to them: ranks in different PID namespaces
 * (containers sharing the host's /dev/shm) see each other's pids as some
 * other process's, or none.  Before a rank trusts a peer's pid (liveness
 * by kill(pid, 0), process_vm_readv, /proc/PID/fd), both compare this.
 */
#ifndef LOOM_CORE_PROCID_H
#define LOOM_CORE_PROCID_H

#include <stdint.h>

/* This process's PID namespace: the inode number of /proc/self/ns/pid
 * (read once); 0 when /proc cannot tell, which matches no peer. */
uint32_t loom_pid_namespace(void);

/* Whether a peer whose loom_pid_namespace() is `theirs` names processes
 * by the same pids as this one. */
int loom_same_pid_namespace(uint32_t theirs);

#endif

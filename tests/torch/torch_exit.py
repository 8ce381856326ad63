"""torch_exit.py — processes using the "loom" backend exit, whatever way
their program ends, within a bound and with the status the program chose:
never a hang, never a signal.

Each iteration runs three scenarios of 2 ranks:

  raise   rank 1 raises mid-training (an async all_reduce in flight); rank
          0's next all_reduce fails naming it, and it raises too: both exit
          with Python's status 1;
  exit10  both ranks queue an async all_reduce and sys.exit(10) at once,
          without waiting or destroying the group (what PyTorch's own
          suite does when a test raises): both exit 10;
  spawn   the raise scenario in processes of torch.multiprocessing's
          spawn start method, as PyTorch's suite starts its ranks.

    torch_exit.py [--iterations N] [--timeout S] [--scenarios raise,exit10,spawn]
                  [--backend loom|gloo]

(--backend gloo runs the same programs on gloo, to tell torch's own exit
faults from Loom's.)

Exits 0 when every process of every iteration exited as required; prints
each one that did not (its status, or "hung" and its output).
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import tempfile
import time

ALLOWED = {"raise": 1, "exit10": 10, "spawn": 1}


def rank_body(scenario, rank, store_path, backend):
    import torch
    import torch.distributed as dist
    import loom_torch  # noqa: F401  registers "loom"

    store = dist.FileStore(store_path, 2)
    dist.init_process_group(backend, store=store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=20))
    x = torch.ones(1 << 16)
    for _ in range(3):
        dist.all_reduce(x)
    pending = dist.all_reduce(torch.ones(1 << 18), async_op=True)  # noqa: F841 (left in flight)
    if scenario == "exit10":
        sys.exit(10)
    if rank == 1:
        raise RuntimeError("rank 1: an exception in the training loop")
    time.sleep(0.2)
    for _ in range(100):  # fails once rank 1 is gone
        dist.all_reduce(x)
    raise SystemExit("rank 0: rank 1 died but every all_reduce succeeded")


def spawned(rank, store_path, backend):
    rank_body("spawn", rank, store_path, backend)


def run_subprocesses(scenario, timeout, backend):
    """2 ranks of this script; returns (status per rank, outputs)."""
    with tempfile.TemporaryDirectory(prefix="torch-exit-") as tmp:
        store = os.path.join(tmp, "store")
        wrapper = shlex.split(os.environ.get("LOOM_TEST_WRAPPER", ""))  # valgrind
        procs = [subprocess.Popen(wrapper + [sys.executable, os.path.abspath(__file__),
                                             "--rank", str(r), "--scenario", scenario,
                                             "--store", store, "--backend", backend],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for r in range(2)]
        return [wait_one(p, timeout) for p in procs]


def wait_one(p, timeout):
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return "hung", out.decode(errors="replace")


def run_spawn(timeout, backend):
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="torch-exit-") as tmp:
        ctx = mp.start_processes(spawned, args=(os.path.join(tmp, "store"), backend), nprocs=2,
                                 join=False, start_method="spawn")
        deadline = time.monotonic() + timeout
        for p in ctx.processes:
            p.join(max(0.1, deadline - time.monotonic()))
        results = []
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                results.append(("hung", ""))
            else:
                results.append((p.exitcode, ""))
        return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--scenario")
    ap.add_argument("--store")
    ap.add_argument("--scenarios", default="raise,exit10,spawn")
    ap.add_argument("--backend", default="loom")
    args = ap.parse_args()
    if args.rank is not None:
        rank_body(args.scenario, args.rank, args.store, args.backend)
        return 0
    os.environ.setdefault("LOOM_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    scenarios = args.scenarios.split(",")
    bad = 0
    start = time.monotonic()
    for it in range(args.iterations):
        for scenario in scenarios:
            t0 = time.monotonic()
            results = run_spawn(args.timeout, args.backend) if scenario == "spawn" else \
                run_subprocesses(scenario, args.timeout, args.backend)
            for rank, (status, out) in enumerate(results):
                if status != ALLOWED[scenario]:
                    bad += 1
                    how = "hung" if status == "hung" else (
                        "killed by signal %d" % -status if isinstance(status, int) and status < 0
                        else "exit status %s" % status)
                    print("FAIL: iteration %d, %s, rank %d: %s (want exit status %d), %.1f s"
                          % (it, scenario, rank, how, ALLOWED[scenario], time.monotonic() - t0))
                    print(out[-3000:])
    print("%d iterations x %d scenarios in %.0f s: %s" % (
        args.iterations, len(scenarios), time.monotonic() - start,
        "every process exited as required" if bad == 0 else "%d processes did not" % bad))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

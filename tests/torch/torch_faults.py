"""torch_faults.py — the "loom" backend when a rank is late, stuck or dead.

  --scenario late   the last rank joins an all_reduce 1 s late: the others'
                    wait(timeout=200 ms) raises, then wait() completes it.
  --scenario stuck  the last rank skips an all_reduce (process group timeout
                    3 s): the others get a RuntimeError naming it, from
                    wait() and from the future, in about the timeout (no
                    hang); later calls fail at once with the same text;
                    every process exits.
  --scenario dead   the last rank exits abruptly: the others get a
                    RuntimeError naming it long before the timeout.
  --scenario shrink rank 2 of 4 exits abruptly: the others' all_reduce
                    raises naming it, loom_torch.shrink([2]) gives them a
                    group of 3 (ranks in order) with no store, and
                    all_reduce and all_gather on it give exact results;
                    loom_torch.dump writes both groups' flight recorders.
  --scenario straggler  (with LOOM_STRAGGLER_WARN_MS=400) the last rank
                    joins an all_reduce 1.5 s late: each other rank gets
                    one RuntimeWarning naming it; the late rank gets none.

Run by test_torch.sh: torch_faults.py --launch N --scenario S.
"""

import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import warnings

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import loom_torch  # noqa: E402,F401  (registers "loom")

STUCK_TIMEOUT_S = 3


def scenario(args):
    for i, a in enumerate(args.extra):
        if a == "--scenario" and i + 1 < len(args.extra):
            return args.extra[i + 1]
    raise SystemExit("torch_faults.py: --scenario late|stuck|dead|straggler is required")


def late(args, c):
    harness.init(args, "loom", timeout_s=30)
    r, n = args.rank, args.nranks
    last = n - 1
    x = torch.full((10,), float(r + 1))
    if r == last:
        time.sleep(1.0)
        dist.all_reduce(x)
    else:
        w = dist.all_reduce(x, async_op=True)
        c.raises(lambda: w.wait(timeout=datetime.timedelta(milliseconds=200)),
                 "not complete after wait(timeout=200 ms)", "wait with a short timeout")
        c.true(not w.is_completed(), "the late all_reduce is still running")
        c.true(w.wait(), "a second wait() completes it")
    c.equal(x, torch.full((10,), float(n * (n + 1) // 2)), "the late all_reduce's result")
    dist.destroy_process_group()


def straggler(args, c):
    harness.init(args, "loom", timeout_s=30)
    r, n = args.rank, args.nranks
    last = n - 1
    x = torch.full((10,), float(r + 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if r == last:
            time.sleep(1.5)
        dist.all_reduce(x)
        for _ in range(10000):  # Loom's warning is issued as a pending call
            pass
    c.equal(x, torch.full((10,), float(n * (n + 1) // 2)), "the late all_reduce's result")
    texts = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    late_ones = [t for t in texts if "for rank %d, which has not joined it" % last in t]
    if r == last:
        c.true(not late_ones, "the late rank is not warned: %s" % texts)
    else:
        c.true(len(late_ones) == 1, "one RuntimeWarning naming rank %d: %s" % (last, texts))
        for t in late_ones:
            print("rank %d: warning: %s" % (r, t), flush=True)
    dist.destroy_process_group()


def stuck(args, c):
    harness.init(args, "loom", timeout_s=STUCK_TIMEOUT_S)
    r, n = args.rank, args.nranks
    last = n - 1
    dist.barrier()
    if r == last:
        time.sleep(STUCK_TIMEOUT_S + 4)  # skips the all_reduce
    else:
        start = time.monotonic()
        w = dist.all_reduce(torch.ones(1000), async_op=True)
        text = c.raises(w.wait, "rank %d" % last, "wait() of an all_reduce that rank %d skipped"
                        % last)
        elapsed = time.monotonic() - start
        c.true("timeout" in text or "failed or exited" in text,
               "the error says what happened: %r" % text[:300])
        c.true(STUCK_TIMEOUT_S * 0.8 <= elapsed <= STUCK_TIMEOUT_S + 5,
               "the error came after about the group's timeout (%.1f s)" % elapsed)
        c.true(w.is_completed() and not w.is_success(),
               "the failed work is complete, not a success")
        c.raises(w.get_future().wait, "rank %d" % last, "the future carries the error")
        start = time.monotonic()
        c.raises(lambda: dist.all_reduce(torch.ones(3)), "rank %d" % last,
                 "the next call fails with the same peer named")
        c.true(time.monotonic() - start < 1.0, "the next call fails at once")
    dist.destroy_process_group()


def dead(args, c):
    harness.init(args, "loom", timeout_s=60)
    r, n = args.rank, args.nranks
    last = n - 1
    dist.barrier()
    if r == last:
        print("rank %d: %d checks passed (exiting abruptly)" % (r, c.count), flush=True)
        os._exit(0)
    start = time.monotonic()
    c.raises(lambda: dist.all_reduce(torch.ones(100)), "rank %d" % last,
             "all_reduce after rank %d died" % last)
    c.true(time.monotonic() - start < 15, "the error came long before the 60 s timeout")
    dist.destroy_process_group()


def shrink(args, c):
    harness.init(args, "loom", timeout_s=60)
    r, n = args.rank, args.nranks
    victim = 2
    dist.barrier()
    if r == victim:
        print("rank %d: %d checks passed (exiting abruptly)" % (r, c.count), flush=True)
        os._exit(0)
    c.raises(lambda: dist.all_reduce(torch.ones(100)), "rank %d" % victim,
             "all_reduce after rank %d died" % victim)
    start = time.monotonic()
    group = loom_torch.shrink([victim])
    c.true(time.monotonic() - start < 10, "the shrink took %.2f s" % (time.monotonic() - start))
    members = [q for q in range(n) if q != victim]
    c.true(group.size() == n - 1 and group.rank() == members.index(r),
           "rank %d of %d in the shrunk group" % (group.rank(), group.size()))
    for count in (1, 1000, 1 << 18):
        x = torch.full((count,), float(r + 1))
        dist.all_reduce(x, group=group)
        c.equal(x, torch.full((count,), float(sum(q + 1 for q in members))),
                "all_reduce of %d floats on the shrunk group" % count)
    got = [torch.zeros(2, dtype=torch.int64) for _ in members]
    dist.all_gather(got, torch.tensor([r, r * r]), group=group)
    c.equal(torch.stack(got), torch.tensor([[q, q * q] for q in members]),
            "all_gather on the shrunk group: the survivors in order")
    # The flight recorders, through loom_torch.dump: the old group's ends
    # with the failed all_reduce and the shrink; the new group's holds the
    # sweep, all finished.
    tmp = tempfile.mkdtemp()
    loom_torch.dump(os.path.join(tmp, "old.json"))
    loom_torch.dump(os.path.join(tmp, "new.json"), group=group)
    with open(os.path.join(tmp, "old.json")) as f:
        old = json.load(f)["entries"]
    with open(os.path.join(tmp, "new.json")) as f:
        new = json.load(f)
    shutil.rmtree(tmp)
    c.true([(e["coll"], e["state"]) for e in old[-2:]] ==
           [("allreduce", "failed"), ("commShrink", "finished")],
           "the old group's dump ends with the failed all_reduce and the shrink: %s" %
           [(e["coll"], e["state"]) for e in old[-2:]])
    c.true(new["nranks"] == n - 1 and
           [(e["coll"], e["state"]) for e in new["entries"]] ==
           [("allreduce", "finished")] * 3 + [("allgather", "finished")],
           "the new group's dump holds the sweep")
    del group
    dist.destroy_process_group()


def main(args, c):
    {"late": late, "stuck": stuck, "dead": dead, "shrink": shrink,
     "straggler": straggler}[scenario(args)](args, c)


if __name__ == "__main__":
    harness.run(main)

#!/usr/bin/python3
"""gloo-perf.py — the loom-perf sweep timed with torch.distributed on the gloo
backend, so that Loom can be put side by side with gloo (what PyTorch uses on
CPUs):

    bench/gloo-perf.py -b 8 -e 64M -f 4            (2 ranks, all-reduce)
    bench/gloo-perf.py -C allgather -b 64K -e 256M

Spawns -t ranks (default 2) as forked processes that meet in a FileStore.
float32, sum.  Same table columns as loom-perf.  dist.all_reduce works in
place on its tensor and gloo has no in-place all-gather, so the one form of
each call is timed in the out-of-place columns and the in-place ones say N/A.
all-gather: dist.all_gather into views of one output tensor
(all_gather_into_tensor is not implemented by gloo in torch 1.13).
Each rank runs one intra-op thread (torch.set_num_threads(1)), as MPI and
Loom ranks do; gloo keeps its own I/O thread.  Time: as loom-perf, the mean
microseconds of -n iterations after -w warm-ups, of the slowest rank.
-T sets how long a rank waits for the others in one call (default 300 s).
Exit status 1 when any element is wrong or a rank failed, 2 on a usage error.
"""
import argparse
import datetime
import os
import sys
import tempfile
import time

COLLS = ("allreduce", "allgather")
EXIT_WRONG = 3  # a rank found wrong elements (a crash exits 1)


def parse_size(text):
    """Bytes with an optional K, M or G suffix (and B), as loom-perf reads them."""
    s = text.strip()
    mult = 1
    if s[-1:] in ("B", "b"):
        s = s[:-1]
    suffix = s[-1:].upper()
    if suffix in ("K", "M", "G"):
        mult = 1 << {"K": 10, "M": 20, "G": 30}[suffix]
        s = s[:-1]
    if not s.isdigit():
        raise argparse.ArgumentTypeError("bad number '%s'" % text)
    v = int(s) * mult
    if v > 2**31 - 1:
        raise argparse.ArgumentTypeError("bad number (at most 2G-1) '%s'" % text)
    return v


def parse_options(argv):
    p = argparse.ArgumentParser(
        prog="gloo-perf.py",
        description="torch.distributed gloo all-reduce / all-gather sweep, "
        "in loom-perf's table format (float32, sum).")
    p.add_argument("-C", dest="coll", choices=COLLS, default="allreduce",
                   help="collective (default allreduce)")
    p.add_argument("-t", dest="nranks", type=int, default=2, help="ranks (default 2)")
    p.add_argument("-b", dest="min_bytes", type=parse_size, default=8,
                   help="smallest message (default 8); K, M, G suffixes")
    p.add_argument("-e", dest="max_bytes", type=parse_size, default=64 << 20,
                   help="largest message (default 64M)")
    p.add_argument("-i", dest="step_bytes", type=parse_size, default=None,
                   help="increment between sizes")
    p.add_argument("-f", dest="factor", type=parse_size, default=2,
                   help="multiplication factor between sizes (default 2)")
    p.add_argument("-n", dest="iters", type=parse_size, default=20,
                   help="timed iterations per size (default 20)")
    p.add_argument("-w", dest="warmup", type=parse_size, default=5,
                   help="warm-up iterations per size (default 5)")
    p.add_argument("-c", dest="check", type=int, choices=(0, 1), default=1,
                   help="check results (default 1)")
    p.add_argument("-T", dest="timeout", type=int, default=300,
                   help="seconds a rank waits for the others in a call (default 300)")
    o = p.parse_args(argv)
    if o.step_bytes is not None and o.step_bytes == 0:
        p.error("bad step '0'")
    if o.factor == 0 or o.iters == 0 or o.nranks < 1:
        p.error("the factor, iteration and rank counts must be positive")
    if o.min_bytes > o.max_bytes:
        p.error("minbytes is larger than maxbytes")
    return o


def sizes(o):
    b = o.min_bytes
    while b <= o.max_bytes:
        yield b
        if o.step_bytes is not None:
            b += o.step_bytes
        else:
            b = b * o.factor if b else 1


def value(torch, coll, r, count, seed):
    """Small integers: every sum is exact in float32, whatever the order
    (the values of mpi-perf and ceiling)."""
    k = torch.arange(count, dtype=torch.int32) + seed
    if coll == "allgather":
        return ((r * 31 + k * 7) % 97).to(torch.float32)
    return ((k * 7 + r * 3) % 8).to(torch.float32)


def rank_main(rank, o, store_path):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    n = o.nranks
    store = dist.FileStore(store_path, n)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=o.timeout))
    per_rank = o.coll == "allgather"
    bus_factor = (n - 1) / n if per_rank else 2.0 * (n - 1) / n
    maxcount = o.max_bytes // 4
    send = torch.zeros(maxcount // n if per_rank else maxcount, dtype=torch.float32)
    recv = torch.zeros(maxcount, dtype=torch.float32)

    def run(count):
        if per_rank:
            dist.all_gather(list(recv[:count * n].view(n, count).unbind(0)), send[:count])
        else:
            dist.all_reduce(send[:count], op=dist.ReduceOp.SUM)

    def slowest(x):
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    def check_once(count, seed):
        send[:count] = value(torch, o.coll, rank, count, seed)
        recv[:count * n if per_rank else count] = -1.0
        run(count)
        if per_rank:
            got = recv[:count * n]
            expect = torch.cat([value(torch, o.coll, r, count, seed) for r in range(n)])
        else:
            got = send[:count]
            expect = sum(value(torch, o.coll, r, count, seed) for r in range(n))
        wrong = torch.tensor([int((got != expect).sum().item())], dtype=torch.int64)
        dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
        # Timed all-reduces then add zeros: no growth toward inf or NaN.
        send.zero_()
        return int(wrong.item())

    if rank == 0:
        print("# gloo-perf: torch.distributed %s, gloo backend, torch %s"
              % ("all_gather" if per_rank else "all_reduce", torch.__version__))
        step = (o.factor, "factor") if o.step_bytes is None else (o.step_bytes, "bytes")
        print("# nRanks %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d "
              "validation: %d" % (n, o.min_bytes, o.max_bytes, step[0], step[1], o.warmup,
                                  o.iters, o.check))
        print("#\n#%54s%-33s%s" % ("", "out-of-place", "in-place"))
        hdr = "#%11s  %12s  %8s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s"
        print(hdr % ("size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong",
                     "time", "algbw", "busbw", "#wrong"))
        print(hdr % ("(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                     "(GB/s)", "(GB/s)", ""))
        sys.stdout.flush()

    total_wrong, bw_sum, bw_count, seed = 0, 0.0, 0, 0
    for nbytes in sizes(o):
        count = nbytes // 4 // (n if per_rank else 1)
        total = count * 4 * (n if per_rank else 1)
        if count == 0:
            continue
        wrong = -1
        if o.check:
            wrong = check_once(count, seed)
            seed += 1
            total_wrong += wrong
        for _ in range(o.warmup):
            run(count)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(o.iters):
            run(count)
        us = slowest((time.perf_counter() - t0) * 1e6 / o.iters)
        if rank == 0:
            algbw = total / (us * 1e3)
            busbw = algbw * bus_factor
            bw_sum += busbw
            bw_count += 1
            tfmt = "%7.0f" if us >= 10000 else "%7.1f" if us >= 100 else "%7.2f"
            print("%12d  %12d  %8s  %6s  %7s  %6.2f  %6.2f  %6s  %7s  %6s  %6s  %6s"
                  % (total, count, "float", "none" if per_rank else "sum", tfmt % us, algbw,
                     busbw, str(wrong) if wrong >= 0 else "N/A", "N/A", "N/A", "N/A", "N/A"))
            sys.stdout.flush()
    if rank == 0:
        print("# Out of bounds values : %d %s" % (total_wrong, "FAILED" if total_wrong else "OK"))
        print("# Avg bus bandwidth    : %g \n#" % (bw_sum / bw_count if bw_count else 0.0))
        sys.stdout.flush()
    dist.destroy_process_group()
    sys.stdout.flush()
    if total_wrong:
        sys.exit(EXIT_WRONG)


def main():
    o = parse_options(sys.argv[1:])
    try:
        import torch.distributed as dist
        import multiprocessing as mp
        import multiprocessing.connection as mp_connection
    except ImportError as e:
        print("gloo-perf.py: cannot import torch (%s); install PyTorch (Debian: "
              "python3-torch)" % e, file=sys.stderr)
        return 1
    if not dist.is_available() or not dist.is_gloo_available():
        print("gloo-perf.py: this torch has no gloo backend", file=sys.stderr)
        return 1
    # gloo binds to the address the host name resolves to; loopback always works.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ctx = mp.get_context("fork")  # no second import of torch per rank
    with tempfile.TemporaryDirectory(prefix="gloo-perf.") as tmp:
        store_path = os.path.join(tmp, "store")
        procs = [ctx.Process(target=rank_main, args=(r, o, store_path))
                 for r in range(o.nranks)]
        for p in procs:
            p.start()
        status, left, stopping = 0, list(procs), False
        while left:
            mp_connection.wait([p.sentinel for p in left])
            for p in [p for p in left if p.exitcode is not None]:
                left.remove(p)
                if p.exitcode != 0:
                    status = 1
                    if p.exitcode != EXIT_WRONG and not stopping:
                        stopping = True
                        # The others would wait for it until gloo's timeout.
                        print("gloo-perf.py: rank %d failed (exit code %s)"
                              % (procs.index(p), p.exitcode), file=sys.stderr)
                        for q in left:
                            q.terminate()
    return status


if __name__ == "__main__":
    sys.exit(main())
